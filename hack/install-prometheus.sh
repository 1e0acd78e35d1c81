#!/usr/bin/env bash
# Installs Prometheus (and promtool) from Debian's packages: the monitoring
# tests scrape the server with it and evaluate Velero's dashboards' and
# alerts' queries through its HTTP API. Needs root (apt-get); idempotent:
# does nothing when it is installed. The package's own service is not
# used: the tests run prometheus with their own configuration, on
# loopback, and stop it.
set -euo pipefail
cd "$(dirname "$0")/.."
source hack/lib.sh

# Without its recommends (the node exporter and others): the server and
# promtool only.
APT_INSTALL_OPTIONS=--no-install-recommends apt_install prometheus prometheus
# The package starts its service where an init system runs: the tests'
# Prometheus is their own.
if command -v systemctl >/dev/null && systemctl is-active --quiet prometheus 2>/dev/null; then
  systemctl disable --now prometheus >/dev/null 2>&1 || true
fi
echo "install-prometheus: prometheus $(dpkg-query -W -f='${Version}' prometheus)"
