# Cerulean. `make help` lists the targets.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

BIN        := $(CURDIR)/bin
DATA_DIR   ?= .cerulean
VERSION    ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT     ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS    := -X github.com/cerulean/cerulean/internal/version.Version=$(VERSION) \
              -X github.com/cerulean/cerulean/internal/version.Commit=$(COMMIT)
TEST_TIMEOUT ?= 45m
# The published image's and chart's version, semver as Helm needs it: a tag vX.Y.Z gives X.Y.Z
# (X.Y.Z-N-gHASH past it), no tag 0.0.0-gHASH; -dirty for a changed tree.
IMAGE_VERSION ?= $(shell v=$$(git describe --tags --match 'v[0-9]*' --dirty 2>/dev/null) && echo "$${v\#v}" || echo "0.0.0-g$$(git describe --always --dirty 2>/dev/null || echo dev)")
IMAGE_SOURCE ?= https://github.com/cerulean/cerulean
IMAGE_ARCHIVE := $(BIN)/cerulean-image.tar
CONTROL_PLANE_TOOLS := kubernetes etcd
NODE_TOOLS := containerd secrets-store-csi-driver coredns
TOOL_GROUPS := $(CONTROL_PLANE_TOOLS) $(NODE_TOOLS) controller-gen helm golangci-lint
# The local node needs root: as root `make up` and `make test` build and install it.
ROOT := $(shell [ "$$(id -u)" = 0 ] && echo yes)
NODE_DEPS := $(if $(ROOT),node images)
# Peers the benchmarks compare with, built only by `make bench`.
BENCH_TOOLS := aso azure-workload-identity

export CERULEAN_BIN_DIR := $(BIN)

.PHONY: help
help: ## List the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

.PHONY: build
build: ## Build bin/cerulean (the product) and bin/cerulean-local (the local environment: cloud, up)
	@CGO_ENABLED=0 go build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/cerulean ./cmd/cerulean
	@CGO_ENABLED=0 go build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/cerulean-local ./cmd/cerulean-local

.PHONY: tools
tools: ## Build the pinned tools into bin/ (kube-apiserver, etcd, kubectl, ...; first run only)
	@for g in $(TOOL_GROUPS); do hack/tools/build.sh $$g; done

.PHONY: control-plane
control-plane: ## Build only the local control plane's binaries into bin/ (first run only)
	@for g in $(CONTROL_PLANE_TOOLS); do hack/tools/build.sh $$g; done

.PHONY: node
node: control-plane ## Build and install the local node: kubelet, kube-scheduler, kube-proxy, containerd, CoreDNS, the Secrets Store CSI Driver; runc and CNI plugins from Debian (root)
	@hack/install-node.sh
	@for g in $(NODE_TOOLS); do hack/tools/build.sh $$g; done

.PHONY: images
images: ## Build the local node's images (cerulean: the product binary only, pause, test-app, upstream's workload identity proxy and proxy-init) into bin/images
	@go run ./hack/images -out $(BIN)/images -ldflags '$(LDFLAGS)'

.PHONY: image
image: ## Build the product image to publish (bin/cerulean alone, static, reproducible; IMAGE_VERSION in its OCI labels) into bin/cerulean-image.tar
	@go run ./hack/images -product $(IMAGE_ARCHIVE) -version $(IMAGE_VERSION) -revision $(COMMIT) -source $(IMAGE_SOURCE)

.PHONY: image-push
image-push: image ## Push the product image to REGISTRY=host[:port]/path as REGISTRY/cerulean:IMAGE_VERSION (Docker's credentials; plain HTTP only to loopback or with INSECURE=1)
	@go run ./hack/images -push '$(REGISTRY)' -archive $(IMAGE_ARCHIVE) $(if $(INSECURE),-insecure)

.PHONY: chart
chart: ## Package charts/cerulean with version and appVersion IMAGE_VERSION into bin/cerulean-IMAGE_VERSION.tgz
	@hack/tools/build.sh helm
	@$(BIN)/helm package charts/cerulean --version $(IMAGE_VERSION) --app-version $(IMAGE_VERSION) --destination $(BIN)

.PHONY: engines
engines: ## Install the cloud's data-plane engines (PostgreSQL 15, Redis 7) from Debian (first run only)
	@hack/install-engines.sh

.PHONY: up
up: build control-plane $(NODE_DEPS) azurite engines ## Run the whole system on this machine (state in DATA_DIR=.cerulean; flags in UP_FLAGS, e.g. UP_FLAGS="--clusters 3")
	$(BIN)/cerulean-local up --data-dir $(DATA_DIR) $(UP_FLAGS)

.PHONY: test-deps
test-deps: ## Install what the tests run besides Go (Azure CLI, curl, jq, Node.js, ip, iptables, PostgreSQL, Redis, Chromium from Debian; Debian's Node.js unpacked; first run only)
	hack/install-test-deps.sh
	hack/install-debian-node.sh
	hack/install-azurite.sh
	hack/install-engines.sh

.PHONY: azurite
azurite: ## Install Azurite (pinned in hack/azurite) on Debian's Node.js into bin/azurite, the local cloud's storage engine (first run only)
	@hack/install-azurite.sh

.PHONY: test
test: build tools $(NODE_DEPS) test-deps check-generated lint ## Unit, integration and end-to-end tests, generated-files check and lint
	go test -count=1 -timeout $(TEST_TIMEOUT) ./...

.PHONY: lint
lint: tools ## Run golangci-lint with the committed config
	$(BIN)/golangci-lint run ./...

.PHONY: generate
generate: tools ## Regenerate CRDs, RBAC and deepcopy code
	hack/generate.sh

.PHONY: check-generated
check-generated: tools ## Fail when generated files are not current
	hack/check-generated.sh

FUZZTIME ?= 30s

.PHONY: fuzz
fuzz: ## Run every fuzz target for FUZZTIME each (make test runs only their seeds)
	@for pkg in $$(grep -rl --include='*_test.go' '^func Fuzz' internal cmd | xargs -n1 dirname | sort -u); do \
		for f in $$(grep -h '^func Fuzz' $$pkg/*_test.go | sed 's/func \(Fuzz[A-Za-z0-9_]*\).*/\1/'); do \
			echo "fuzzing $$pkg $$f for $(FUZZTIME)…"; go test ./$$pkg -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME); \
		done; \
	done

.PHONY: cloud
cloud: build ## Run the local cloud alone (state in DATA_DIR/cloud)
	$(BIN)/cerulean-local cloud --data-dir $(DATA_DIR)/cloud

.PHONY: bench-tools
bench-tools: ## Build the benchmark's baseline peers into bin/ (Azure Service Operator v2, the upstream workload identity webhook; first run only)
	@for g in $(BENCH_TOOLS); do hack/tools/build.sh $$g; done

.PHONY: bench
bench: build tools bench-tools ## Run the benchmarks and write docs/benchmarks.md
	go run ./hack/bench -out docs/benchmarks.md

.PHONY: clean
clean: ## Remove bin/cerulean, bin/cerulean-local and the default data directory (keeps the built tools)
	rm -rf $(BIN)/cerulean $(BIN)/cerulean-local $(DATA_DIR)
