// Package diagnose explains every Pending GPU pod of a cluster snapshot: the
// first cause in the order allocation, memory, placement, application (then
// no such hardware, and quota/other), with structured evidence, the fix
// and its remedy (the JSON patch, kubectl commands or mig-parted config
// that carries it out, derived exactly from the evidence; none for advice),
// the FailedScheduling message the stock kube-scheduler would give
// (FitErrorMessage: its format and its filters' words, exactly), and apart
// from it gpupack's own verdict on every node. After them, the GPU pods
// that failed after scheduling (Report.Failures: rejected by the kubelet,
// or crashing on their GPU), read from the words their status keeps
// (cluster.PodFailure.Cause), each with its fix.
//
// Every "does it fit, and why not" question, including the what-ifs (the
// node emptied, the pod's rules relaxed, idle GPUs reconfigured), is put to
// placement.Fit; diagnose only chooses the questions and reads the answers.
// It also owns the reading of the kube-scheduler's FailedScheduling words as
// causes (SchedulerCauses), so that edges can say whether gpupack's cause
// agrees with the scheduler's. Per-pod usage facts come in as usage.Facts,
// their one home (read from the usage file by usage.ParseFacts); the GPU
// memory estimator for models is package vram.
//
// diagnose is a pure package: it must not import client-go, net/http or any
// CLI library; it writes patches and configs as plain values marshalled
// with encoding/json and sigs.k8s.io/yaml (through gpuoperator).
package diagnose
