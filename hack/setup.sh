#!/usr/bin/env bash
# Installs what the build, the server and the tests need on a fresh Debian
# machine (Go at /usr/local/go). Idempotent; safe to run again.
#  - Go modules (the build, tests and benchmarks share them);
#  - kubectl, built from k8s.io/kubectl at the client-go version of go.mod,
#    into _output/bin (the velero CLI, needed by the tests only, is built by
#    `make tools`, which `make test` runs);
#  - Node.js and npm from Debian's packages, which `make build` bundles the
#    web console with (hack/build-console.sh; without them, as a user who is
#    not root, the build uses the committed bundle).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH

if ! command -v go >/dev/null 2>&1; then
  echo "Go is required (expected at /usr/local/go); see https://go.dev/dl/" >&2
  exit 1
fi
go mod download
go build -o _output/bin/kubectl ./hack/tools/kubectl
if ! command -v npm >/dev/null 2>&1; then
  source hack/lib.sh
  apt_install console nodejs npm || echo "setup: no Node.js: the build uses the committed console bundle" >&2
fi
