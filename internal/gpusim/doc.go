// Package gpusim owns gpupack's GPU node simulator: a scripted scenario of
// nodes, GPUs (whole or MIG-partitioned), pods and activity patterns over
// time, its state at any moment in dcgm-exporter's exact exposition format,
// the same state as usage.Series for in-process runs, and its ground truth
// (true allocated and active GPU-seconds per pod).
//
// It stands in for real GPUs in tests and demos. It must not import net/http,
// client-go or any CLI library: the fake-dcgm verb serves what it writes.
package gpusim
