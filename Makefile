# Backstop: see README.md. `make run` installs what is needed and starts the
# server; `make test` runs every test (what CI runs, .ci/run).
SHELL := /bin/bash
export PATH := /usr/local/go/bin:$(PATH)
GO ?= go
PKGS ?= ./...
BIN := $(CURDIR)/_output/bin
DATA_DIR ?= data
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo v0.1.0-dev)
LDFLAGS := -X github.com/backstop-io/backstop/pkg/version.Version=$(VERSION)
# libvirt is loaded at run time (libvirt.org/go/libvirt's dlopen mode): the
# server builds and starts without libvirt installed.
export GOFLAGS := -tags=libvirt_dlopen

.PHONY: all build image tools console-screenshots dashboard-picture test test-unit unit vet fmt-check verify-codegen codegen bench bench-backup bench-vm bench-cluster bench-snapshots bench-datamover bench-encryption bench-verification bench-authz bench-nonadmin bench-scaleout bench-peers bench-api bench-watch bench-restore-queue bench-scale bench-idle run setup

all: build

# Installs what the build, the server and the tests need (hack/setup.sh).
setup:
	bash hack/setup.sh

# The web console's bundle (pkg/console/dist, from web/console; kept as
# committed without Node.js), then the server.
build:
	bash hack/build-console.sh
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/backstop-apiserver ./cmd/backstop-apiserver

# The control plane the aggregated-mode tests serve Backstop through: etcd,
# kube-apiserver, kube-controller-manager, kube-scheduler and kubelet at the
# release of go.mod's k8s.io/apiserver (hack/install-etcd.sh,
# hack/install-kube.sh); what its nodes run besides kubelet
# (hack/install-node.sh: containerd, the CNI plugins, runc, the pause and
# busybox images); the CSI stack the volume tests run (hack/install-csi.sh:
# the hostpath driver, snapshot-controller, csi-snapshotter,
# csi-provisioner, csi-attacher, csi-registrar). The clients the
# tests drive the server with: kubectl (k8s.io/kubectl at the client-go
# version of go.mod) and the velero CLI and server (v1.18.3, with
# velero-plugin-for-aws v1.14.3, module proxy); the S3 server the S3
# storage location tests run on loopback (versitygw); the helm CLI
# (helm.sh/helm/v4, built in this module); the libvirt daemon and QEMU the
# VM backup tests drive, Prometheus and Chromium (Debian packages, as
# root); the small
# Linux guest with QEMU's guest agent the quiesce tests boot
# (hack/build-guest.sh: Debian's cloud kernel, busybox, qemu-ga). All
# cached in _output/bin. hack/install-tools.sh runs these scripts in two
# lanes side by side: what builds inside this module, and the rest.
tools: setup
	bash hack/install-tools.sh

# The server's image without a container engine (hack/build-image.sh):
# the binary and the libraries it links, one layer packed with
# go-containerregistry, in _output/images/backstop-apiserver.tar for
# `ctr images import` (or `docker load`). The Dockerfile builds the same on
# a machine with Docker.
image: build
	bash hack/build-image.sh

# Standalone server on https://127.0.0.1:8443, data under ./data; then
#   kubectl --kubeconfig data/admin.kubeconfig get backups -A
run: setup build
	$(BIN)/backstop-apiserver --data-dir $(DATA_DIR)

vet:
	$(GO) vet -tags=libvirt_dlopen,bench $(PKGS)

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "not gofmt-ed:"; echo "$$out"; exit 1; fi

codegen:
	bash hack/update-codegen.sh

verify-codegen:
	bash hack/verify-codegen.sh

# Every test: formatting, then hack/test.sh: vet, generated code, the build
# and the tools, every package's tests against the real binaries, the
# server's suite again on etcd3, the crash-point matrix, the imported kube
# RBAC packages' tests, fuzzing (the corpora are committed under
# testdata/fuzz: the main pass runs every entry as a test) and the storage
# under the race detector, each step timed, independent steps side by side.
test: fmt-check setup
	bash hack/test.sh

# The fast tier, for the edit-test loop: the package tests in short mode,
# without root, libvirt, an S3 server or the network (tests that need one
# of them say so and skip; under `make test` they run, and fail when it is
# missing).
test-unit:
	set -o pipefail; $(GO) test -short -count=1 -v ./pkg/... ./hack/... | awk '\
		/^=== (RUN|CONT|PAUSE)/ { buf = ""; next } \
		/^--- (SKIP|FAIL)/ { printf "%s%s\n", buf, $$0; buf = ""; next } \
		/^(ok|FAIL|panic:)/ { print; next } \
		/^    / { buf = buf $$0 "\n" }'

# Pebble vs etcd3 benchmarks against a real etcd on loopback (docs/benchmarks.md).
bench:
	bash hack/bench.sh

# Backup items/s and memory, 10k and 100k objects, beside a bare paged list (docs/benchmarks.md).
bench-backup:
	bash hack/bench-backup.sh

# Backup and restore of a real cluster (kube-apiserver + etcd), 10k and
# 100k ConfigMaps and Secrets, beside a bare paged list and a bare client
# creating the same objects (docs/benchmarks.md).
bench-cluster:
	bash hack/bench-cluster.sh

# A backup's CSI snapshots of 100 claims against creating the same
# VolumeSnapshots bare (test/clusterbench, the CSI stack of the harness; as
# root). CLAIMS=N for another count.
bench-snapshots: build tools
	set -o pipefail; BACKSTOP_BIN_DIR=$(BIN) $(GO) test -tags=libvirt_dlopen,bench ./test/clusterbench -run '^$$' \
		-bench VolumeSnapshots -benchtime=1x -timeout 60m -clusterbench.claims=$${CLAIMS:-100} 2>&1 | \
		grep -v '^[[:space:]]*[IWE][0-9]\{4\} ' | tee _output/bench-snapshots.txt

# Backups and restores to a location that requires encryption beside one that does not
# (test/clusterbench: 5,000 ConfigMaps of 8 KiB random data, in turns; docs/benchmarks.md).
bench-encryption: build tools
	set -o pipefail; BACKSTOP_BIN_DIR=$(BIN) $(GO) test -tags=libvirt_dlopen,bench ./test/clusterbench -run '^$$' \
		-bench '^BenchmarkEncryptedLocation$$' -benchtime=1x -timeout 60m 2>&1 | \
		grep -v '^[[:space:]]*[IWE][0-9]\{4\} ' | tee _output/bench-encryption.txt

# Backup verification against reading the same objects, plain and encrypted (docs/benchmarks.md).
bench-verification:
	set -o pipefail; $(GO) test ./pkg/engine/verify -run '^$$' -bench '^BenchmarkVerification$$' -benchtime=10x -timeout 30m 2>&1 | \
		tee _output/bench-verification.txt

# The data mover against the kopia CLI (test/datamoverbench): 1 GiB (one 512 MiB file and small
# files) into a loopback S3 bucket, again after a 1% change, restored; its kopia path with 1,000 and
# 10,000 small files (memory flat in the number of files), then whole DataUploads and a DataDownload
# on a control plane with the CSI stack (10,000), and kopia's splitters on a changed region.
bench-datamover: build tools
	set -o pipefail; { for n in 1000 10000; do BACKSTOP_BIN_DIR=$(BIN) $(GO) test -tags=libvirt_dlopen,bench ./test/datamoverbench -run '^$$' \
		-bench '^BenchmarkUploadVersusKopiaCLI$$' -benchtime=1x -timeout 60m -datamoverbench.small-files=$$n || exit 1; done; \
		BACKSTOP_BIN_DIR=$(BIN) $(GO) test -tags=libvirt_dlopen,bench ./test/datamoverbench -run '^$$' \
		-bench '^Benchmark(DataUploadVersusKopiaCLI|ChangedRegionBySplitter)$$' -benchtime=1x -timeout 60m; } 2>&1 | \
		grep -v '^[[:space:]]*[IWE][0-9]\{4\} ' | tee _output/bench-datamover.txt

# Against the real peer: Velero server v1.18.3 (CRDs in kube-apiserver+etcd) and Backstop: backup and restore of 10k and 100k objects, cancel and delete, the Backup API, a 200-backup burst; rewrites docs/benchmarks.md's section and charts.
bench-peers:
	bash hack/bench-peers.sh

# The watch fan-out, five runs per server: Velero's CRD, Backstop aggregated through kube-apiserver and
# directly (the aggregator's proxy's cost), Backstop standalone (docs/benchmarks.md; as root).
bench-watch: build tools
	set -o pipefail; BACKSTOP_BIN_DIR=$(BIN) $(GO) test -tags=libvirt_dlopen ./test/peerbench -run '^$$' -bench '^BenchmarkPeerWatch$$' \
		-benchtime=1x -count=1 -timeout 60m -peerbench.watch-runs=$${RUNS:-5} 2>&1 | grep -v '^[[:space:]]*[IWE][0-9]\{4\} ' | \
		tee _output/bench-watch.txt

# The Backup API alone: Velero's CRD, Backstop aggregated and standalone, with and without lists from stored
# bytes: creates, updates, lists (decoded by the client, and read as bytes), watch fan-out (docs/benchmarks.md;
# as root).
bench-api: build tools
	set -o pipefail; BACKSTOP_BIN_DIR=$(BIN) $(GO) test -tags=libvirt_dlopen ./test/peerbench -run '^$$' -bench '^BenchmarkPeerAPI$$' \
		-benchtime=1x -count=1 -timeout 60m 2>&1 | grep -v '^[[:space:]]*[IWE][0-9]\{4\} ' | tee _output/bench-api.txt

# A million objects: backups of 100,000 and 1,000,000 small ConfigMaps over 1,000 namespaces, a restore of
# 100,000 at a raised client limit, memory and the latency of listing Backups meanwhile (docs/benchmarks.md;
# as root; about half an hour; OBJECTS=n for another count).
bench-scale: build tools
	set -o pipefail; BACKSTOP_BIN_DIR=$(BIN) $(GO) test -tags=libvirt_dlopen ./test/peerbench -run '^$$' -bench '^BenchmarkScale$$' \
		-benchtime=1x -count=1 -timeout 180m -peerbench.scale-objects=$${OBJECTS:-1000000} 2>&1 | \
		grep -v '^[[:space:]]*[IWE][0-9]\{4\} ' | tee _output/bench-scale.txt

# Concurrent restores: a 10-item restore created while a 10,000-item restore runs, Velero beside Backstop
# (docs/benchmarks.md; as root).
bench-restore-queue: build tools
	set -o pipefail; BACKSTOP_BIN_DIR=$(BIN) $(GO) test -tags=libvirt_dlopen ./test/peerbench -run '^$$' -bench '^BenchmarkPeerRestoreQueue$$' \
		-benchtime=1x -count=1 -timeout 60m 2>&1 | grep -v '^[[:space:]]*[IWE][0-9]\{4\} ' | tee _output/bench-restore-queue.txt

# Tenants: 1,000 tenants x 10 NonAdminBackups created at once, completion latency, requests per completion (docs/benchmarks.md).
bench-nonadmin:
	bash hack/bench-nonadmin.sh

# Scale out: creates, lists and watch fan-out on 1 and 3 replicas on etcd3 beside Pebble; takeover after kill -9 (docs/benchmarks.md).
bench-scaleout:
	bash hack/bench-scaleout.sh

# An idle server's memory, standalone and aggregated into kube-apiserver (as root): private memory, live heap and its top (docs/benchmarks.md).
bench-idle: build tools
	bash hack/bench-idle.sh | tee _output/bench-idle.txt
	set -o pipefail; BACKSTOP_BIN_DIR=$(BIN) $(GO) test -tags=libvirt_dlopen ./test/peerbench -run '^$$' -bench '^BenchmarkIdleAggregated$$' \
		-benchtime=1x -count=1 -peerbench.idle-profile=$(CURDIR)/_output/idle-aggregated-heap.pb 2>&1 | grep -v '^[[:space:]]*[IWE][0-9]\{4\} ' | \
		tee -a _output/bench-idle.txt
	$(GO) tool pprof -top -sample_index=inuse_space _output/idle-aggregated-heap.pb 2>/dev/null | sed -n '/^Showing nodes/p;/flat%/,+15p' | tee -a _output/bench-idle.txt

# VM disk backups: push backup throughput beside qemu-img convert, incremental size (docs/benchmarks.md).
bench-vm:
	bash hack/bench-vm.sh

# Standalone RBAC: decision time and per-request overhead with 1,000
# ClusterRoles and 10,000 RoleBindings (docs/benchmarks.md).
bench-authz: build
	BACKSTOP_BIN_DIR=$(BIN) $(GO) test -tags=libvirt_dlopen,bench ./test/authzbench -run '^$$' -bench . -benchtime 1x -count 1 -timeout 30m

# The picture of the shipped Grafana dashboard in docs/monitoring.md (docs/images/dashboard.png):
# TestPrometheusMixins draws its graphs from its Prometheus' data.
# The console's screenshots in docs/images, from the browser tests.
console-screenshots: build tools
	BACKSTOP_BIN_DIR=$(BIN) BACKSTOP_CONSOLE_SCREENSHOTS=$(CURDIR)/docs/images $(GO) test -count=1 -run '^TestConsole' ./test/integration/browser

dashboard-picture: build tools
	BACKSTOP_BIN_DIR=$(BIN) BACKSTOP_DASHBOARD_PICTURE=$(CURDIR)/docs/images/dashboard.png $(GO) test -count=1 -run '^TestPrometheusMixins$$' ./test/integration/cluster
