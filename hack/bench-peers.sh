#!/usr/bin/env bash
# Peer benchmarks (test/peerbench), one run on this machine, against the
# real Velero server (its CRDs in kube-apiserver and etcd, `velero server`
# with velero-plugin-for-aws) on the same cluster content and S3 server:
#   BenchmarkPeers      backup and restore of ConfigMaps, Secrets and
#                       Deployments over 10 namespaces (items/s, the peak
#                       RSS and CPU seconds of each server's processes,
#                       the live heap of each server from pprof), then
#                       cancel and delete of backups of them;
#   BenchmarkPeerAPI    Backups through Velero's CRD, Backstop aggregated
#                       and Backstop standalone: creates, updates, lists,
#                       watch fan-out;
#   BenchmarkPeerQueue  a burst of backups with --concurrent-backups 5.
# Runs as root (the control plane runs in a network namespace the tests
# make). The raw `go test` output goes to _output/bench-peers.txt, the
# results to _output/bench-peers/*.json; hack/peer-report then rewrites the
# charts (docs/images/peers-*.svg) and the section of docs/benchmarks.md.
#
# Environment:
#   OBJECTS      comma-separated workload sizes (default 10000,100000)
#   API_OBJECTS  Backups of the API comparison (default 10000)
#   BURST        Backups of the queue burst (default 200)
#   BENCH        which benchmarks (a -bench regexp; default all three)
#   EQUAL_QPS    the client limit both peers get in a second run of the
#                first size (default 300; 0: none)
# Extra arguments go to the test binary.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${root}"
make build tools >/dev/null
results="${root}/_output/bench-peers"
rm -rf "${results}"
mkdir -p "${results}"

command="make bench-peers"
[[ -n "${OBJECTS:-}" ]] && command="OBJECTS=${OBJECTS} ${command}"
BACKSTOP_BIN_DIR="${root}/_output/bin" go test ./test/peerbench -run '^$' -bench "${BENCH:-^BenchmarkPeer}" -benchtime=1x \
  -count=1 -timeout=900m -peerbench.objects="${OBJECTS:-10000,100000}" -peerbench.api-objects="${API_OBJECTS:-10000}" \
  -peerbench.burst="${BURST:-200}" -peerbench.out="${results}" "$@" 2>&1 |
  grep -v '^[[:space:]]*[IWE][0-9]\{4\} ' | grep -v '| vgw |' | tee _output/bench-peers.txt
# Then the first size again with both peers at the same raised client
# limits (--client-qps/--client-burst EQUAL_QPS): what each engine does
# when the limit is not what bounds it. EQUAL_QPS=0 skips it.
equal_qps="${EQUAL_QPS:-300}"
if [[ "${equal_qps}" != 0 && "${BENCH:-^BenchmarkPeer}" == "^BenchmarkPeer" ]]; then
  first="$(echo "${OBJECTS:-10000,100000}" | cut -d, -f1)"
  BACKSTOP_BIN_DIR="${root}/_output/bin" go test ./test/peerbench -run '^$' -bench '^BenchmarkPeers$' -benchtime=1x \
    -count=1 -timeout=300m -peerbench.objects="${first}" -peerbench.client-qps="${equal_qps}" -peerbench.out="${results}" "$@" 2>&1 |
    grep -v '^[[:space:]]*[IWE][0-9]\{4\} ' | grep -v '| vgw |' | tee -a _output/bench-peers.txt
fi
go run ./hack/peer-report -results "${results}" -command "${command}"
echo "bench-peers: docs/benchmarks.md and docs/images/peers-*.svg rewritten from ${results}"
