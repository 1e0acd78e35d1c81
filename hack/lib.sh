# Shell functions the hack/ scripts share (sourced).

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

# writable_module_copy <module dir> <dest>: a writable copy of a module
# from the read-only module cache, to build it as its own main module.
# Copied to a temporary name and renamed, so an interrupted copy is never
# mistaken for a complete one; a complete copy is kept.
writable_module_copy() {
  local dir=$1 dest=$2
  if [[ -f "${dest}/.complete" ]]; then
    return
  fi
  rm -rf "${dest}" "${dest}.tmp"
  mkdir -p "$(dirname "${dest}")"
  cp -r "${dir}" "${dest}.tmp"
  chmod -R u+w "${dest}.tmp"
  touch "${dest}.tmp/.complete"
  mv "${dest}.tmp" "${dest}"
}
