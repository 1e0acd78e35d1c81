#!/usr/bin/env bash
# Builds Velero from the Go module proxy (nothing of Velero is committed):
#   _output/bin/velero: the velero binary, the CLI the integration tests
#     drive the server with and the Velero server the peer benchmarks run
#     (`velero server`);
#   _output/bin/velero-plugins/velero-plugin-for-aws: the object store
#     plugin that Velero server stores into the tests' S3 server with (the
#     directory holds that plugin only: Velero runs every executable in its
#     --plugin-dir).
# Velero's go.mod has replace directives (kopia), so the module is built as
# its own main module from a writable copy under _output/src/.
#
# Idempotent: does nothing for a binary that already reports its version.
# Override the versions with VELERO_VERSION=v1.x.y and
# VELERO_AWS_PLUGIN_VERSION=v1.x.y.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${root}"
source hack/lib.sh
export PATH=/usr/local/go/bin:${PATH}
# This module's build flags are not the peers'.
export GOFLAGS=

version="${VELERO_VERSION:-v1.18.3}"
plugin_version="${VELERO_AWS_PLUGIN_VERSION:-v1.14.3}"
bin="${root}/_output/bin/velero"
plugins="${root}/_output/bin/velero-plugins"

build_velero() {
  # grep reads all of the output: with -q it could exit first, and velero's
  # SIGPIPE would fail the pipeline (pipefail) and rebuild it every time.
  if [[ -x "${bin}" ]] && "${bin}" version --client-only 2>/dev/null | grep "Version: ${version}\$" >/dev/null; then
    echo "install-velero: ${bin} is already velero ${version}"
    return
  fi
  local info dir git_sha
  info="$(go mod download -json "github.com/vmware-tanzu/velero@${version}")"
  field() { sed -n "s/^[[:space:]]*\"$1\": \"\(.*\)\",\{0,1\}\$/\1/p" <<<"${info}" | head -n1; }
  dir="$(field Dir)"
  if [[ -z "${dir}" || ! -f "${dir}/go.mod" ]]; then
    echo "install-velero: could not download github.com/vmware-tanzu/velero@${version}" >&2
    exit 1
  fi
  git_sha="$(field Hash)" # commit of the tag, from the proxy's Origin (may be empty)

  local src="${root}/_output/src/velero-${version}"
  writable_module_copy "${dir}" "${src}"

  # A module Velero pins that the module proxy may not serve (k8s.io/cli-runtime
  # v0.33.12, which v1.18.3 pins, answers 403 "not available" here) is built at
  # the next patch release instead; Velero's own code is unchanged.
  local pinned substitute
  for pinned in "k8s.io/cli-runtime@v0.33.12=k8s.io/cli-runtime@v0.33.13"; do
    substitute="${pinned#*=}"
    pinned="${pinned%%=*}"
    if grep -q "^[[:space:]]*${pinned%@*} ${pinned#*@}\$" "${src}/go.mod" && ! go mod download "${pinned}" >/dev/null 2>&1; then
      echo "install-velero: ${pinned} is not on the module proxy: building with ${substitute}"
      (cd "${src}" && go mod edit -replace "${pinned}=${substitute}")
    fi
  done

  # Same -X flags as velero's hack/build.sh (REGISTRY defaults to "velero" in its
  # Makefile; it is the default image registry of `velero install`).
  local pkg=github.com/vmware-tanzu/velero/pkg/buildinfo
  local ldflags="-s -w -X ${pkg}.Version=${version} -X ${pkg}.ImageRegistry=velero"
  ldflags+=" -X ${pkg}.GitSHA=${git_sha} -X ${pkg}.GitTreeState=clean"

  echo "install-velero: building velero ${version} (a cold build takes several minutes)"
  mkdir -p "$(dirname "${bin}")"
  # Built to a temporary name and renamed into place.
  (cd "${src}" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath \
    -ldflags "${ldflags}" -o "${bin}.tmp" ./cmd/velero)
  mv -f "${bin}.tmp" "${bin}"
  "${bin}" version --client-only
}

build_aws_plugin() {
  local stamp="${plugins}/.version"
  if [[ -x "${plugins}/velero-plugin-for-aws" && "$(cat "${stamp}" 2>/dev/null)" == "${plugin_version}" ]]; then
    echo "install-velero: ${plugins}/velero-plugin-for-aws is already ${plugin_version}"
    return
  fi
  echo "install-velero: building velero-plugin-for-aws ${plugin_version}"
  local tmp="${root}/_output/velero-plugins.tmp"
  rm -rf "${tmp}"
  mkdir -p "${tmp}"
  # No replace directives in its go.mod: go install builds it as it is.
  CGO_ENABLED=0 GOBIN="${tmp}" go install -trimpath -ldflags "-s -w" \
    "github.com/vmware-tanzu/velero-plugin-for-aws/velero-plugin-for-aws@${plugin_version}"
  echo "${plugin_version}" >"${tmp}/.version"
  rm -rf "${plugins}"
  mv "${tmp}" "${plugins}"
}

build_velero
build_aws_plugin
