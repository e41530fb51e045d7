// Package agent owns the pure logic of `gpupack agent`, the node agent that
// attributes a shared GPU's activity and memory to the pods whose
// processes use it: reading a process's cgroup into its pod and container
// (ParseCgroup), merging NVML's per-process samples of an interval
// (Processes), remembering processes that exit (CgroupCache), and joining
// them with the kubelet's device holders and the node's pods (Attribute)
// into per-container figures and the share of each device's activity it
// could attribute (DeviceFigures.Coverage).
//
// NVML, /proc, the kubelet's pod-resources API and the API server are
// adapters at the edge; they hand this package plain values. agent is a
// pure package: it must not import client-go, net/http, the Prometheus
// client or any CLI library.
package agent
