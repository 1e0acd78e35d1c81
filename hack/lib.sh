# Shell functions hack/test.sh and hack/install-tools.sh share (sourced).

# step runs a command and says how long it took ("test: <name>: N s"), also
# when it failed (and then returns its status).
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

# killtree ends a process and the processes under it, deepest first (a
# lane's go commands, test binaries and the servers they started).
killtree() {
  local child
  for child in $(pgrep -P "$1"); do
    killtree "${child}"
  done
  kill "$1" 2>/dev/null || true
}

# await <pid> <log> <what>: waits for a job started in the background with
# its output in log, shows that output, and says what failed when it did
# (returning its status).
await() {
  local status=0
  wait "$1" || status=$?
  cat "$2"
  if ((status != 0)); then
    echo "$3 failed (exit ${status}); its output is above" >&2
  fi
  return "${status}"
}
