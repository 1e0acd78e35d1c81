#!/usr/bin/env bash
# Installs what the tests run besides the server (make tools), in two
# lanes that run side by side:
#   module  kube-apiserver and kube-controller-manager, the CSI sidecars and
#           the snapshot CRDs, the helm CLI: built inside this module,
#           reusing the packages its own build compiled;
#   peers   the Debian packages (libvirt, QEMU, Prometheus, Chromium) and the guest image,
#           what the nodes run besides kubelet (containerd, the CNI plugins,
#           runc, the images), etcd, the hostpath CSI driver, the velero
#           CLI, server and AWS plugin, the kopia CLI and versitygw: modules
#           of their own, whose downloads wait on the network while the
#           other lane computes.
# `install-tools.sh module` or `install-tools.sh peers` runs one lane
# (hack/test.sh starts the peers beside vet, the module lane after it);
# without an argument, both. A lane's output comes in one piece (the peers'
# after the module's). Each script says what it installs and skips what is
# there already.
set -euo pipefail
cd "$(dirname "$0")/.."
source hack/lib.sh

module_lane() {
  bash hack/install-kube.sh
  bash hack/install-csi.sh sidecars
  bash hack/install-helm.sh
}

peers_lane() {
  mkdir -p _output
  local packages_log=_output/install-packages.log packages
  # One apt-get at a time: the node's packages (runc, busybox) after the others.
  (bash hack/install-libvirt.sh && bash hack/install-prometheus.sh && bash hack/install-chromium.sh && bash hack/build-guest.sh &&
    bash hack/install-node.sh) >"${packages_log}" 2>&1 &
  packages=$!
  # A failed build ends the lane: the packages' install goes with it.
  trap 'killtree "${packages}"' EXIT
  bash hack/install-etcd.sh
  bash hack/install-csi.sh driver
  bash hack/install-velero.sh
  bash hack/install-kopia.sh
  bash hack/install-versitygw.sh
  trap - EXIT
  await "${packages}" "${packages_log}" "install-tools: installing libvirt, building the guest or the nodes' tools"
}

case "${1:-all}" in
module) module_lane ;;
peers) peers_lane ;;
all)
  mkdir -p _output
  peers_log=_output/install-peers.log
  (peers_lane) >"${peers_log}" 2>&1 &
  peers=$!
  trap 'killtree "${peers}"' EXIT
  module_lane
  trap - EXIT
  await "${peers}" "${peers_log}" "install-tools: the peers' lane"
  ;;
*)
  echo "usage: install-tools.sh [module|peers]" >&2
  exit 2
  ;;
esac
