// Package app is gpupack's application layer: each use case written once,
// owned by no verb. The CLI verbs are flags -> app -> printer; `gpupack
// serve` (demo and live) and the demo call the same functions.
//
//   - Measure a window (Measure): raw or hourly (Accounting.Hourly decides,
//     in one place), from a PromQL store or the embedded demo.
//   - Load a cluster (Cluster.Load): the demo, a snapshot file or the live
//     cluster; read a usage file against it (ReadUsage).
//   - Diagnose the pending GPU pods with usage facts (Diagnose), and how long
//     they and the pods scheduled in a window waited (QueueWait,
//     PendingPods).
//   - Plan from measured usage (MakePlan).
//   - Simulate placement policies on a trace (Simulate).
//   - The dashboard's view (View; DemoView for the embedded demo).
//
// app sits between the edges (internal/cli, internal/serve) and the pure
// core; it uses the adapters (internal/source, internal/render). It never
// imports a verb or internal/serve: internal/repocheck enforces it.
package app
