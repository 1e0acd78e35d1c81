#!/usr/bin/env bash
# Builds the etcd server used by the storage benchmarks (test/storagebench)
# into _output/bin/etcd, from the Go module proxy.
#
# The version is the one go.mod's dependency graph selects for
# go.etcd.io/etcd/client/v3, so the benchmark's client and server match.
# Nothing from etcd is vendored or committed: the build happens in a
# throw-away module in a temporary directory.
#
# Idempotent: does nothing if _output/bin/etcd already reports that version.
# Override the version with ETCD_VERSION=v3.x.y.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${root}"

version="${ETCD_VERSION:-$(go list -m -f '{{.Version}}' go.etcd.io/etcd/client/v3)}"
if [[ -z "${version}" ]]; then
  echo "install-etcd: cannot determine the etcd version from go.mod" >&2
  exit 1
fi
bin_dir="${root}/_output/bin"
etcd_bin="${bin_dir}/etcd"

if [[ -x "${etcd_bin}" ]]; then
  have="$("${etcd_bin}" --version 2>/dev/null | sed -n 's/^etcd Version: //p')"
  if [[ "v${have}" == "${version}" ]]; then
    echo "install-etcd: ${etcd_bin} is already etcd ${version}"
    exit 0
  fi
  echo "install-etcd: ${etcd_bin} is etcd ${have:-unknown}, want ${version}; rebuilding"
fi

# `go install go.etcd.io/etcd/server/v3@version` refuses to build: the
# server's go.mod has replace directives (../api, ../client/...). Build the
# package main at the server module's root from a scratch module instead,
# pinning every etcd module of the release to the same version.
work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT
(
  cd "${work}"
  export GOFLAGS=-mod=mod GOWORK=off
  go mod init etcd-build >/dev/null 2>&1
  go get \
    "go.etcd.io/etcd/server/v3@${version}" \
    "go.etcd.io/etcd/api/v3@${version}" \
    "go.etcd.io/etcd/client/pkg/v3@${version}" \
    "go.etcd.io/etcd/client/v3@${version}" \
    "go.etcd.io/etcd/pkg/v3@${version}"
  mkdir -p "${bin_dir}"
  CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "${etcd_bin}.tmp" go.etcd.io/etcd/server/v3
)
mv -f "${etcd_bin}.tmp" "${etcd_bin}"
echo "install-etcd: built $("${etcd_bin}" --version | head -1) at ${etcd_bin}"
