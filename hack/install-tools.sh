#!/usr/bin/env bash
# Installs what the tests run besides the server (make tools): the Debian
# packages (libvirt, QEMU) and the guest image, fetched while the Go tools
# build (those steps wait on the network and the disk, the builds on the
# CPU), then etcd, kube-apiserver and kube-controller-manager, the CSI stack
# (hostpath driver and sidecars), the velero CLI, server and AWS plugin, and
# versitygw, one after the other. Each script
# says what it installs and skips what is there already.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p _output
packages_log=_output/install-packages.log
(bash hack/install-libvirt.sh && bash hack/build-guest.sh) >"${packages_log}" 2>&1 &
packages=$!
trap 'kill "${packages}" 2>/dev/null || true' EXIT
bash hack/install-etcd.sh
bash hack/install-kube.sh
bash hack/install-csi.sh
bash hack/install-velero.sh
bash hack/install-versitygw.sh
status=0
wait "${packages}" || status=$?
trap - EXIT
cat "${packages_log}"
if [[ ${status} -ne 0 ]]; then
  echo "install-tools: installing libvirt or building the guest failed (exit ${status}); its output is above" >&2
  exit "${status}"
fi
