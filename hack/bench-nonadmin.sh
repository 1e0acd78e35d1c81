#!/usr/bin/env bash
# Tenants' engine benchmark (test/nonadminbench): TENANTS × NABS
# NonAdminBackups created at once, then their backups completed; prints
# the raw `go test` output (also in _output/bench-nonadmin.txt). See
# docs/benchmarks.md.
#
# Environment:
#   TENANTS  tenant namespaces (default 1000)
#   NABS     NonAdminBackups per tenant (default 10)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${root}"
make build >/dev/null
mkdir -p _output

BACKSTOP_BIN_DIR="${root}/_output/bin" go test -tags=libvirt_dlopen,bench ./test/nonadminbench -run '^$' -bench . -benchtime=1x -count=1 -timeout=90m \
  -nonadminbench.tenants="${TENANTS:-1000}" -nonadminbench.nabs="${NABS:-10}" "$@" 2>&1 |
  grep -v '^[[:space:]]*[IWE][0-9]\{4\} ' | tee _output/bench-nonadmin.txt
