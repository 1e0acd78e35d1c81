#!/usr/bin/env bash
# Builds the CSI stack the volume tests run as processes beside the control
# plane (test/integration/framework's CSI), into _output/bin, and copies the
# snapshot.storage.k8s.io CRDs into _output/csi/crd:
#   hostpathplugin       kubernetes-csi/csi-driver-host-path, the driver
#                        Kubernetes' and Velero's own CI use (controller and
#                        node service in one process);
#   snapshot-controller, kubernetes-csi/external-snapshotter: VolumeSnapshot
#   csi-snapshotter      -> VolumeSnapshotContent -> the driver's snapshot;
#   csi-provisioner      kubernetes-csi/external-provisioner: claims ->
#                        volumes, also from a snapshot;
#   csi-attacher         kubernetes-csi/external-attacher: VolumeAttachments
#                        -> the driver's ControllerPublishVolume, for a
#                        driver that says attachRequired (the nodes' tests);
#   csi-registrar        hack/tools/csi-registrar: registers the driver
#                        with a node's kubelet, node-driver-registrar's job
#                        (the Go module proxy does not serve that module);
#   csi-snapshot-metadata kubernetes-csi/external-snapshot-metadata: the
#                        SnapshotMetadata API (a block volume's changed
#                        blocks) over TLS, with its SnapshotMetadataService
#                        CRD (from the project's client module).
#
# external-snapshotter, external-provisioner and external-attacher are built
# inside this module (hack/tools.go pins their commands, go.mod their
# versions), as
# hack/install-kube.sh builds kube-apiserver: they share the module's
# Kubernetes libraries and the packages the server's build compiled. Their
# own go.mod files carry replace directives that only matter to their own
# builds (the snapshotter's client module, the provisioner's k8s.io pins);
# here the module's versions hold.
#
# The hostpath driver is fetched from the Go module proxy where it can be; a
# proxy that refuses it (some do: every version answers 403) is met with the
# release archive committed under third_party/ (its dependencies vendored),
# whose checksum is checked first. Idempotent: a binary that already reports
# its version is kept.
#
# csi-snapshot-metadata is built as a module of its own too, at go.mod's
# version of it (the server imports its client iterator): its runtime
# package compiles a test harness of csi-test v5.4.0's mocks, which neither
# this module's CSI spec nor its csi-test (v5.6.0) compile with. Its go.mod
# points its client module at ./client, which a module zip lacks: the
# client module (at go.mod's version) is copied there.
#
# `install-csi.sh driver` builds the driver only (a module of its own: it
# builds beside this module's compiles, see hack/install-tools.sh),
# `install-csi.sh sidecars` the sidecars and the CRDs; no argument, both.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${root}"
source hack/lib.sh
export PATH=/usr/local/go/bin:${PATH}

bin_dir="${root}/_output/bin"
crd_dir="${root}/_output/csi/crd"
mkdir -p "${bin_dir}" "${crd_dir}"

hostpath_version="${CSI_HOSTPATH_VERSION:-v1.18.0}"
hostpath_module=github.com/kubernetes-csi/csi-driver-host-path
hostpath_archive="${root}/third_party/csi-driver-host-path-${hostpath_version}.tar.gz"
hostpath_sha256=a50c3a01c6618ae4f27d10a114be4743894c3d02299751fd2782b19d7d6c58ec

snapshotter_module=github.com/kubernetes-csi/external-snapshotter/v8
provisioner_module=github.com/kubernetes-csi/external-provisioner/v6
attacher_module=github.com/kubernetes-csi/external-attacher/v4
client_module=github.com/kubernetes-csi/external-snapshotter/client/v8
metadata_module=github.com/kubernetes-csi/external-snapshot-metadata
metadata_client_module=github.com/kubernetes-csi/external-snapshot-metadata/client

# reports <binary> <version>: whether the binary says it is that version
# (each prints "<name> <version>" for --version).
reports() {
  [[ -x "${bin_dir}/$1" ]] && "${bin_dir}/$1" --version 2>/dev/null | grep -- " $2\$" >/dev/null
}

build_hostpath() {
  if reports hostpathplugin "${hostpath_version}"; then
    echo "install-csi: hostpathplugin ${hostpath_version} already in ${bin_dir}"
    return
  fi
  local ldflags="-s -w -X main.version=${hostpath_version}"
  local src="${root}/_output/src/csi-driver-host-path-${hostpath_version}"
  local dir=""
  dir="$(GOFLAGS= go mod download -json "${hostpath_module}@${hostpath_version}" 2>/dev/null |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p' | head -n1)" || true
  local mod_flag
  if [[ -n "${dir}" && -f "${dir}/go.mod" ]]; then
    echo "install-csi: building hostpathplugin ${hostpath_version} from the Go module proxy"
    # A module zip has no vendor directory: its dependencies come from the
    # proxy too.
    mod_flag=-mod=mod
    writable_module_copy "${dir}" "${src}"
  else
    echo "install-csi: the Go module proxy does not serve ${hostpath_module}@${hostpath_version};" \
      "building hostpathplugin from the release archive ${hostpath_archive#"${root}/"} (dependencies vendored)"
    if [[ ! -f "${hostpath_archive}" ]]; then
      echo "install-csi: ${hostpath_archive} is missing" >&2
      exit 1
    fi
    local sum
    sum="$(sha256sum "${hostpath_archive}" | cut -d' ' -f1)"
    if [[ "${sum}" != "${hostpath_sha256}" ]]; then
      echo "install-csi: ${hostpath_archive}: sha256 ${sum}, want ${hostpath_sha256}" >&2
      exit 1
    fi
    echo "install-csi: sha256 of the archive checked: ${sum}"
    mod_flag=-mod=vendor
    if [[ ! -f "${src}/.complete" ]]; then
      rm -rf "${src}" "${src}.tmp"
      mkdir -p "${src}.tmp"
      tar -xzf "${hostpath_archive}" -C "${src}.tmp" --strip-components=1
      touch "${src}.tmp/.complete"
      mv "${src}.tmp" "${src}"
    fi
  fi
  (cd "${src}" && CGO_ENABLED=0 GOFLAGS="${mod_flag}" GOWORK=off go build -trimpath -ldflags "${ldflags}" \
    -o "${bin_dir}/hostpathplugin.tmp" ./cmd/hostpathplugin)
  mv -f "${bin_dir}/hostpathplugin.tmp" "${bin_dir}/hostpathplugin"
  "${bin_dir}/hostpathplugin" --version
}

# build_in_module <binary> <module> <package>: a command of a module go.mod
# requires, built inside this module at go.mod's version.
build_in_module() {
  local name="$1" module="$2" pkg="$3" version
  version="$(go list -m -f '{{.Version}}' "${module}")"
  if reports "${name}" "${version}"; then
    echo "install-csi: ${name} ${version} already in ${bin_dir}"
    return
  fi
  echo "install-csi: building ${name} ${version} in this module"
  go build -ldflags "-s -w -X main.version=${version}" -o "${bin_dir}/${name}.tmp" "${pkg}"
  mv -f "${bin_dir}/${name}.tmp" "${bin_dir}/${name}"
  "${bin_dir}/${name}" --version
}

build_snapshot_metadata() {
  local version client_version
  version="$(go list -m -f '{{.Version}}' "${metadata_module}")"
  client_version="$(go list -m -f '{{.Version}}' "${metadata_client_module}")"
  if reports csi-snapshot-metadata "${version}"; then
    echo "install-csi: csi-snapshot-metadata ${version} already in ${bin_dir}"
    return
  fi
  echo "install-csi: building csi-snapshot-metadata ${version} as a module of its own"
  local src="${root}/_output/src/external-snapshot-metadata-${version}"
  writable_module_copy "$(go list -m -f '{{.Dir}}' "${metadata_module}")" "${src}"
  if [[ ! -f "${src}/client/go.mod" ]]; then
    rm -rf "${src}/client.tmp"
    cp -r "$(go list -m -f '{{.Dir}}' "${metadata_client_module}@${client_version}")" "${src}/client.tmp"
    chmod -R u+w "${src}/client.tmp"
    mv "${src}/client.tmp" "${src}/client"
  fi
  (cd "${src}" && CGO_ENABLED=0 GOFLAGS=-mod=mod GOWORK=off go build -trimpath -ldflags "-s -w -X main.version=${version}" \
    -o "${bin_dir}/csi-snapshot-metadata.tmp" ./cmd/csi-snapshot-metadata)
  mv -f "${bin_dir}/csi-snapshot-metadata.tmp" "${bin_dir}/csi-snapshot-metadata"
  "${bin_dir}/csi-snapshot-metadata" --version
}

build_sidecars() {
  build_in_module snapshot-controller "${snapshotter_module}" "${snapshotter_module}/cmd/snapshot-controller"
  build_in_module csi-snapshotter "${snapshotter_module}" "${snapshotter_module}/cmd/csi-snapshotter"
  build_in_module csi-provisioner "${provisioner_module}" "${provisioner_module}/cmd/csi-provisioner"
  build_in_module csi-attacher "${attacher_module}" "${attacher_module}/cmd/csi-attacher"
  echo "install-csi: building csi-registrar (hack/tools/csi-registrar)"
  go build -ldflags "-s -w" -o "${bin_dir}/csi-registrar" ./hack/tools/csi-registrar

  # The CRDs of the snapshot API, at the client module's version (the one
  # the snapshot-controller is built with).
  local client_dir kind
  client_dir="$(go list -m -f '{{.Dir}}' "${client_module}")"
  for kind in volumesnapshotclasses volumesnapshotcontents volumesnapshots; do
    install -m 0644 "${client_dir}/config/crd/snapshot.storage.k8s.io_${kind}.yaml" "${crd_dir}/"
  done
  echo "install-csi: the snapshot.storage.k8s.io CRDs of ${client_module} $(go list -m -f '{{.Version}}' "${client_module}") in ${crd_dir}"
  client_dir="$(go list -m -f '{{.Dir}}' "${metadata_client_module}")"
  install -m 0644 "${client_dir}/config/crd/cbt.storage.k8s.io_snapshotmetadataservices.yaml" "${crd_dir}/"
  echo "install-csi: the cbt.storage.k8s.io CRD of ${metadata_client_module} $(go list -m -f '{{.Version}}' "${metadata_client_module}") in ${crd_dir}"
}

case "${1:-all}" in
driver)
  build_hostpath
  build_snapshot_metadata
  ;;
sidecars) build_sidecars ;;
all)
  build_hostpath
  build_snapshot_metadata
  build_sidecars
  ;;
*)
  echo "usage: install-csi.sh [driver|sidecars|all]" >&2
  exit 2
  ;;
esac
