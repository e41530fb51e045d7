// Package cluster owns gpupack's view of a cluster: an immutable snapshot of
// nodes (CPU, memory, labels, taints and GPUs with their sharing mode) and
// pods (requests, constraints and where they are bound), and the loaders
// that build one from the openb trace CSVs or from a versioned snapshot file.
//
// A snapshot is never modified after it is built; code that needs to change
// it builds a new one (nodes and pods are shared, so that is cheap).
//
// cluster is a pure package: it must not import client-go, net/http or any
// CLI library. Loaders from Kubernetes objects live at the edge.
package cluster
