#!/usr/bin/env bash
# Builds the guest the quiesce tests boot: Debian's cloud kernel and an
# initramfs holding busybox, the virtio modules and QEMU's guest agent
# (qemu-ga, with the host's copies of its libraries: the same Debian), whose
# /init is hack/guest/init. The packages are fetched with apt-get download
# (nothing is installed but cpio and e2fsprogs, to build the initramfs and
# the test disks). Output, kept between runs: _output/guest/vmlinuz and
# _output/guest/initrd.gz. Needs root for apt-get the first time.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${root}/_output/guest"
if [[ -f "${out}/vmlinuz" && -f "${out}/initrd.gz" && "${out}/initrd.gz" -nt "${root}/hack/guest/init" ]]; then
  echo "build-guest: ${out} is up to date"
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
for p in cpio e2fsprogs; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    apt-get install -y -qq "$p" >/dev/null || { apt-get update -qq && apt-get install -y -qq "$p" >/dev/null; }
  fi
done

work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT
cd "${work}"
# The kernel package the cloud metapackage points at.
kernel="$(apt-cache depends linux-image-cloud-amd64 | sed -n 's/.*Depends: \(linux-image-[0-9].*-cloud-amd64\)$/\1/p' | head -1)"
if [[ -z "${kernel}" ]]; then
  apt-get update -qq
  kernel="$(apt-cache depends linux-image-cloud-amd64 | sed -n 's/.*Depends: \(linux-image-[0-9].*-cloud-amd64\)$/\1/p' | head -1)"
fi
[[ -n "${kernel}" ]] || { echo "build-guest: no linux-image-*-cloud-amd64 package found" >&2; exit 1; }
# apt-get download writes into the current directory as the _apt user.
chmod 777 "${work}"
apt-get download -qq "${kernel}" qemu-guest-agent busybox-static
mkdir x
for d in ./*.deb; do dpkg-deb -x "$d" x; done

initrd="${work}/root"
mkdir -p "${initrd}/bin" "${initrd}/usr/sbin" "${initrd}/lib/modules"
cp x/bin/busybox "${initrd}/bin/"
cp x/usr/sbin/qemu-ga "${initrd}/usr/sbin/"
kdir="$(echo x/lib/modules/*/kernel)"
cp "${kdir}"/drivers/virtio/{virtio_ring,virtio,virtio_pci_legacy_dev,virtio_pci_modern_dev,virtio_pci}.ko \
  "${kdir}/drivers/char/virtio_console.ko" "${kdir}/drivers/block/virtio_blk.ko" "${initrd}/lib/modules/"
for lib in $(ldd x/usr/sbin/qemu-ga | grep -o '/lib[^ ]*'); do
  mkdir -p "${initrd}$(dirname "${lib}")"
  cp -L "${lib}" "${initrd}${lib}"
done
cp "${root}/hack/guest/init" "${initrd}/init"
chmod 755 "${initrd}/init"

mkdir -p "${out}"
(cd "${initrd}" && find . | cpio -o -H newc --quiet | gzip -1) >"${out}/initrd.gz.tmp"
cp x/boot/vmlinuz-* "${out}/vmlinuz.tmp"
mv "${out}/vmlinuz.tmp" "${out}/vmlinuz"
mv "${out}/initrd.gz.tmp" "${out}/initrd.gz"
echo "build-guest: ${kernel}, $(dpkg-deb -f ./qemu-guest-agent*.deb Version | sed 's/^/qemu-guest-agent /') in ${out}"
