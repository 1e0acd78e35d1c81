#!/usr/bin/env bash
# Renders the chart (charts/backstop) into the plain manifests of
# artifacts/deploy: `helm template` with the chart's defaults in the
# namespace backstop-system, the namespace made by the manifests
# (createNamespace), one file per template; and artifacts/monitoring: the
# chart's monitoring objects (ServiceMonitor, PrometheusRule, the Grafana
# dashboard's ConfigMap, for kube-prometheus' Prometheus), its alert rules
# as a Prometheus rule file and its dashboard as Grafana imports it.
# artifacts/deploy and artifacts/monitoring are never edited by hand: edit
# the chart and run this (TestDeployFromChart fails when they differ).
# `update-deploy.sh DIR` writes DIR/deploy and DIR/monitoring instead.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${root}"
helm="${HELM:-${root}/_output/bin/helm}"
artifacts="${1:-${root}/artifacts}"
out="${artifacts}/deploy"
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

# The monitoring objects, for kube-prometheus (its Prometheus runs as the
# ServiceAccount prometheus-k8s of the namespace monitoring).
monitoring="${artifacts}/monitoring"
mkdir -p "${monitoring}"
rm -f "${monitoring}"/*.yaml "${monitoring}"/*.json
{
  echo "# Generated from charts/backstop/templates/70-monitoring.yaml by hack/update-deploy.sh:"
  echo "# edit the chart, not this file. With the Prometheus Operator's CRDs (kube-prometheus: its"
  echo "# Prometheus runs as prometheus-k8s of monitoring; the dashboard's ConfigMap is for Grafana's"
  echo "# dashboard sidecar, as kube-prometheus-stack runs it),"
  echo "#   kubectl apply -f artifacts/monitoring/70-monitoring.yaml"
  echo "# after artifacts/deploy, or install the chart with metrics.serviceMonitor.enabled,"
  echo "# metrics.prometheusRule.enabled and metrics.dashboard.enabled."
  "${helm}" template backstop charts/backstop --namespace backstop-system --show-only templates/70-monitoring.yaml \
    --set metrics.serviceMonitor.enabled=true,metrics.prometheusRule.enabled=true,metrics.dashboard.enabled=true \
    --set metrics.serviceMonitor.prometheusServiceAccount.name=prometheus-k8s,metrics.serviceMonitor.prometheusServiceAccount.namespace=monitoring \
    --set metrics.dashboard.namespace=monitoring |
    sed -e '1{/^---$/d}' -e '/^# Source: /d'
} >"${monitoring}/70-monitoring.yaml"
# The rule file and the dashboard as they are in the chart.
cp charts/backstop/files/prometheus-rules.yaml "${monitoring}/prometheus-rules.yaml"
cp charts/backstop/files/grafana-dashboard.json "${monitoring}/grafana-dashboard.json"
