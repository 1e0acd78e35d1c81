#!/usr/bin/env bash
# VM disk backup benchmarks on a real libvirt daemon and QEMU
# (test/vmbench): full push backup throughput beside qemu-img convert of
# the same disk, and the bytes an incremental holds against the bytes
# written. Needs root (libvirt); installs and starts libvirt first. Raw
# output: _output/bench-vm.txt. See docs/benchmarks.md.
#
# Environment: BENCHTIME (default 3x). Extra arguments go to the test
# binary, e.g. -vmbench.data=1073741824 -vmbench.writes=500.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${root}"
bash hack/install-libvirt.sh
bash hack/start-libvirt.sh
mkdir -p _output
GOFLAGS=-tags=libvirt_dlopen,bench go test ./test/vmbench -run '^$' -bench . -benchtime="${BENCHTIME:-3x}" -count=1 -timeout=60m "$@" 2>&1 |
  tee _output/bench-vm.txt
