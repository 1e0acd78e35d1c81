#!/usr/bin/env bash
# Builds versitygw, the S3 server the S3 storage location tests run on
# loopback (its posix backend serves a directory as buckets), into
# _output/bin/versitygw from the Go module proxy; nothing of it is committed.
#
# Idempotent: does nothing if _output/bin/versitygw is already that version.
# Override the version with VERSITYGW_VERSION=v1.x.y.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${root}"
export PATH=/usr/local/go/bin:${PATH}

version="${VERSITYGW_VERSION:-v1.8.0}"
bin="${root}/_output/bin/versitygw"
stamp="${bin}.version"
if [[ -x "${bin}" && -f "${stamp}" && "$(cat "${stamp}")" == "${version}" ]]; then
  echo "install-versitygw: ${bin} is already versitygw ${version}"
  exit 0
fi
echo "install-versitygw: building versitygw ${version} (a cold build takes a few minutes)"
tmp="$(mktemp -d "${root}/_output/versitygw-build.XXXXXX")"
trap 'rm -rf "${tmp}"' EXIT
CGO_ENABLED=0 GOBIN="${tmp}" go install -trimpath -ldflags "-s -w" "github.com/versity/versitygw/cmd/versitygw@${version}"
mkdir -p "$(dirname "${bin}")"
mv -f "${tmp}/versitygw" "${bin}"
echo "${version}" >"${stamp}"
"${bin}" --version || true
