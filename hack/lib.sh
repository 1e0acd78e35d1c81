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

# build_module_main <module> <version> <package> <binary> [ldflags]: builds
# a main package of a module from the Go module proxy as that module's own
# main module (its go.mod, not this one's), from a writable copy under
# _output/src/, into <binary>; for tools that are no dependency of this
# module (kopia's CLI). Idempotent: <binary>.version records the
# version built, and a binary of that version is not built again.
build_module_main() {
  local module=$1 version=$2 package=$3 bin=$4 ldflags=${5:-} dir src name
  name="$(basename "${bin}")"
  if [[ -x "${bin}" && "$(cat "${bin}.version" 2>/dev/null)" == "${version}" ]]; then
    echo "install-${name}: ${bin} is already ${name} ${version}"
    return 0
  fi
  echo "install-${name}: building ${name} ${version}"
  dir="$(GOFLAGS= go mod download -json "${module}@${version}" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p' | head -n1)"
  if [[ -z "${dir}" || ! -f "${dir}/go.mod" ]]; then
    echo "install-${name}: could not download ${module}@${version}" >&2
    return 1
  fi
  src="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/_output/src/$(basename "${module%/v[0-9]*}")-${version}"
  writable_module_copy "${dir}" "${src}"
  mkdir -p "$(dirname "${bin}")"
  (cd "${src}" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w ${ldflags}" -o "${bin}.tmp" "${package}")
  mv -f "${bin}.tmp" "${bin}"
  echo "${version}" >"${bin}.version"
}

# apt_install <who> <package>...: installs the Debian packages not
# installed yet (apt-get: needs root; APT_INSTALL_OPTIONS adds options,
# such as --no-install-recommends); says so and does nothing when all
# are. <who> names the script in its messages; apt's output goes to
# /tmp/backstop-apt-<who>.log, and its tail to stderr when it fails.
apt_install() {
  local who=$1 missing=() p
  shift
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "${p}" 2>/dev/null | grep -q "install ok installed" || missing+=("${p}")
  done
  if [[ ${#missing[@]} -eq 0 ]]; then
    echo "install-${who}: $* already installed"
    return 0
  fi
  if [[ $(id -u) -ne 0 ]]; then
    echo "install-${who}: installing ${missing[*]} needs root (apt-get)" >&2
    return 1
  fi
  echo "install-${who}: installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ${APT_INSTALL_OPTIONS:-} "${missing[@]}" >"/tmp/backstop-apt-${who}.log" 2>&1 || {
    tail -30 "/tmp/backstop-apt-${who}.log" >&2
    return 1
  }
}
