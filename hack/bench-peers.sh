#!/usr/bin/env bash
# Peer benchmarks (test/peerbench): the real Velero server (its CRDs in
# kube-apiserver and etcd, `velero server` with velero-plugin-for-aws) and
# Backstop (aggregated) on the same cluster content and S3 server, one
# after the other in one run: backup and restore of ConfigMaps, Secrets
# and Deployments over 10 namespaces, items/s, the peak RSS and CPU
# seconds of each server's processes. Runs as root (the control plane runs
# in a network namespace the test makes). Prints the raw `go test` output
# (also in _output/bench-peers.txt). See docs/benchmarks.md.
#
# Environment:
#   OBJECTS  comma-separated object counts (default 10000,100000)
# Extra arguments go to the test binary.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${root}"
make build tools >/dev/null
mkdir -p _output

BACKSTOP_BIN_DIR="${root}/_output/bin" go test ./test/peerbench -run '^$' -bench BenchmarkPeers -benchtime=1x \
  -count=1 -timeout=600m -peerbench.objects="${OBJECTS:-10000,100000}" "$@" 2>&1 |
  grep -v '^[[:space:]]*[IWE][0-9]\{4\} ' | grep -v '| vgw |' | tee _output/bench-peers.txt
