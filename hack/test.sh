#!/usr/bin/env bash
# Every test of `make test`, once formatting, vet, the generated code, the
# build and the tools are done (the Makefile's test target runs them
# first). Each step says how long it took ("test: <step>: N s").
#
# The main pass runs every package's tests against the real processes.
# Then the apiserver suite runs again on etcd3 (one etcd its servers share;
# the tests the storage backend cannot change skip there and say why). It
# waits on its servers more than it computes, so it runs beside the steps
# after it, which mostly compile: the crash-point matrix (it stops
# libvirtd, which the etcd3 pass does not use), the imported kube RBAC
# packages' tests, 30 s of fuzzing request bodies and 10 s of the names
# that become paths, and the storage under the race detector.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
export BACKSTOP_BIN_DIR="${BACKSTOP_BIN_DIR:-$PWD/_output/bin}"

# step runs a command and says how long it took, also when it failed (and
# then returns its status).
step() {
  local name=$1 start=$SECONDS status=0
  shift
  "$@" || status=$?
  if ((status == 0)); then
    echo "test: ${name}: $((SECONDS - start)) s"
  else
    echo "test: ${name}: $((SECONDS - start)) s, failed (exit ${status})"
  fi
  return "${status}"
}

main_pass() {
  go test -count=1 -timeout 30m $(go list ./... | grep -v /test/integration/crash)
}

crash_points() {
  go test -count=1 -timeout 20m -v ./test/integration/crash |
    grep -a -E '^(ok|FAIL|panic:|points [0-9]+|--- FAIL|    [a-z_]+_test.go:[0-9]+: )'
}

# The own tests of the kube packages standalone RBAC imports (authorizer,
# registry and escalation checks, rule resolver, aggregation controller,
# bootstrap reconciliation), at the versions go.mod pins.
rbac_upstream() {
  go test -count=1 k8s.io/kubernetes/plugin/pkg/auth/authorizer/rbac k8s.io/kubernetes/pkg/registry/rbac/... \
    k8s.io/kubernetes/pkg/controller/clusterroleaggregation k8s.io/component-helpers/auth/rbac/...
}

bash hack/start-libvirt.sh
step "main pass" main_pass

etcd3_log="$(mktemp)"
step "apiserver suite on etcd3" env BACKSTOP_TEST_STORAGE=etcd3 go test -count=1 -timeout 30m ./test/integration/apiserver \
  >"${etcd3_log}" 2>&1 &
etcd3=$!
# A step that fails ends the script: the etcd3 pass goes with it, its
# servers and etcd too (the processes under it, deepest first).
killtree() {
  local child
  for child in $(pgrep -P "$1"); do
    killtree "${child}"
  done
  kill "$1" 2>/dev/null || true
}
trap 'killtree "${etcd3}"; rm -f "${etcd3_log}"' EXIT

step "crash points" crash_points
step "kube's RBAC packages" rbac_upstream
step "fuzzing request bodies" go test -count=1 -run '^$' -fuzz FuzzRequestBodies -fuzztime 30s ./pkg/registry
step "fuzzing names" go test -count=1 -run '^$' -fuzz FuzzNames -fuzztime 10s ./pkg/rootdir
step "storage under the race detector" go test -race -count=1 -timeout 30m ./pkg/storage/...

status=0
wait "${etcd3}" || status=$?
cat "${etcd3_log}"
exit "${status}"
