#!/usr/bin/env bash
# Starts the libvirt daemons by hand (machines without systemd): virtlogd,
# then libvirtd, unless they run already, and waits until qemu:///system
# answers. Needs root. Idempotent.
set -euo pipefail

if ! pgrep -x virtlogd >/dev/null; then
  virtlogd --daemon
fi
if ! pgrep -x libvirtd >/dev/null; then
  libvirtd --daemon
fi
# libvirtd reconnects to the running QEMUs first: after a restart that can
# take a while.
for _ in $(seq 600); do
  if virsh -c qemu:///system version >/dev/null 2>&1; then
    echo "start-libvirt: $(virsh -c qemu:///system version | grep -E 'library|hypervisor' | tr -s ' ' | paste -sd ';')"
    exit 0
  fi
  sleep 0.1
done
echo "start-libvirt: libvirtd does not answer on qemu:///system" >&2
exit 1
