#!/usr/bin/env bash
# Benchmarks the Pebble storage backend against k8s.io/apiserver's etcd3
# backend on a real etcd server (test/storagebench), then prints the
# pebble/etcd3 ratios as a markdown table (`make bench` runs this). See
# docs/benchmarks.md.
#
# Raw `go test` output: _output/bench.txt; table: _output/bench.md.
#
# Environment:
#   BENCHTIME  -benchtime of every benchmark (default 2s)
#   BENCH      -bench pattern (default ., i.e. all; e.g. 'Storage/List')
#   ETCD_BIN   etcd binary to use instead of _output/bin/etcd
# Extra arguments go to the test binary, e.g. -storagebench.codec=json.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${root}"

if [[ -z "${ETCD_BIN:-}" ]]; then
  bash hack/install-etcd.sh
fi
mkdir -p _output

go test ./test/storagebench -run '^$' -bench "${BENCH:-.}" \
  -benchtime="${BENCHTIME:-2s}" -count=1 -timeout=60m "$@" 2>&1 | tee _output/bench.txt

echo
go run ./hack/benchratio < _output/bench.txt | tee _output/bench.md
