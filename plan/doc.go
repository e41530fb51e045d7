// Package plan turns a cluster snapshot and measured usage into a sharing
// plan: per workload (the pods of one owner) whether to reclaim it, what
// device it really needs and by which method to share it (MIG, time-slicing
// or MPS, or none); per node pool the MIG layouts, time-slice replicas and
// MPS clients that host those workloads on the fewest GPUs; the NVIDIA
// device plugin and mig-parted configurations and node labels that apply
// it; and the proof, a replay of the changed cluster through the
// simulator's placement step (GPUs and nodes freed, money saved, pods left
// pending, risks), with the baseline worth reserving and the workloads
// that suit spot capacity.
//
// plan is a pure package: it must not import client-go, net/http, the
// Prometheus client, any CLI library, or the Kubernetes API types
// (k8s.io/api, k8s.io/apimachinery). What it applies through Kubernetes
// objects it states as its own types (DRAPlan, DeviceTaintRule), in the
// words of api/nvidiadra; the edge (internal/render/planout) builds the
// objects. Usage comes in as usage.Facts (per pod usage.PodFacts), which
// package usage owns.
package plan
