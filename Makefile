# Backstop: see README.md. `make test` is what CI runs (.ci/run).
SHELL := /bin/bash
export PATH := /usr/local/go/bin:$(PATH)
GO ?= go
PKGS ?= ./...

.PHONY: all build test vet fmt-check bench run setup

all: build

build:
	$(GO) build $(PKGS)

vet:
	$(GO) vet $(PKGS)

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "not gofmt-ed:"; echo "$$out"; exit 1; fi

# Every test: formatting, vet, the unit, conformance and crash tests, then the
# storage tests again under the race detector.
test: fmt-check vet
	$(GO) test -count=1 -timeout 30m $(PKGS)
	$(GO) test -race -count=1 -timeout 30m ./pkg/storage/...

# Pebble vs etcd3 benchmarks against a real etcd on loopback (docs/benchmarks.md).
bench:
	bash hack/bench.sh

setup:
	bash hack/setup.sh

# The API server lands with the API server issue; until then there is nothing to run.
run:
	@echo "backstop-apiserver is not built yet: only the storage layer (pkg/storage/pebble) exists. Run 'make test'." >&2
	@exit 1
