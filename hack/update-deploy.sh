#!/usr/bin/env bash
# Renders the chart (charts/backstop) into the plain manifests of
# artifacts/deploy: `helm template` with the chart's defaults in the
# namespace backstop-system, the namespace made by the manifests
# (createNamespace), one file per template. artifacts/deploy is never
# edited by hand: edit the chart and run this (TestDeployFromChart fails
# when they differ). `update-deploy.sh DIR` writes DIR instead.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${root}"
helm="${HELM:-${root}/_output/bin/helm}"
out="${1:-${root}/artifacts/deploy}"
if [[ ! -x "${helm}" ]]; then
  echo "update-deploy: ${helm} is missing: run hack/install-helm.sh (make tools)" >&2
  exit 1
fi
tmp="$(mktemp -d)"
trap 'rm -rf "${tmp}"' EXIT
"${helm}" template backstop charts/backstop --namespace backstop-system --set createNamespace=true --output-dir "${tmp}" >/dev/null
mkdir -p "${out}"
rm -f "${out}"/*.yaml
for f in "${tmp}"/backstop/templates/*.yaml; do
  name="$(basename "${f}")"
  {
    echo "# Generated from charts/backstop/templates/${name} by hack/update-deploy.sh:"
    echo "# edit the chart, not this file. Apply this directory with"
    echo "#   kubectl apply -f artifacts/deploy/"
    echo "# after building and pushing an image of cmd/backstop-apiserver and setting"
    echo "# it in 40-deployment.yaml, or install the chart: helm install backstop"
    echo "# charts/backstop --namespace backstop-system --create-namespace."
    # helm writes each document as "---", "# Source: <template>", the
    # document and a blank line (the documents of a template in the order
    # it installs kinds): the first separator, the source lines and the
    # blank lines before a separator or the end go.
    sed -e '1{/^---$/d}' -e '/^# Source: /d' "${f}" |
      awk '/^$/ { blank++; next } { if ($0 != "---") for (; blank > 0; blank--) print ""; blank = 0; print }' 
  } >"${out}/${name}"
done
