#!/usr/bin/env bash
# Builds the web console (web/console) into a directory, default
# pkg/console/dist (committed: the binary embeds it, and builds without
# Node.js from the committed bundle). npm ci installs the packages
# package-lock.json pins (no install scripts run), then esbuild's Go API
# (hack/tools/build-console) bundles them with the sources. Without npm
# (a machine without Node.js) it leaves the committed bundle as it is.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
out="${1:-pkg/console/dist}"
if ! command -v npm >/dev/null 2>&1; then
  echo "build-console: no npm (Node.js): the committed bundle in pkg/console/dist is used" >&2
  exit 0
fi
lock="web/console/package-lock.json"
stamp="web/console/node_modules/.backstop-lock"
if ! cmp -s "${lock}" "${stamp}" 2>/dev/null; then
  (cd web/console && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null)
  cp "${lock}" "${stamp}"
fi
go run ./hack/tools/build-console web/console "${out}"
