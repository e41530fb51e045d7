// Package gpupack is gpupack's kube-scheduler framework plugin: a thin
// adapter over package placement, so that the scheduler, the simulator and
// the diagnosis decide with the same function.
//
//   - PreFilter converts the pod once (internal/source/kube) into a placement.Demand
//     and keeps it in the CycleState.
//   - Filter calls placement.Fit against the node's placement.NodeState and
//     returns its reasons in the scheduler's words; on its hot path, a node
//     that fits, it asks only placement.FitsGPUs, since the profile's
//     default filters have made the node-level checks. A node's state is
//     built from the framework's NodeInfo and cached by the NodeInfo's
//     generation.
//   - Score asks the configured placement policy (gpupack's
//     fragmentation-aware one by default), normalised to 0..100.
//   - Both remember their answer on the node's state for the demand's
//     placement.DemandKey (and the policy's epoch), so that a node
//     unchanged since the last pod of the same shape costs a lookup.
//   - Reserve picks the exact GPUs, MIG slice or replica and records them;
//     Bind binds the pod with them written on the Binding (annotation gpupack.io/gpu-devices);
//     Unreserve releases them.
//   - A pod that asks for GPUs only through ResourceClaims (DRA) is left to
//     the upstream DynamicResources plugin to filter and allocate; GPUPack
//     scores it by best fit on each node's free DRA GPUs (dra.go).
//   - PostFilter adds gpupack's summary of why the pod fits nowhere to the
//     scheduler's FailedScheduling event and PodScheduled condition, and
//     records it as an event of its own (reason GPUPackUnschedulable).
//
// Device accounting: a node's state is placement.RebuildNode of its pods,
// the rule the live loader's snapshot goes through for diagnose and plan,
// so both see the same pod on the same GPU, slice or replica. A pod's
// record is its annotation (wellknown.AnnotationGPUDevices, read by
// kube.ConvertPod), else this plugin's reservation; pods without one (placed
// by another scheduler) get Fit's default choice. A record that names a
// share already taken, or that does not exist, is not trusted: the pod's
// devices are recomputed and the conflict logged.
//
// It imports k8s.io/kubernetes and lives in its own Go module (scheduler/)
// so that the main module never depends on it.
package gpupack
