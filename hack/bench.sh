#!/usr/bin/env bash
# Benchmarks the Pebble storage backend, alone and behind the watch cache,
# against k8s.io/apiserver's etcd3 backend on a real etcd server
# (test/storagebench), then prints the ratios as markdown tables (`make
# bench` runs this). See docs/benchmarks.md.
#
# The whole benchmark runs RUNS times, one run after the other, and the
# tables average the runs: the backends alternate over time, so a disk whose
# latency drifts affects both alike.
#
# Raw `go test` output: _output/bench.txt; tables: _output/bench.md.
#
# Environment:
#   RUNS       how many times the whole benchmark runs (default 3)
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

: >_output/bench.txt
for run in $(seq "${RUNS:-3}"); do
  echo "== run ${run} of ${RUNS:-3}"
  go test -tags=libvirt_dlopen,bench ./test/storagebench -run '^$' -bench "${BENCH:-.}" \
    -benchtime="${BENCHTIME:-2s}" -count=1 -timeout=60m "$@" 2>&1 | tee -a _output/bench.txt
done

echo
go run ./hack/benchratio < _output/bench.txt | tee _output/bench.md
