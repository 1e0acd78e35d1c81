#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager, kube-scheduler and kubelet
# into _output/bin, for the aggregated-mode tests (test/integration/cluster):
# Backstop served through a real control plane, whose nodes run pods
# (test/integration/framework's Node; hack/install-node.sh builds what they
# run besides kubelet).
#
# The version is the Kubernetes release matching go.mod's k8s.io/apiserver
# (v0.37.2 -> k8s.io/kubernetes v1.37.2), which go.mod requires already
# (kube's RBAC is a library of the server). They are built inside this
# module (hack/tools.go pins their packages), with its build flags: they
# share the module's versions and reuse the packages the server's build
# compiled (about 1,500 of kube-apiserver's and kube-controller-manager's
# 2,450), so a cold build costs a fraction of a separate one. Nothing is
# vendored or committed. A binary that already reports the version is
# kept.
#
# KUBE_VERSION=v1.x.y builds another release instead, in a throw-away
# module that requires it and replaces each staging module with the
# published one of that release (k8s.io/kubernetes cannot be built with
# `go install`: its go.mod points every k8s.io staging module at ./staging).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${root}"
export PATH=/usr/local/go/bin:$PATH

apiserver_version="$(go list -m -f '{{.Version}}' k8s.io/apiserver)"
module_version="v1.${apiserver_version#v0.}"
version="${KUBE_VERSION:-${module_version}}"
bin_dir="${root}/_output/bin"
binaries=(kube-apiserver kube-controller-manager kube-scheduler kubelet)

# Only what is missing or of another version is built.
missing=()
for b in "${binaries[@]}"; do
  have="$("${bin_dir}/${b}" --version 2>/dev/null || true)"
  if [[ "${have}" != "Kubernetes ${version}" ]]; then
    missing+=("${b}")
  fi
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-kube: ${binaries[*]} ${version} already in ${bin_dir}"
  exit 0
fi

# The version the binaries report (kube-apiserver --version), as a
# release build stamps it; without a symbol table or DWARF (-s -w), as a
# release build is linked (in half the time).
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=${version} -X k8s.io/component-base/version.gitMajor=1"
ldflags+=" -X k8s.io/component-base/version.gitMinor=$(echo "${version}" | cut -d. -f2)"
mkdir -p "${bin_dir}"
if [[ "${version}" == "${module_version}" && "$(go list -m -f '{{.Version}}' k8s.io/kubernetes)" == "${version}" ]]; then
  echo "install-kube: building ${missing[*]} ${version} in this module"
  for b in "${missing[@]}"; do
    go build -ldflags "${ldflags}" -o "${bin_dir}/${b}.tmp" "k8s.io/kubernetes/cmd/${b}"
  done
else
  echo "install-kube: building ${missing[*]} ${version} in a throw-away module (go.mod has ${module_version})"
  work="$(mktemp -d)"
  trap 'rm -rf "${work}"' EXIT
  (
    cd "${work}"
    export GOFLAGS=-mod=mod GOWORK=off
    printf 'module kube-build\n\ngo 1.26\n\nrequire k8s.io/kubernetes %s\n' "${version}" >go.mod
    {
      printf '//go:build tools\n\npackage tools\n\nimport (\n'
      printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "${missing[@]}"
      printf ')\n'
    } >tools.go
    gomod="$(go mod download -json "k8s.io/kubernetes@${version}" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
    staging_version="v0.${version#v1.}"
    grep -E '^\s+k8s.io/\S+ => ./staging/' "${gomod}" |
      awk -v v="${staging_version}" '{print "-replace=" $1 "=" $1 "@" v}' | xargs go mod edit
    go mod tidy
    for b in "${missing[@]}"; do
      CGO_ENABLED=0 go build -trimpath -ldflags "${ldflags}" -o "${bin_dir}/${b}.tmp" "k8s.io/kubernetes/cmd/${b}"
    done
  )
fi
for b in "${missing[@]}"; do
  mv -f "${bin_dir}/${b}.tmp" "${bin_dir}/${b}"
  echo "install-kube: built $("${bin_dir}/${b}" --version) at ${bin_dir}/${b}"
done
