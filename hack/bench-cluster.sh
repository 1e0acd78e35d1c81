#!/usr/bin/env bash
# Cluster backup and restore benchmark (test/clusterbench): Backstop in
# aggregated mode behind kube-apiserver and etcd backing up and restoring
# 10,000 and 100,000 ConfigMaps and Secrets, side by side with a bare paged
# list and a bare client creating the same objects, at the same rate
# limits. Runs as root (the control plane runs in a network namespace the
# test makes). Prints the raw `go test` output (also in
# _output/bench-cluster.txt). See docs/benchmarks.md.
#
# Environment:
#   OBJECTS  comma-separated object counts (default 10000,100000)
#   COUNT    -count (default 1)
# Extra arguments go to the test binary, e.g. -clusterbench.qps=100.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${root}"
make build tools >/dev/null
mkdir -p _output

BACKSTOP_BIN_DIR="${root}/_output/bin" go test -tags=libvirt_dlopen,bench ./test/clusterbench -run '^$' -bench '^BenchmarkCluster$' -benchtime=1x \
  -count="${COUNT:-1}" -timeout=120m -clusterbench.objects="${OBJECTS:-10000,100000}" "$@" 2>&1 |
  grep -v '^[[:space:]]*[IWE][0-9]\{4\} ' | tee _output/bench-cluster.txt
