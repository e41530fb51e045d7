# gpupack's build and test entry points. `make test` is the one command that
# runs every test, on a fresh machine with only Go (and root for apt-get):
# it installs what the tests need, builds the real Kubernetes components
# once (cached outside the work tree), and runs the whole suite with the
# end-to-end tiers required, so a missing component fails instead of
# skipping.

GO ?= go

# Where the cached components are (each script's --print-dir builds nothing),
# as the environment the end-to-end tests read.
BINS_ENV = GPUPACK_K8S_BINDIR="$$(bash hack/k8s-bins.sh --print-dir)" \
	GPUPACK_KARPENTER_BINDIR="$$(bash hack/karpenter-bins.sh --print-dir)" \
	GPUPACK_THANOS_BINDIR="$$(bash hack/thanos-bins.sh --print-dir)" \
	GPUPACK_KEDA_BINDIR="$$(bash hack/keda-bins.sh --print-dir)"

.PHONY: build test unit deps bins scheduler images bench fuzz vet deploy docs

# Stamped with this checkout's version and commit (`gpupack version`).
build:
	$(GO) build -ldflags "$$(bash hack/version.sh --ldflags)" -o bin/gpupack ./cmd/gpupack

# Everything: unit, golden, fuzz seeds, the trace comparison, and the
# end-to-end tiers against a real Prometheus and a real Kubernetes. Packages
# run one at a time (-p 1): the end-to-end packages each start their own
# apiserver, etcd and Prometheus, and on 2 cores they must not race each
# other for CPU and ports.
test: deps bins scheduler vet
	GPUPACK_E2E=1 $(BINS_ENV) $(GO) test -p 1 -count=1 -timeout 60m ./...
	$(GO) test -count=1 -tags nvml ./internal/source/nvml
	cd scheduler && GPUPACK_E2E=1 GPUPACK_K8S_BINDIR="$$(bash ../hack/k8s-bins.sh --print-dir)" $(GO) test -p 1 -count=1 -timeout 30m ./...

# The fast tier: no external components, no 40-run comparison.
unit:
	$(GO) test -short ./...
	$(GO) test -short -tags nvml ./internal/source/nvml
	cd scheduler && $(GO) test -short ./...

vet:
	@test -z "$$(gofmt -l .)" || { echo "gofmt needed:"; gofmt -l .; exit 1; }
	$(GO) vet ./...
	$(GO) vet -tags nvml ./internal/source/nvml
	cd scheduler && $(GO) vet ./...

deps:
	bash hack/deps.sh

# The real components the tests start, cached by version: etcd,
# kube-apiserver, kube-controller-manager, kube-scheduler and kwok;
# Karpenter's kwok provider; Thanos (sidecar and query); KEDA's operator
# and metrics API server.
bins:
	bash hack/k8s-bins.sh
	bash hack/karpenter-bins.sh
	bash hack/thanos-bins.sh
	bash hack/keda-bins.sh

# gpupack-scheduler: the upstream kube-scheduler with the GPUPack plugin, a
# module of its own (scheduler/), cached by source hash.
scheduler:
	bash hack/build-scheduler.sh

# deploy/ is rendered from the Helm chart (charts/gpupack) with its default
# values; charts' TestDeployIsRenderedFromChart fails when they differ.
deploy:
	$(GO) run ./hack/render-deploy deploy

# The generated references: docs/reference/cli.md from the cobra command
# tree, docs/reference/helm-values.md from charts/gpupack/values.yaml.
# TestCLIReferenceIsCurrent and TestHelmValuesReferenceIsCurrent fail when
# they drift; this rewrites them.
docs:
	$(GO) test -count=1 -run 'ReferenceIsCurrent' ./internal/cli ./charts -update

# The container images as tarballs, offline (no container daemon):
# bin/images/gpupack.tar and bin/images/gpupack-scheduler.tar.
images:
	bash hack/images.sh

bench:
	$(GO) test -run XXX -bench . -benchmem -count 5 ./...

# Short fuzzing of every fuzz target in the repository: the parsers, and
# placement and diagnose over generated clusters. internal/repocheck fails
# when a Fuzz function is missing here or a line names one that is gone.
FUZZTIME ?= 30s
fuzz:
	$(GO) test ./agent -run XXX -fuzz '^FuzzParseCgroup$$' -fuzztime $(FUZZTIME)
	$(GO) test ./cluster -run XXX -fuzz '^FuzzLoadTraceNodes$$' -fuzztime $(FUZZTIME)
	$(GO) test ./cluster -run XXX -fuzz '^FuzzLoadTracePods$$' -fuzztime $(FUZZTIME)
	$(GO) test ./cluster -run XXX -fuzz '^FuzzParseFile$$' -fuzztime $(FUZZTIME)
	$(GO) test ./cluster -run XXX -fuzz '^FuzzParseQuotaExceeded$$' -fuzztime $(FUZZTIME)
	$(GO) test ./cluster -run XXX -fuzz '^FuzzPodFailureCause$$' -fuzztime $(FUZZTIME)
	$(GO) test ./diagnose -run XXX -fuzz '^FuzzDiagnoseKueue$$' -fuzztime $(FUZZTIME)
	$(GO) test ./gpu -run XXX -fuzz '^FuzzParseCatalogue$$' -fuzztime $(FUZZTIME)
	$(GO) test ./gpu -run XXX -fuzz '^FuzzParsePrices$$' -fuzztime $(FUZZTIME)
	$(GO) test ./internal/gpusim -run XXX -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME)
	$(GO) test ./internal/source/promql -run XXX -fuzz '^FuzzParseSelector$$' -fuzztime $(FUZZTIME)
	$(GO) test ./reclaim -run XXX -fuzz '^FuzzParsePolicy$$' -fuzztime $(FUZZTIME)
	$(GO) test ./internal/source/kube -run XXX -fuzz '^FuzzParsePulled$$' -fuzztime $(FUZZTIME)
	$(GO) test ./internal/source/promql -run XXX -fuzz '^FuzzDecodeMatrix$$' -fuzztime $(FUZZTIME)
	$(GO) test ./internal/source/promql -run XXX -fuzz '^FuzzDecodeVector$$' -fuzztime $(FUZZTIME)
	$(GO) test ./internal/testkit/difftest -run XXX -fuzz '^FuzzDiagnose$$' -fuzztime $(FUZZTIME)
	$(GO) test ./usage -run XXX -fuzz '^FuzzAmount$$' -fuzztime $(FUZZTIME)
	$(GO) test ./usage -run XXX -fuzz '^FuzzAmountJSON$$' -fuzztime $(FUZZTIME)
	$(GO) test ./usage -run XXX -fuzz '^FuzzParseFacts$$' -fuzztime $(FUZZTIME)
	$(GO) test ./usage -run XXX -fuzz '^FuzzParseWindow$$' -fuzztime $(FUZZTIME)
	$(GO) test ./usage -run XXX -fuzz '^FuzzWriteIndented$$' -fuzztime $(FUZZTIME)
	$(GO) test ./vram -run XXX -fuzz '^FuzzParseHFConfig$$' -fuzztime $(FUZZTIME)
