#!/usr/bin/env bash
# Scale-out benchmark (test/scaleoutbench): creates, lists of all and a
# watch fan-out through one server on Pebble, one replica on a
# three-member etcd and three replicas on it, then the time another
# replica takes the engines over after kill -9 of the leader; prints the
# raw `go test` output (also in _output/bench-scaleout.txt). See
# docs/benchmarks.md.
#
# Environment:
#   OBJECTS   Backups created, then listed (default 10000)
#   WATCHERS  watchers of the fan-out (default 100)
#   TRIALS    kill -9 trials of the leader (default 10)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${root}"
make build tools >/dev/null
mkdir -p _output

BACKSTOP_BIN_DIR="${root}/_output/bin" go test -tags=libvirt_dlopen,bench ./test/scaleoutbench -run '^$' -bench . -benchtime=1x -count=1 -timeout=60m \
  -scaleoutbench.objects="${OBJECTS:-10000}" -scaleoutbench.watchers="${WATCHERS:-100}" -scaleoutbench.trials="${TRIALS:-10}" "$@" 2>&1 |
  grep -v '^[[:space:]]*[IWE][0-9]\{4\} ' | tee _output/bench-scaleout.txt
