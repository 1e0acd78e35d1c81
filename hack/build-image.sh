#!/usr/bin/env bash
# Packs the server's image without a container engine (none runs here):
# the binary `make build` made, the C libraries it links (libvirt is loaded
# at run time only where VM backups run, so the image does not carry it,
# as the Dockerfile's does not) and Debian's CA bundle, in one layer,
# by hack/tools/mkimage (go-containerregistry), as a docker-archive tarball
# that `ctr images import` reads. What the Dockerfile builds, without its
# Debian userland.
#
#   hack/build-image.sh [binary] [tag] [out]
#     binary  _output/bin/backstop-apiserver
#     tag     localhost/backstop-apiserver:dev
#     out     _output/images/backstop-apiserver.tar
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${root}"
export PATH=/usr/local/go/bin:${PATH}

binary="${1:-${root}/_output/bin/backstop-apiserver}"
tag="${2:-localhost/backstop-apiserver:dev}"
out="${3:-${root}/_output/images/backstop-apiserver.tar}"

work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT
tree="${work}/root"
mkdir -p "${tree}/usr/local/bin" "${tree}/etc/ssl/certs" "${tree}/tmp" "${tree}/var/lib"
chmod 1777 "${tree}/tmp"
install -m 0755 "${binary}" "${tree}/usr/local/bin/backstop-apiserver"
# The shared libraries and the dynamic loader, at the paths the binary
# names them by.
for lib in $(ldd "${binary}" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }'); do
  mkdir -p "${tree}$(dirname "${lib}")"
  cp -L "${lib}" "${tree}${lib}"
done
if [[ -f /etc/ssl/certs/ca-certificates.crt ]]; then
  cp /etc/ssl/certs/ca-certificates.crt "${tree}/etc/ssl/certs/"
fi
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/nonexistent:/sbin/nologin\n' >"${tree}/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"${tree}/etc/group"

go build -o "${work}/mkimage" ./hack/tools/mkimage
mkdir -p "$(dirname "${out}")"
"${work}/mkimage" -root "${tree}" -tag "${tag}" -entrypoint /usr/local/bin/backstop-apiserver -out "${out}"
echo "build-image: ${tag} in ${out} ($(du -h "${out}" | cut -f1))"
