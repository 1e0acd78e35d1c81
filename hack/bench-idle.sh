#!/usr/bin/env bash
# An idle standalone server's memory: starts _output/bin/backstop-apiserver
# on a fresh data directory, waits until it is ready and its engines have
# settled (SETTLE seconds, default 20), then prints its private memory
# (RssAnon), its resident size, and its live heap after a collection
# (pprof's /debug/pprof/heap?gc=1) with the heap profile's top. BIN=path
# measures another build of the server (e.g. an older commit's) the same way.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
bin="${BIN:-$PWD/_output/bin/backstop-apiserver}"
kubectl="$PWD/_output/bin/kubectl"
settle="${SETTLE:-20}"
dir="$(mktemp -d)"
port=$((20000 + RANDOM % 20000))
"${bin}" --data-dir "${dir}/data" --secure-port "${port}" >"${dir}/server.log" 2>&1 &
pid=$!
trap 'kill "${pid}" 2>/dev/null; wait "${pid}" 2>/dev/null; rm -rf "${dir}"' EXIT
k=("${kubectl}" --kubeconfig "${dir}/data/admin.kubeconfig")
for _ in $(seq 1 120); do
  if [[ -f "${dir}/data/admin.kubeconfig" ]] && "${k[@]}" get --raw /readyz >/dev/null 2>&1; then
    break
  fi
  sleep 0.5
done
"${k[@]}" get --raw /readyz >/dev/null || { cat "${dir}/server.log"; exit 1; }
sleep "${settle}"
"${k[@]}" get --raw '/debug/pprof/heap?gc=1' >"${dir}/heap.pb"
echo "bench-idle: ${bin} ($(git rev-parse --short HEAD) checked out), ${settle} s after ready"
grep -E '^(RssAnon|VmRSS):' "/proc/${pid}/status"
go tool pprof -top -sample_index=inuse_space "${dir}/heap.pb" 2>/dev/null | sed -n '/^Showing nodes/p;/flat%/,+15p'
