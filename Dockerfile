# gpupack (serve, webhook and every CLI verb): a static binary on
# distroless/static:nonroot, run as uid 65532. Build from the repository
# root, stamped with the checkout's version and commit (hack/version.sh):
#
#   docker build $(bash hack/version.sh | sed 's/^/--build-arg /') -t ghcr.io/gpupack/gpupack:v0.1.0 .
#
# (podman build and buildah bud take the same arguments.) `make images`
# builds the same image offline, without a container daemon.

# The Go of go.mod.
ARG GO_VERSION=1.26

FROM golang:${GO_VERSION} AS build
ARG VERSION=unknown
ARG COMMIT=unknown
ARG COMMIT_TIME=unknown
ARG MODIFIED=unknown
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# .git is not in the context (.dockerignore): the stamp comes from the
# build arguments, not from Go's VCS stamp.
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false \
	-ldflags "-s -w \
	-X github.com/gpupack/gpupack/internal/util/buildversion.version=${VERSION} \
	-X github.com/gpupack/gpupack/internal/util/buildversion.commit=${COMMIT} \
	-X github.com/gpupack/gpupack/internal/util/buildversion.commitTime=${COMMIT_TIME} \
	-X github.com/gpupack/gpupack/internal/util/buildversion.modified=${MODIFIED}" \
	-o /out/gpupack ./cmd/gpupack

FROM gcr.io/distroless/static:nonroot
ARG VERSION=unknown
ARG COMMIT=unknown
LABEL org.opencontainers.image.source="https://github.com/gpupack/gpupack" \
	org.opencontainers.image.version="${VERSION}" \
	org.opencontainers.image.revision="${COMMIT}" \
	org.opencontainers.image.title="gpupack" \
	org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /out/gpupack /gpupack
USER 65532:65532
ENTRYPOINT ["/gpupack"]
