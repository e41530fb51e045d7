// Package change turns a plan into a change set: per node, the operator
// labels that change (nvidia.com/mig.config, nvidia.com/device-plugin.config,
// the DRA pool selector), the GPUs whose configuration changes, the pods
// that must stop first and why, the PodDisruptionBudget of each, where the
// plan's proof places each afterwards, the device-plugin allocatable the
// node must show after the switch, and the GPU-hours the stop costs; all
// bound to a content hash that an approval names.
//
// It also holds the pure rules that applying a change set checks as it
// goes: what the device plugin offers for a set of GPUs (Offered), what a
// pod holds (Resource), the excess of a shrinking config (Excess), whether
// a node shows what the change promised (Verify), and what
// mig-manager's state label says (ReadMIGState).
//
// change is pure: it imports the core (cluster, plan) and the GPU
// operator's vocabulary, never client-go, net/http or a CLI library.
package change
