#!/usr/bin/env bash
# Builds a current Prometheus (3.x) from the pinned
# github.com/prometheus/prometheus module, for benchmarks that compare it
# with Debian's Prometheus 2.42 (the one on PATH, which the tests use), and
# caches it outside the work tree, keyed by version:
#
#   ${GPUPACK_BIN_CACHE:-$HOME/.cache/gpupack/bin}/prometheus-<version>_<os>-<arch>/prometheus
#
# Put that directory first on PATH to have a benchmark start it instead of
# Debian's (promtool stays Debian's). Idempotent: a binary already in the
# cache directory is not rebuilt. The last line of output is always the
# directory holding the binary.
#
# Usage:
#   hack/prometheus-bins.sh              build it if missing, print the directory
#   hack/prometheus-bins.sh --print-dir  print the directory only, build nothing
#
# The build runs in a throwaway module in a temporary directory, so the
# repository's go.mod never depends on the Prometheus server. It builds
# without the web UI's assets (the builtinassets tag needs them compiled
# first): the HTTP API answers, the UI pages do not. Its first build on the
# 2-core machine, the modules already downloaded, took 4 min 15 s (7 min
# of CPU).
set -euo pipefail

# Pinned version: Go module v0.316.0 is Prometheus v3.16.0.
PROMETHEUS_MODULE_VERSION=v0.316.0
PROMETHEUS_VERSION=3.16.0

export GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=0 GOTOOLCHAIN=local

source "$(dirname "$0")/lib/bincache.sh"
bincache_open prometheus-bins "prometheus-${PROMETHEUS_VERSION}_$(go env GOOS)-$(go env GOARCH)" "$@"

start=${SECONDS}
bincache_have "prometheus ${PROMETHEUS_VERSION}" prometheus

bincache_module prometheus-bins
log "prometheus ${PROMETHEUS_VERSION}: building"
nice -n 10 go get "github.com/prometheus/prometheus/cmd/prometheus@${PROMETHEUS_MODULE_VERSION}"
version_pkg=github.com/prometheus/common/version
nice -n 10 go build -trimpath -tags netgo \
	-ldflags="-s -w -X ${version_pkg}.Version=${PROMETHEUS_VERSION} -X ${version_pkg}.Branch=release -X ${version_pkg}.Revision=${PROMETHEUS_MODULE_VERSION}" \
	-o "${work_dir}/prometheus" github.com/prometheus/prometheus/cmd/prometheus
mv -f "${work_dir}/prometheus" "${bin_dir}/prometheus"
log "prometheus ${PROMETHEUS_VERSION}: built in $((SECONDS - start))s"
echo "${bin_dir}"
