#!/usr/bin/env bash
# Every test of `make test` (the Makefile's test target checks the
# formatting first), each step timed ("test: <step>: N s"). Steps that do
# not need each other run side by side in lanes: the integration suites
# wait on their servers more than they compute, and what compiles fills
# the cores meanwhile.
#
#  1. Vet, the generated code, the server's build, and the tools built
#     inside this module (kube-apiserver, kube-controller-manager,
#     kube-scheduler, kubelet, the CSI sidecars: they reuse the packages vet
#     compiled). Beside them from the start, the peers' lane
#     (hack/install-tools.sh peers: the Debian packages, the guest, the
#     nodes' containerd, CNI plugins and images, etcd, the hostpath driver,
#     velero, kopia, versitygw): modules of their own, whose downloads wait
#     on the network.
#  2. The main pass: every package's tests against the real processes.
#     Beside it from its start: the apiserver suite again on etcd3 (one
#     etcd its servers share; the tests the storage backend cannot change
#     skip there and say why), and, at low priority (nice: it takes the
#     cores the tests leave while they wait, without slowing their
#     servers), a lane of what mostly compiles: the imported kube RBAC
#     packages' tests, 10 s of fuzzing the names that become paths, 30 s of
#     fuzzing request bodies, and the storage under the race detector.
#  3. The crash-point matrix, once the main pass is done: it stops
#     libvirtd, which the main pass uses (the etcd3 pass does not).
#
# A lane's output comes in one piece when it ends. A step that fails ends
# the script, and every lane with it.
set -euo pipefail
cd "$(dirname "$0")/.."
source hack/lib.sh
export PATH=/usr/local/go/bin:$PATH
export BACKSTOP_BIN_DIR="${BACKSTOP_BIN_DIR:-$PWD/_output/bin}"
mkdir -p _output/lanes

# Test binaries are linked without DWARF (-w: half the link time; stack
# traces keep their files and lines). Tests that wait on servers run three
# at a time in a package (t.Parallel): more only slows each on two cores.
testflags=(-count=1 -ldflags=-w -parallel 3)

lanes=()
# lane <name> <command...>: runs the command in the background, its output
# in _output/lanes/<name>.log.
lane() {
  local name=$1
  shift
  "$@" >"_output/lanes/${name}.log" 2>&1 &
  lanes+=("$!:${name}")
}
# finish <name>: waits for the lane, shows its output, returns its status.
finish() {
  local entry
  for entry in "${lanes[@]}"; do
    if [[ "${entry#*:}" == "$1" ]]; then
      await "${entry%%:*}" "_output/lanes/$1.log" "test.sh: the lane $1"
      return
    fi
  done
  echo "test.sh: no lane $1" >&2
  return 1
}
stop_lanes() {
  local entry
  for entry in "${lanes[@]}"; do
    killtree "${entry%%:*}"
  done
}
trap stop_lanes EXIT

vet() {
  go vet -tags=libvirt_dlopen,bench ./...
}

main_pass() {
  go test "${testflags[@]}" -timeout 30m $(go list ./... | grep -v /test/integration/crash)
}

etcd3_pass() {
  BACKSTOP_TEST_STORAGE=etcd3 go test "${testflags[@]}" -timeout 30m ./test/integration/apiserver
}

crash_points() {
  go test "${testflags[@]}" -timeout 20m -v ./test/integration/crash |
    grep -a -E '^(ok|FAIL|panic:|points [0-9]+|--- FAIL|    [a-z_]+_test.go:[0-9]+: )'
}

# The own tests of the kube packages standalone RBAC imports (authorizer,
# registry and escalation checks, rule resolver, aggregation controller,
# bootstrap reconciliation), at the versions go.mod pins.
rbac_upstream() {
  go test -count=1 -ldflags=-w k8s.io/kubernetes/plugin/pkg/auth/authorizer/rbac k8s.io/kubernetes/pkg/registry/rbac/... \
    k8s.io/kubernetes/pkg/controller/clusterroleaggregation k8s.io/component-helpers/auth/rbac/...
}

# niced runs a command at low priority (in a lane: the lane's subshell and
# what it starts).
niced() {
  renice -n 15 -p "${BASHPID}" >/dev/null
  "$@"
}

compiling_lane() {
  step "kube's RBAC packages" rbac_upstream
  step "fuzzing names" go test -count=1 -ldflags=-w -run '^$' -fuzz FuzzNames -fuzztime 10s ./pkg/rootdir
  step "fuzzing request bodies" go test -count=1 -ldflags=-w -run '^$' -fuzz FuzzRequestBodies -fuzztime 30s ./pkg/registry
  step "storage under the race detector" go test -race -count=1 -ldflags=-w -timeout 30m ./pkg/storage/...
}

# 1. Vet, codegen, build, tools.
lane peers step "tools of the peers" bash hack/install-tools.sh peers
step vet vet
step "generated code" bash hack/verify-codegen.sh
step "console bundle" bash hack/verify-console.sh
step build make -s build
step "tools in this module" bash hack/install-tools.sh module
finish peers

# 2. The main pass, the etcd3 pass and the compiling lane.
bash hack/start-libvirt.sh
lane etcd3 step "apiserver suite on etcd3" etcd3_pass
lane compiling niced compiling_lane
step "main pass" main_pass

# 3. The crash points; then what ran beside, each shown whatever the
# other's end.
step "crash points" crash_points
status=0
finish etcd3 || status=$?
finish compiling || status=$?
exit "${status}"
