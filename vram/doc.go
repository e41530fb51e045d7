// Package vram estimates the GPU memory a model needs to serve (weights, KV
// cache, runtime overhead) and lists the catalogue's GPUs, tensor-parallel
// groups and MIG profiles that hold it. The model is described by a
// ModelSpec: a parameter count and data type, and, for the KV cache, its
// attention geometry, read from a Hugging Face config.json (ParseHFConfig)
// or a built-in model family (Family).
//
// vram is a pure package: it must not import client-go, net/http or any
// CLI library.
package vram
