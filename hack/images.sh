#!/usr/bin/env bash
# Builds gpupack's container images offline, without a container daemon,
# as OCI image layouts in tar archives (oci-archive), which `podman load`,
# `docker load` (Docker 25 and later) and `skopeo copy oci-archive:...` take:
#
#   bin/images/gpupack.tar            ghcr.io/gpupack/gpupack:<version>
#   bin/images/gpupack-scheduler.tar  ghcr.io/gpupack/gpupack-scheduler:<version>
#
# Each is one layer on an empty base: the static binary (/gpupack,
# /gpupack-scheduler) and the nonroot user 65532 (hack/image,
# internal/build/image). The version, commit and timestamps come from the
# checkout (hack/version.sh): the same commit gives the same image digests.
# gpupack-scheduler is hack/build-scheduler.sh's cached binary (built when
# missing).
set -euo pipefail
cd "$(dirname "$0")/.."
export GOWORK=off GOTOOLCHAIN=local

eval "$(bash hack/version.sh)"
export SOURCE_DATE_EPOCH
# The tag is the version: git describe's output (or "unknown") is a valid
# tag.
tag="${VERSION}"
mkdir -p bin/images

CGO_ENABLED=0 go build -trimpath -ldflags "-s -w $(bash hack/version.sh --ldflags)" -o bin/images/gpupack ./cmd/gpupack
scheduler="$(bash hack/build-scheduler.sh | tail -n 1)"

go build -o bin/image ./hack/image
bin/image --binary bin/images/gpupack --entrypoint /gpupack \
	--ref "ghcr.io/gpupack/gpupack:${tag}" --version "${VERSION}" --revision "${COMMIT}" \
	--out bin/images/gpupack.tar
bin/image --binary "${scheduler}" --entrypoint /gpupack-scheduler \
	--ref "ghcr.io/gpupack/gpupack-scheduler:${tag}" --version "${VERSION}" --revision "${COMMIT}" \
	--out bin/images/gpupack-scheduler.tar
