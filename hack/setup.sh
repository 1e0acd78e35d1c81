#!/usr/bin/env bash
# Installs what the build and tests need on a fresh Debian machine.
# Idempotent; safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH

if ! command -v go >/dev/null 2>&1; then
  echo "Go is required (expected at /usr/local/go); see https://go.dev/dl/" >&2
  exit 1
fi
# Fetch modules once (the tests and benchmarks share them).
go mod download
