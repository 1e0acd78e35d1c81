#!/usr/bin/env bash
# Builds the velero CLI the integration tests drive the server with into
# _output/bin/velero, from the Go module proxy (nothing of Velero is
# committed). Velero's go.mod has replace directives (kopia), so the module is
# built as its own main module from a writable copy under _output/src/.
#
# Idempotent: does nothing if _output/bin/velero already reports the version.
# Override the version with VELERO_VERSION=v1.x.y.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${root}"
export PATH=/usr/local/go/bin:${PATH}

version="${VELERO_VERSION:-v1.18.0}"
bin="${root}/_output/bin/velero"
if [[ -x "${bin}" ]] && "${bin}" version --client-only 2>/dev/null | grep -q "Version: ${version}\$"; then
  echo "install-velero: ${bin} is already velero ${version}"
  exit 0
fi

info="$(go mod download -json "github.com/vmware-tanzu/velero@${version}")"
field() { sed -n "s/^[[:space:]]*\"$1\": \"\(.*\)\",\{0,1\}\$/\1/p" <<<"${info}" | head -n1; }
dir="$(field Dir)"
if [[ -z "${dir}" || ! -f "${dir}/go.mod" ]]; then
  echo "install-velero: could not download github.com/vmware-tanzu/velero@${version}" >&2
  exit 1
fi
git_sha="$(field Hash)" # commit of the tag, from the proxy's Origin (may be empty)

# Writable copy of the module (the module cache is read-only). Copied to a
# temporary name and renamed, so an interrupted copy is never mistaken for a
# complete one.
src="${root}/_output/src/velero-${version}"
if [[ ! -f "${src}/.complete" ]]; then
  rm -rf "${src}" "${src}.tmp"
  mkdir -p "$(dirname "${src}")"
  cp -r "${dir}" "${src}.tmp"
  chmod -R u+w "${src}.tmp"
  touch "${src}.tmp/.complete"
  mv "${src}.tmp" "${src}"
fi

# Same -X flags as velero's hack/build.sh (REGISTRY defaults to "velero" in its
# Makefile; it is the default image registry of `velero install`).
pkg=github.com/vmware-tanzu/velero/pkg/buildinfo
ldflags="-s -w -X ${pkg}.Version=${version} -X ${pkg}.ImageRegistry=velero"
ldflags+=" -X ${pkg}.GitSHA=${git_sha} -X ${pkg}.GitTreeState=clean"

echo "install-velero: building velero ${version} (a cold build takes several minutes)"
mkdir -p "$(dirname "${bin}")"
# Built to a temporary name and renamed into place.
(cd "${src}" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath \
  -ldflags "${ldflags}" -o "${bin}.tmp" ./cmd/velero)
mv -f "${bin}.tmp" "${bin}"
"${bin}" version --client-only
