#!/usr/bin/env bash
# Builds Karpenter's kwok cloud provider (the main package kwok/ of the Go
# module sigs.k8s.io/karpenter), which gpupack's end-to-end tests run against
# the test cluster, and caches it outside the work tree, keyed by version:
#
#   ${GPUPACK_BIN_CACHE:-$HOME/.cache/gpupack/bin}/karpenter-<version>_<os>-<arch>/karpenter-kwok
#
# The version is the one the repository pins Karpenter's NodePool CRD at
# (internal/render/planout/testdata/crds/README.md); v1.14.3 and later need a
# newer Go than the repository's.
#
# Idempotent: a binary already in the cache directory is not rebuilt.
# The last line of output is always the directory holding the binary.
#
# Usage:
#   hack/karpenter-bins.sh              build what is missing, print the directory
#   hack/karpenter-bins.sh --print-dir  print the directory only, build nothing
#
# The build runs in a throwaway module in a temporary directory, so the
# repository's go.mod never depends on sigs.k8s.io/karpenter; the replace
# directives of Karpenter's own go.mod (none at this version) are copied into
# it, so the build resolves the modules Karpenter's release does.
set -euo pipefail

KARPENTER_VERSION=v1.14.1

export GOWORK=off GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0

source "$(dirname "$0")/lib/bincache.sh"
bincache_open karpenter-bins "karpenter-${KARPENTER_VERSION}_$(go env GOOS)-$(go env GOARCH)" "$@"
start=${SECONDS}
log "cache directory: ${bin_dir}"

bincache_have "karpenter ${KARPENTER_VERSION} kwok provider" karpenter-kwok

bincache_module karpenter-bins

log "karpenter ${KARPENTER_VERSION} kwok provider: building"
go mod edit -require="sigs.k8s.io/karpenter@${KARPENTER_VERSION}"
karpenter_mod="$(go mod download -json "sigs.k8s.io/karpenter@${KARPENTER_VERSION}" | jq -r .GoMod)"
replaces="$(go mod edit -json "${karpenter_mod}" | jq -r '(.Replace // [])[]
	| "\(.Old.Path)\(if .Old.Version then "@" + .Old.Version else "" end)=\(.New.Path)\(if .New.Version then "@" + .New.Version else "" end)"')"
for r in ${replaces}; do
	go mod edit -replace="${r}"
done
log "karpenter ${KARPENTER_VERSION}: copied $(wc -w <<<"${replaces}") replace directives"
nice -n 10 go get "sigs.k8s.io/karpenter/kwok@${KARPENTER_VERSION}"
nice -n 10 go build -trimpath \
	-ldflags="-s -w -X sigs.k8s.io/karpenter/pkg/operator.Version=${KARPENTER_VERSION}" \
	-o "${work_dir}/karpenter-kwok" sigs.k8s.io/karpenter/kwok
# The move is atomic within one file system, so the cache never holds a
# partial binary.
mv -f "${work_dir}/karpenter-kwok" "${bin_dir}/karpenter-kwok.tmp"
mv -f "${bin_dir}/karpenter-kwok.tmp" "${bin_dir}/karpenter-kwok"
log "karpenter ${KARPENTER_VERSION} kwok provider: built in $((SECONDS - start))s"
echo "${bin_dir}"
