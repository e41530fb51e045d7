// Package e2e holds gpupack's end-to-end tests against real components:
// Debian's prometheus binary, and a real kube-apiserver, kube-scheduler and
// kwok GPU nodes (internal/testkit/testcluster). Against the cluster, the live
// snapshot must agree with the apiserver on every allocation, gpupack's
// diagnosis of each pending pod must name a cause that the scheduler's own
// FailedScheduling message implies, deploy/rbac.yaml must grant exactly
// enough, and the live loader is benchmarked on 1,000 nodes. The cluster
// tests skip without the binaries of hack/k8s-bins.sh, and fail instead when
// GPUPACK_E2E is set (hack/e2e.sh). It has no code outside its tests.
package e2e
