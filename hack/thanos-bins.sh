#!/usr/bin/env bash
# Builds Thanos (one binary: sidecar, store, receive and query are its
# subcommands) from the pinned github.com/thanos-io/thanos module, and caches
# it outside the work tree, keyed by version:
#
#   ${GPUPACK_BIN_CACHE:-$HOME/.cache/gpupack/bin}/thanos-<version>_<os>-<arch>/thanos
#
# Idempotent: a binary already in the cache directory is not rebuilt.
# The last line of output is always the directory holding the binary.
#
# Usage:
#   hack/thanos-bins.sh              build it if missing, print the directory
#   hack/thanos-bins.sh --print-dir  print the directory only, build nothing
#
# The build runs in a throwaway module in a temporary directory, so the
# repository's go.mod never depends on Thanos. A cold build (a fresh Go
# build cache) takes about 6 minutes of CPU; on a 2-core machine shared at a
# load average of 19-22 it took 28 minutes (docs/testing.md).
set -euo pipefail

# Pinned version, and the Go toolchain it is built with: the newest release
# that the repository's Go (1.26.8) builds. v0.42.5 is the same code with a
# go directive of 1.26.10; set both here (THANOS_GOTOOLCHAIN=go1.26.10, which
# go fetches from the module proxy) to move to it.
THANOS_VERSION=v0.42.4
THANOS_GOTOOLCHAIN=local

export GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=0

# The local Go names the platform, so that --print-dir fetches no toolchain.
source "$(dirname "$0")/lib/bincache.sh"
bincache_open thanos-bins "thanos-${THANOS_VERSION}_$(GOTOOLCHAIN=local go env GOOS)-$(GOTOOLCHAIN=local go env GOARCH)" "$@"

start=${SECONDS}
bincache_have "thanos ${THANOS_VERSION}" thanos

export GOTOOLCHAIN="${THANOS_GOTOOLCHAIN}"
bincache_module thanos-bins
go mod edit -require="github.com/thanos-io/thanos@${THANOS_VERSION}"

# A replace directive applies only in the main module, so Thanos' own (forks
# and pins its build depends on) are copied into the build module.
thanos_mod="$(go mod download -json "github.com/thanos-io/thanos@${THANOS_VERSION}" | jq -r .GoMod)"
replaces="$(go mod edit -json "${thanos_mod}" | jq -r '
	.Replace // [] | .[]
	| "\(.Old.Path)\(if .Old.Version then "@" + .Old.Version else "" end)=\(.New.Path)\(if .New.Version then "@" + .New.Version else "" end)"')"
for r in ${replaces}; do
	go mod edit -replace="${r}"
done
log "thanos ${THANOS_VERSION}: building (copied $(wc -w <<<"${replaces}") replace directives)"

nice -n 10 go get "github.com/thanos-io/thanos/cmd/thanos@${THANOS_VERSION}"
version_pkg=github.com/prometheus/common/version
# The tags are Thanos' own (.promu.yml): slicelabels makes Prometheus'
# labels.Labels the slice that Thanos' gRPC codec reads in place; without
# it the sidecar panics on its first answer.
nice -n 10 go build -trimpath -tags netgo,slicelabels \
	-ldflags="-s -w -X ${version_pkg}.Version=${THANOS_VERSION#v} -X ${version_pkg}.Branch=release -X ${version_pkg}.Revision=${THANOS_VERSION}" \
	-o "${work_dir}/thanos" github.com/thanos-io/thanos/cmd/thanos
mv -f "${work_dir}/thanos" "${bin_dir}/thanos"
log "thanos ${THANOS_VERSION}: built in $((SECONDS - start))s"
echo "${bin_dir}"
