#!/usr/bin/env bash
# Installs what the harness's nodes run besides kubelet
# (test/integration/framework's Node; install-kube.sh builds kubelet and
# kube-scheduler):
#   runc, busybox-static   Debian's packages (containerd runs runc; the
#                          shell image is Debian's busybox);
#   containerd,            containerd (Kubernetes 1.36+ needs containerd
#   containerd-shim-runc-v2, 2.x), from the Go module proxy, built as its
#   ctr                    own main module (its go.mod's versions, not
#                          this module's);
#   cni/bridge, cni/host-local, cni/loopback
#                          the CNI plugins the nodes' pod network uses
#                          (containernetworking/plugins), likewise;
#   _output/images/pause.tar, busybox.tar
#                          the images every node imports (no registry is
#                          reachable): the pod sandbox, Kubernetes' own
#                          build/pause/linux/pause.c (from the
#                          k8s.io/kubernetes module go.mod requires) built
#                          static with gcc as its Makefile builds it, and
#                          a shell, Debian's busybox-static; one layer
#                          each, packed by hack/tools/mkimage
#                          (go-containerregistry) as docker-archive
#                          tarballs for `ctr images import`.
# Idempotent: a binary of its version (build_module_main) and images whose
# inputs did not change are kept.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${root}"
source hack/lib.sh
export PATH=/usr/local/go/bin:${PATH}

containerd_version="${CONTAINERD_VERSION:-v2.4.2}"
cni_version="${CNI_PLUGINS_VERSION:-v1.10.0}"
bin="${root}/_output/bin"
images="${root}/_output/images"

apt_install node runc busybox-static

# This module's build flags are not containerd's nor the plugins'.
(
  export GOFLAGS=
  ldflags="-X github.com/containerd/containerd/v2/version.Version=${containerd_version}"
  for cmd in containerd containerd-shim-runc-v2 ctr; do
    build_module_main github.com/containerd/containerd/v2 "${containerd_version}" "./cmd/${cmd}" "${bin}/${cmd}" "${ldflags}"
  done
  ldflags="-X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=${cni_version}"
  for plugin in main/bridge ipam/host-local main/loopback; do
    build_module_main github.com/containernetworking/plugins "${cni_version}" "./plugins/${plugin}" \
      "${bin}/cni/$(basename "${plugin}")" "${ldflags}"
  done
)

# The images, rebuilt when what goes into them changed: pause.c, the
# busybox package, mkimage's source.
kube_dir="$(go list -m -f '{{.Dir}}' k8s.io/kubernetes)"
pause_c="${kube_dir}/build/pause/linux/pause.c"
inputs="$(sha256sum "${pause_c}" /bin/busybox hack/tools/mkimage/main.go | cut -d' ' -f1 | sha256sum | cut -d' ' -f1)"
if [[ -f "${images}/pause.tar" && -f "${images}/busybox.tar" && "$(cat "${images}/inputs" 2>/dev/null)" == "${inputs}" ]]; then
  echo "install-node: the images in ${images} are up to date"
  exit 0
fi
echo "install-node: building the images"
work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT
go build -o "${work}/mkimage" ./hack/tools/mkimage
mkdir -p "${images}" "${work}/pause" "${work}/busybox"/{bin,etc,tmp,proc,sys,dev,root}
gcc -Os -Wall -Werror -static -DVERSION="$(go list -m -f '{{.Version}}' k8s.io/kubernetes)-harness" \
  -o "${work}/pause/pause" "${pause_c}"
strip "${work}/pause/pause"
cp /bin/busybox "${work}/busybox/bin/busybox"
for applet in $(/bin/busybox --list); do
  [[ "${applet}" == busybox ]] || ln -s busybox "${work}/busybox/bin/${applet}"
done
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"${work}/busybox/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"${work}/busybox/etc/group"
chmod 1777 "${work}/busybox/tmp"
"${work}/mkimage" -root "${work}/pause" -tag localhost/pause:harness -entrypoint /pause -out "${images}/pause.tar"
"${work}/mkimage" -root "${work}/busybox" -tag localhost/busybox:harness -cmd sh -out "${images}/busybox.tar"
echo "${inputs}" >"${images}/inputs"
ls -l "${images}"
