module github.com/gpupack/gpupack

go 1.26
