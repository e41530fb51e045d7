// Package e2e runs gpupack-scheduler (built by hack/build-scheduler.sh)
// as a second scheduler against the real control plane of
// internal/testkit/testcluster, with kwok's fake GPU nodes. Without the binaries the
// tests skip, unless $GPUPACK_E2E is set, when they fail.
package e2e
