#!/usr/bin/env bash
# Installs the libvirt daemon and QEMU that VM disk backups run on (and
# their tests drive): libvirt-daemon-system, libvirt-dev, qemu-system-x86,
# qemu-utils, from Debian's packages. Needs root (apt-get); idempotent:
# does nothing when they are installed. The server itself builds and runs
# without them (libvirt is loaded at run time: the libvirt_dlopen tag).
set -euo pipefail

pkgs=(libvirt-daemon-system libvirt-dev qemu-system-x86 qemu-utils)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-libvirt: ${pkgs[*]} already installed"
  exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "install-libvirt: installing ${missing[*]} needs root (apt-get)" >&2
  exit 1
fi
echo "install-libvirt: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq "${missing[@]}" >/tmp/backstop-apt-libvirt.log 2>&1 || {
  tail -30 /tmp/backstop-apt-libvirt.log >&2
  exit 1
}
echo "install-libvirt: $(dpkg-query -W -f='libvirt ${Version}' libvirt-daemon), $(dpkg-query -W -f='qemu ${Version}' qemu-system-x86)"
