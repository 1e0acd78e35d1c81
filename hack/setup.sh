#!/usr/bin/env bash
# Installs what the build, the server and the tests need on a fresh Debian
# machine (Go at /usr/local/go). Idempotent; safe to run again.
#  - Go modules (the build, tests and benchmarks share them);
#  - kubectl, built from k8s.io/kubectl at the client-go version of go.mod,
#    into _output/bin (the velero CLI, needed by the tests only, is built by
#    `make tools`, which `make test` runs).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH

if ! command -v go >/dev/null 2>&1; then
  echo "Go is required (expected at /usr/local/go); see https://go.dev/dl/" >&2
  exit 1
fi
go mod download
go build -o _output/bin/kubectl ./hack/tools/kubectl
