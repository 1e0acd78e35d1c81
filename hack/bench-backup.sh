#!/usr/bin/env bash
# Backup throughput benchmark (test/backupbench): a backup of 10,000 and
# 100,000 small objects through the real server, side by side with a
# client reading the same objects with the same paged lists. Prints the
# raw `go test` output (also in _output/bench-backup.txt). See
# docs/benchmarks.md.
#
# Environment:
#   OBJECTS  comma-separated object counts (default 10000,100000)
#   COUNT    -count (default 1)
# Extra arguments go to the test binary, e.g. -backupbench.qps=50.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${root}"
make build >/dev/null
mkdir -p _output

BACKSTOP_BIN_DIR="${root}/_output/bin" go test -tags=libvirt_dlopen,bench ./test/backupbench -run '^$' -bench . -benchtime=1x \
  -count="${COUNT:-1}" -timeout=60m -backupbench.objects="${OBJECTS:-10000,100000}" "$@" 2>&1 |
  grep -v '^[[:space:]]*[IWE][0-9]\{4\} ' | tee _output/bench-backup.txt
