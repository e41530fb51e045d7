#!/usr/bin/env bash
# Builds the real Kubernetes components that gpupack's tests start
# (kube-apiserver, kube-scheduler, kube-controller-manager, etcd, kwok) from
# pinned Go modules, and caches them outside the work tree, keyed by version,
# together with kwok-stages.yaml, kwok's default stages (kustomize/stage/fast
# of the pinned kwok module), which make kwok's nodes Ready and their pods
# Running:
#
#   ${GPUPACK_BIN_CACHE:-$HOME/.cache/gpupack/bin}/<version-key>/
#
# Idempotent: a binary already in the cache directory is not rebuilt.
# The last line of output is always the directory holding the binaries.
#
# Usage:
#   hack/k8s-bins.sh              build what is missing, print the directory
#   hack/k8s-bins.sh --print-dir  print the directory only, build nothing
#
# A cold build of kube-apiserver and kube-scheduler takes about 20 minutes on
# 2 cores; kube-controller-manager shares most of their dependencies, so it
# adds some minutes to that. Every build runs in a throwaway module in a
# temporary directory, so the repository's go.mod never depends on
# k8s.io/kubernetes.
set -euo pipefail

# Pinned versions. k8s.io/kubernetes replaces each k8s.io/* staging module with
# a relative path, so its build module replaces them with STAGING_VERSION.
K8S_VERSION=v1.37.2
STAGING_VERSION=v0.37.2
ETCD_VERSION=v3.6.16
KWOK_VERSION=v0.8.0

export GOWORK=off GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0

source "$(dirname "$0")/lib/bincache.sh"
bincache_open k8s-bins "k8s-${K8S_VERSION}_etcd-${ETCD_VERSION}_kwok-${KWOK_VERSION}_$(go env GOOS)-$(go env GOARCH)" "$@"

work_dir="$(mktemp -d "${TMPDIR:-/tmp}/gpupack-k8s-bins.XXXXXX")"
trap 'rm -rf "${work_dir}"' EXIT

# have NAME...: true when every named file is already in the cache.
have() {
	local name
	for name in "$@"; do
		[[ -s "${bin_dir}/${name}" ]] || return 1
	done
}

# new_module NAME: creates an empty build module and changes into it.
new_module() {
	mkdir -p "${work_dir}/$1"
	cd "${work_dir}/$1"
	go mod init "gpupack.invalid/k8s-bins/$1" >/dev/null 2>&1
}

# build LDFLAGS NAME=PACKAGE...: builds the main packages in one go build (they
# share compiled dependencies), then moves each binary into the cache under
# NAME, so the cache never holds a partial file.
build() {
	local ldflags="$1"
	shift
	local out="${work_dir}/out" pair pkgs=()
	for pair in "$@"; do
		pkgs+=("${pair#*=}")
	done
	rm -rf "${out}"
	mkdir -p "${out}"
	nice -n 10 go build -trimpath -ldflags="-s -w ${ldflags}" -o "${out}/" "${pkgs[@]}"
	for pair in "$@"; do
		# go build names a binary after its package path, less any /vN suffix.
		local pkg="${pair#*=}"
		mv -f "${out}/$(basename "${pkg%/v[0-9]*}")" "${bin_dir}/${pair%%=*}"
	done
}

start=${SECONDS}
log "cache directory: ${bin_dir}"

if have etcd; then
	log "etcd ${ETCD_VERSION}: cached"
else
	log "etcd ${ETCD_VERSION}: building"
	new_module etcd
	nice -n 10 go get "go.etcd.io/etcd/server/v3@${ETCD_VERSION}"
	# The etcd binary's main package is the root of the server module.
	build "" etcd=go.etcd.io/etcd/server/v3
	log "etcd ${ETCD_VERSION}: done"
fi

if have kwok; then
	log "kwok ${KWOK_VERSION}: cached"
else
	log "kwok ${KWOK_VERSION}: building"
	new_module kwok
	nice -n 10 go get "sigs.k8s.io/kwok@${KWOK_VERSION}"
	build "-X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION#v}" kwok=sigs.k8s.io/kwok/cmd/kwok
	log "kwok ${KWOK_VERSION}: done"
fi

# kustomize_files DIR: the files that DIR/kustomization.yaml lists under
# resources, following directories.
kustomize_files() {
	local dir="$1" entry
	sed -n '/^resources:/,/^[^ -]/s/^- *//p' "${dir}/kustomization.yaml" | while read -r entry; do
		if [[ -d "${dir}/${entry}" ]]; then
			kustomize_files "${dir}/${entry}"
		else
			echo "${dir}/${entry}"
		fi
	done
}

if have kwok-stages.yaml; then
	log "kwok ${KWOK_VERSION} default stages: cached"
else
	kwok_dir="$(go mod download -json "sigs.k8s.io/kwok@${KWOK_VERSION}" | jq -r .Dir)"
	stages="${work_dir}/kwok-stages.yaml"
	for f in $(kustomize_files "${kwok_dir}/kustomize/stage/fast"); do
		echo "---"
		cat "${f}"
	done >"${stages}"
	mv -f "${stages}" "${bin_dir}/kwok-stages.yaml"
	log "kwok ${KWOK_VERSION} default stages: written ($(grep -c '^kind: Stage' "${bin_dir}/kwok-stages.yaml") stages)"
fi

# The Kubernetes components come from one module; the ones missing from the
# cache are built together in one go build, so a cold machine compiles their
# shared dependencies once, and a cache that already holds kube-apiserver and
# kube-scheduler (from before kube-controller-manager joined the set) builds
# only kube-controller-manager.
kube_components=(kube-apiserver kube-scheduler kube-controller-manager)
kube_missing=()
for name in "${kube_components[@]}"; do
	have "${name}" || kube_missing+=("${name}")
done
if ((${#kube_missing[@]} == 0)); then
	log "kubernetes ${K8S_VERSION}: cached"
else
	log "kubernetes ${K8S_VERSION}: building ${kube_missing[*]}"
	new_module kubernetes
	go mod edit -require="k8s.io/kubernetes@${K8S_VERSION}"
	# Every staging module that k8s.io/kubernetes both requires and replaces with
	# ./staging/src/... needs a replace to its published version here.
	kube_mod="$(go mod download -json "k8s.io/kubernetes@${K8S_VERSION}" | jq -r .GoMod)"
	staging_modules="$(go mod edit -json "${kube_mod}" | jq -r '
		[.Require[].Path] as $required
		| .Replace[]
		| select(.New.Path | startswith("./staging/"))
		| .Old.Path
		| select(IN($required[]))')"
	for m in ${staging_modules}; do
		go mod edit -replace="${m}=${m}@${STAGING_VERSION}"
	done
	log "kubernetes ${K8S_VERSION}: replaced $(wc -w <<<"${staging_modules}") staging modules with ${STAGING_VERSION}"
	kube_gets=() kube_builds=()
	for name in "${kube_missing[@]}"; do
		kube_gets+=("k8s.io/kubernetes/cmd/${name}@${K8S_VERSION}")
		kube_builds+=("${name}=k8s.io/kubernetes/cmd/${name}")
	done
	nice -n 10 go get "${kube_gets[@]}"
	minor="${K8S_VERSION#v1.}"
	minor="${minor%%.*}"
	version_pkg=k8s.io/component-base/version
	build "-X ${version_pkg}.gitVersion=${K8S_VERSION} -X ${version_pkg}.gitMajor=1 -X ${version_pkg}.gitMinor=${minor} -X ${version_pkg}.gitTreeState=clean" \
		"${kube_builds[@]}"
	log "kubernetes ${K8S_VERSION}: done"
fi

log "all binaries present after $((SECONDS - start))s"
echo "${bin_dir}"
