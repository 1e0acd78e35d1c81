#!/usr/bin/env bash
# Installs the libvirt daemon and QEMU that VM disk backups run on (and
# their tests drive): libvirt-daemon-system, libvirt-dev, qemu-system-x86,
# qemu-utils, from Debian's packages. Needs root (apt-get); idempotent:
# does nothing when they are installed. The server itself builds and runs
# without them (libvirt is loaded at run time: the libvirt_dlopen tag).
set -euo pipefail

cd "$(dirname "$0")/.."
source hack/lib.sh

apt_install libvirt libvirt-daemon-system libvirt-dev qemu-system-x86 qemu-utils
echo "install-libvirt: $(dpkg-query -W -f='libvirt ${Version}' libvirt-daemon), $(dpkg-query -W -f='qemu ${Version}' qemu-system-x86)"
