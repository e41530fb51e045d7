#!/usr/bin/env bash
# Builds gpupack-scheduler (the upstream kube-scheduler with gpupack's plugin,
# module scheduler/) and caches it outside the work tree, keyed by the
# Kubernetes version, a hash of the sources it is built from (the
# repository's Go and embedded files it depends on, go.mod and go.sum of
# both modules) and the commit it is stamped with (hack/version.sh: the
# commit, and -dirty when the tree has uncommitted changes):
#
#   ${GPUPACK_BIN_CACHE:-$HOME/.cache/gpupack/bin}/gpupack-scheduler_<k8s>_<hash>_<commit>_<os>-<arch>/gpupack-scheduler
#
# The commit is in the key because `gpupack-scheduler version` and the
# image labels (make images) must name the commit of the checkout, not the
# one a cached binary of the same sources was first built at; a new commit
# relinks (Go's build cache keeps the compiled packages) in well under a
# minute. Idempotent: a binary for the same sources and commit is not
# rebuilt. The last line of output is always the binary's path.
#
# Usage:
#   hack/build-scheduler.sh              build when missing, print the path
#   hack/build-scheduler.sh --print-path print the path only, build nothing
#
# A cold build takes about 15 minutes on 2 cores (k8s.io/kubernetes'
# scheduler and its dependencies); a change to gpupack's own packages
# relinks in about a minute.
set -euo pipefail

cd "$(dirname "$0")/.."
export GOWORK=off GOTOOLCHAIN=local CGO_ENABLED=0

K8S_VERSION="$(cd scheduler && go list -m -f '{{.Version}}' k8s.io/kubernetes)"
# The sources: the repository's files among the binary's dependencies
# (Go and embedded files), and both modules' go.mod and go.sum.
root="$(pwd)"
source_hash="$(
	{
		(cd scheduler && go list -mod=readonly -deps -f '{{if not .Standard}}{{$d := .Dir}}{{range .GoFiles}}{{$d}}/{{.}}
{{end}}{{range .EmbedFiles}}{{$d}}/{{.}}
{{end}}{{end}}' ./cmd/gpupack-scheduler) | grep "^${root}/"
		ls "${root}"/go.mod "${root}"/go.sum "${root}"/scheduler/go.mod "${root}"/scheduler/go.sum
	} | LC_ALL=C sort | xargs sha256sum | sed "s|${root}/||" | sha256sum | cut -c1-16
)"
# The build stamp (internal/util/buildversion) and its short form for the key.
eval "$(bash hack/version.sh)"
stamp_ldflags="$(bash hack/version.sh --ldflags)"
stamp="${COMMIT:0:12}"
if [[ "${MODIFIED}" == true ]]; then stamp="${stamp}-dirty"; fi
bin_dir="${GPUPACK_BIN_CACHE:-$HOME/.cache/gpupack/bin}/gpupack-scheduler_${K8S_VERSION}_${source_hash}_${stamp}_$(go env GOOS)-$(go env GOARCH)"
bin="${bin_dir}/gpupack-scheduler"

case "${1:-}" in
--print-path)
	echo "${bin}"
	exit 0
	;;
"") ;;
*)
	echo "usage: $0 [--print-path]" >&2
	exit 2
	;;
esac

log() { echo "[build-scheduler $(date +%H:%M:%S)] $*" >&2; }

mkdir -p "${bin_dir}"
exec 9>"${bin_dir}/.lock"
if ! flock -n 9; then
	log "another build holds ${bin_dir}/.lock; waiting"
	flock 9
fi
if [[ -s "${bin}" ]]; then
	log "cached: ${bin}"
	echo "${bin}"
	exit 0
fi

start=${SECONDS}
log "building gpupack-scheduler (k8s.io/kubernetes ${K8S_VERSION}, sources ${source_hash})"
minor="${K8S_VERSION#v1.}"
minor="${minor%%.*}"
version_pkg=k8s.io/component-base/version
tmp="${bin}.tmp.$$"
(cd scheduler && nice -n 10 go build -trimpath -mod=readonly \
	-ldflags="-s -w -X ${version_pkg}.gitVersion=${K8S_VERSION} -X ${version_pkg}.gitMajor=1 -X ${version_pkg}.gitMinor=${minor} -X ${version_pkg}.gitTreeState=clean ${stamp_ldflags}" \
	-o "${tmp}" ./cmd/gpupack-scheduler)
mv -f "${tmp}" "${bin}"
# Builds of other sources or commits (about 80 MB each, one per commit)
# older than a day are dead weight: rebuilding one is a relink.
find "$(dirname "${bin_dir}")" -maxdepth 1 -name "gpupack-scheduler_*" ! -path "${bin_dir}" -mmin +1440 -exec rm -rf {} + 2>/dev/null || true
log "built in $((SECONDS - start))s"
echo "${bin}"
