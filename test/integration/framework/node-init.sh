#!/usr/bin/env bash
# PID 1 of a harness node (node.go): runs in a PID and mount namespace of
# its own, which the harness made for it (its network is the test's), and
# supervises the node's daemons: containerd, then kubelet, then what the
# node's daemons file adds. On SIGTERM it stops them in reverse order and
# exits; when one of them exits on its own, it stops the rest and exits 1.
# When it dies, the kernel kills whatever is left in its PID namespace
# (containers, shims), and the namespace's mounts go with the last process.
#
#   node-init.sh <node dir> <cgroup root> <logs dir>
#
# The node dir holds what node.go wrote: containerd.toml, kubelet.yaml,
# node.kubeconfig, images (the tarballs to import), daemons (more
# `start <name> <command>...` lines, sourced), and gets the state; each
# daemon's output goes to <logs dir>/<name>.log.
set -euo pipefail
dir=$1 cgroup_root=$2 logs=$3
bin=$(cat "${dir}/bin-dir")
pids=() names=()

log() { echo "node-init: $(date +%T.%N | cut -c1-12) $*"; }

start() {
  local name=$1
  shift
  "$@" >"${logs}/${name}.log" 2>&1 &
  pids+=($!) names+=("${name}")
  log "started ${name} (pid $!)"
}

stop_all() {
  local i
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    kill -TERM "${pids[i]}" 2>/dev/null || true
    for _ in $(seq 1 50); do
      kill -0 "${pids[i]}" 2>/dev/null || break
      sleep 0.2
    done
    kill -KILL "${pids[i]}" 2>/dev/null || true
  done
}
trap 'log "stopping"; stop_all; exit 0' TERM INT

# 1. Mounts of this namespace only. /run (containerd's state and shim
#    sockets, runc's, the pods' network namespaces) and /var/lib (kubelet's
#    and libcni's hard-wired directories) are the node's own; kubelet's
#    root and libcni's cache are bound from the node dir, /var/log too.
mount --make-rprivate /
mount -t proc proc /proc
mount -t tmpfs -o mode=0755 tmpfs /run
mount -t tmpfs -o mode=0755 tmpfs /var/lib
mkdir -p /var/lib/kubelet /var/lib/cni "${dir}/kubelet" "${dir}/cni" "${dir}/log"
mount --bind "${dir}/kubelet" /var/lib/kubelet
# kubelet's volume mounts reach the containers (containerd binds them):
# shared within the node.
mount --make-shared /var/lib/kubelet
mount --bind "${dir}/cni" /var/lib/cni
mount --bind "${dir}/log" /var/log
# kubelet (protectKernelDefaults) checks six global sysctls and would set
# three of them: it is shown files holding the values it expects.
for kv in vm/overcommit_memory=1 vm/panic_on_oom=0 kernel/panic=10 kernel/panic_on_oops=1 \
  kernel/keys/root_maxkeys=1000000 kernel/keys/root_maxbytes=25000000; do
  f="${dir}/sysctl/${kv%%=*}"
  mkdir -p "$(dirname "${f}")"
  echo "${kv#*=}" >"${f}"
  mount --bind "${f}" "/proc/sys/${kv%%=*}"
done

# 2. The node's cgroup root in every hierarchy (kubelet's cgroupRoot: it
#    must exist); node.go removes it when the node is gone.
awk '{ for (i = 7; i < NF; i++) if ($i == "-") { if ($(i + 1) ~ /^cgroup2?$/) print $5; break } }' /proc/self/mountinfo | while read -r m; do
  mkdir -p "${m}${cgroup_root}"
done

# 3. containerd (overlayfs where this filesystem takes it), the images.
snapshotter=overlayfs
o="${dir}/overlay-test"
mkdir -p "${o}"/{l,u,w,m}
if mount -t overlay overlay -o "lowerdir=${o}/l,upperdir=${o}/u,workdir=${o}/w" "${o}/m" 2>/dev/null; then
  umount "${o}/m"
else
  snapshotter=native
fi
rm -rf "${o}"
sed -i "s/@SNAPSHOTTER@/${snapshotter}/" "${dir}/containerd.toml"
# containerd finds containerd-shim-runc-v2 on PATH.
export PATH="${bin}:${PATH}"
start containerd "${bin}/containerd" --config "${dir}/containerd.toml"
ctr=("${bin}/ctr" --address /run/containerd/containerd.sock --namespace k8s.io)
for _ in $(seq 1 100); do
  "${ctr[@]}" version >/dev/null 2>&1 && break
  kill -0 "${pids[0]}" 2>/dev/null || { log "containerd exited"; exit 1; }
  sleep 0.1
done
while read -r image; do
  "${ctr[@]}" images import --platform linux/amd64 "${image}" >/dev/null
done <"${dir}/images"
log "containerd ready (${snapshotter}); images: $("${ctr[@]}" images ls -q | tr '\n' ' ')"

# 4. kubelet, then the node's other daemons.
start kubelet "${bin}/kubelet" --config="${dir}/kubelet.yaml" --kubeconfig="${dir}/node.kubeconfig" \
  --root-dir=/var/lib/kubelet $(cat "${dir}/kubelet-flags")
# shellcheck source=/dev/null
source "${dir}/daemons"

# 5. Supervise: the first daemon to exit ends the node.
set +e
wait -n "${pids[@]}"
rc=$?
for i in "${!pids[@]}"; do
  kill -0 "${pids[i]}" 2>/dev/null || log "${names[i]} exited (status ${rc})"
done
stop_all
exit 1
