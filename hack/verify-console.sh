#!/usr/bin/env bash
# Fails when the committed console bundle (pkg/console/dist) differs from a
# fresh build of web/console (hack/build-console.sh): the bundle the binary
# embeds is the one its sources and locked packages make.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v npm >/dev/null 2>&1; then
  echo "verify-console: npm (Node.js) is required: run hack/setup.sh" >&2
  exit 1
fi
tmp="$(mktemp -d)"
trap 'rm -rf "${tmp}"' EXIT
# npm ci again whatever node_modules holds: the packages are the lock's.
rm -f web/console/node_modules/.backstop-lock
bash hack/build-console.sh "${tmp}"
if ! diff -r "${tmp}" pkg/console/dist; then
  echo "verify-console: pkg/console/dist is not the bundle web/console builds: run hack/build-console.sh and commit it" >&2
  exit 1
fi
echo "verify-console: pkg/console/dist is the bundle web/console builds"
