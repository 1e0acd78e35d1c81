#!/usr/bin/env bash
# Installs Prometheus (and promtool) from Debian's packages: the monitoring
# tests scrape the server with it and evaluate Velero's dashboards' and
# alerts' queries through its HTTP API. Needs root (apt-get); idempotent:
# does nothing when it is installed. The package's own service is not
# used: the tests run prometheus with their own configuration, on
# loopback, and stop it.
set -euo pipefail

if dpkg-query -W -f='${Status}' prometheus 2>/dev/null | grep -q "install ok installed"; then
  echo "install-prometheus: prometheus $(dpkg-query -W -f='${Version}' prometheus) already installed"
  exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "install-prometheus: installing prometheus needs root (apt-get)" >&2
  exit 1
fi
echo "install-prometheus: installing prometheus"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# Without its recommends (the node exporter and others): the server and
# promtool only.
apt-get install -y -qq --no-install-recommends prometheus >/tmp/backstop-apt-prometheus.log 2>&1 || {
  tail -30 /tmp/backstop-apt-prometheus.log >&2
  exit 1
}
# The package starts its service where an init system runs: the tests'
# Prometheus is their own.
if command -v systemctl >/dev/null && systemctl is-active --quiet prometheus 2>/dev/null; then
  systemctl disable --now prometheus >/dev/null 2>&1 || true
fi
echo "install-prometheus: prometheus $(dpkg-query -W -f='${Version}' prometheus)"
