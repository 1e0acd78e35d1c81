#!/usr/bin/env bash
# Builds the velero CLI the integration tests drive the server with into
# _output/bin/velero, from the Go module proxy (nothing of Velero is
# committed). Velero's go.mod has replace directives, so the module is built
# as its own main module from a writable copy under _output/.
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

dir="$(go mod download -json "github.com/vmware-tanzu/velero@${version}" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')"
if [[ -z "${dir}" ]]; then
  echo "install-velero: could not download github.com/vmware-tanzu/velero@${version}" >&2
  exit 1
fi
src="${root}/_output/src/velero-${version}"
if [[ ! -f "${src}/go.mod" ]]; then
  rm -rf "${src}"
  mkdir -p "$(dirname "${src}")"
  cp -r "${dir}" "${src}"
  chmod -R u+w "${src}"
fi
echo "install-velero: building velero ${version} (first build takes a few minutes)"
pkg=github.com/vmware-tanzu/velero/pkg/buildinfo
(cd "${src}" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath \
  -ldflags "-s -w -X ${pkg}.Version=${version} -X ${pkg}.GitTreeState=clean" \
  -o "${bin}" ./cmd/velero)
"${bin}" version --client-only
