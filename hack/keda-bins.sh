#!/usr/bin/env bash
# Builds KEDA's operator (keda-operator) and its external metrics API server
# (keda-adapter) from the pinned Go module github.com/kedacore/keda/v2, and
# caches them outside the work tree, keyed by version:
#
#   ${GPUPACK_BIN_CACHE:-$HOME/.cache/gpupack/bin}/keda-<version>_<os>-<arch>/
#
# The end-to-end KEDA test (internal/e2e/keda_test.go) starts both against
# the test cluster: the operator scales a Deployment between 0 and
# minReplicaCount itself, and the adapter serves external.metrics.k8s.io to
# the HPA controller, which scales it above that.
#
# Idempotent: a binary already in the cache directory is not rebuilt.
# The last line of output is always the directory holding the binaries.
#
# Usage:
#   hack/keda-bins.sh              build what is missing, print the directory
#   hack/keda-bins.sh --print-dir  print the directory only, build nothing
#
# Both binaries link every one of KEDA's scalers (and so the cloud SDKs they
# use), which is what makes the cold build long; see docs/testing.md for the
# measured figure. The build runs in a throwaway module in a temporary
# directory, so the repository's go.mod never depends on KEDA.
set -euo pipefail

# Pinned version: the same as the ScaledObject CRD the tests install
# (internal/render/planout/testdata/crds/README.md). KEDA v2.21 needs a newer
# Go than the repository's.
KEDA_VERSION=v2.20.2
KEDA_MODULE=github.com/kedacore/keda/v2

export GOWORK=off GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0

source "$(dirname "$0")/lib/bincache.sh"
bincache_open keda-bins "keda-${KEDA_VERSION}_$(go env GOOS)-$(go env GOARCH)" "$@"

# Binary name in the cache = main package in the module.
components=(
	keda-operator="${KEDA_MODULE}/cmd/operator"
	keda-adapter="${KEDA_MODULE}/cmd/adapter"
)

missing=()
for pair in "${components[@]}"; do
	[[ -s "${bin_dir}/${pair%%=*}" ]] || missing+=("${pair}")
done

start=${SECONDS}
log "cache directory: ${bin_dir}"
if ((${#missing[@]} == 0)); then
	log "keda ${KEDA_VERSION}: cached"
	echo "${bin_dir}"
	exit 0
fi

bincache_module keda-bins
go mod edit -require="${KEDA_MODULE}@${KEDA_VERSION}"

# KEDA's go.mod pins k8s.io/*, controller-runtime and the Prometheus modules
# with replace directives, which apply only in KEDA's own module; the build
# module copies each of them, so the build resolves the versions KEDA tested.
keda_mod="$(go mod download -json "${KEDA_MODULE}@${KEDA_VERSION}" | jq -r .GoMod)"
replaces="$(go mod edit -json "${keda_mod}" | jq -r '
	.Replace[]
	| select(.New.Version != null)
	| "\(.Old.Path)=\(.New.Path)@\(.New.Version)"')"
for r in ${replaces}; do
	go mod edit -replace="${r}"
done
log "keda ${KEDA_VERSION}: copied $(wc -w <<<"${replaces}") replace directives from its go.mod"

pkgs=()
for pair in "${missing[@]}"; do
	pkgs+=("${pair#*=}")
done
log "keda ${KEDA_VERSION}: building ${missing[*]%%=*}"
nice -n 10 go get "${pkgs[@]/%/@${KEDA_VERSION}}"

# One go build for both, so their shared dependencies compile once; each
# binary then moves into the cache, so the cache never holds a partial file.
out="${work_dir}/out"
mkdir -p "${out}"
version_pkg="${KEDA_MODULE}/version"
nice -n 10 go build -trimpath \
	-ldflags="-s -w -X ${version_pkg}.Version=${KEDA_VERSION#v}" \
	-o "${out}/" "${pkgs[@]}"
for pair in "${missing[@]}"; do
	mv -f "${out}/$(basename "${pair#*=}")" "${bin_dir}/${pair%%=*}"
done

log "keda ${KEDA_VERSION}: built in $((SECONDS - start))s"
echo "${bin_dir}"
