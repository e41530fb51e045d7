#!/usr/bin/env bash
# Builds (or finds cached) the real Kubernetes components with hack/k8s-bins.sh
# and the other components with their hack/*-bins.sh (Karpenter's kwok
# provider, Thanos, KEDA), then runs the tests that start them. GPUPACK_E2E=1 makes
# a missing binary a failure instead of a skip, so this script can never pass
# by skipping.
# Extra arguments go to go test, e.g. hack/e2e.sh -v -run TestSmoke.
set -euo pipefail

cd "$(dirname "$0")/.."
bin_dir="$(hack/k8s-bins.sh | tee /dev/stderr | tail -n 1)"
karpenter_dir="$(hack/karpenter-bins.sh | tee /dev/stderr | tail -n 1)"
thanos_dir="$(hack/thanos-bins.sh | tee /dev/stderr | tail -n 1)"
keda_dir="$(hack/keda-bins.sh | tee /dev/stderr | tail -n 1)"
echo "[e2e] binaries in ${bin_dir}, ${karpenter_dir}, ${thanos_dir} and ${keda_dir}"
GPUPACK_E2E=1 GPUPACK_K8S_BINDIR="${bin_dir}" GPUPACK_KARPENTER_BINDIR="${karpenter_dir}" GPUPACK_THANOS_BINDIR="${thanos_dir}" GPUPACK_KEDA_BINDIR="${keda_dir}" go test ./internal/testkit/testcluster/... ./internal/e2e/... -count=1 "$@"
