// Package reclaim finds the workloads that hold GPUs without work and says,
// for each, the reversible action its owner allows: scale a Deployment or
// StatefulSet to zero (which also pauses its HorizontalPodAutoscaler), pause
// a KEDA ScaledObject, stop a Kubeflow Notebook, suspend a Job, deactivate a
// Kueue Workload, or, for a bare pod, evict it (not restorable, never
// approved by policy alone).
//
// Detect reads the accounting's per-pod facts (hourly GPU activity, the
// pattern's burst share, the application metric, CPU use), the pods' start
// state and their owners, and a Policy (opt-in namespaces, per-class idle
// windows and grace periods, the exemption label, business hours, caps,
// auto-approval). Every candidate carries its evidence and a hash of the
// objects and evidence an approval binds to. Record is the ledger entry of
// an action, with what to put back; Measure compares a record's predicted
// saving with the accounting of the hours after it.
//
// reclaim is pure: it imports the core (usage, cluster) and the vocabulary
// (api/wellknown), never client-go, net/http or a CLI library. The
// Actuator port is implemented by internal/actuator/kube.
package reclaim
