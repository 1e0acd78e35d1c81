#!/usr/bin/env bash
# Fails when the generated code differs from what hack/update-codegen.sh
# produces from the current types. Runs the generators on a copy of the tree.
set -o errexit
set -o nounset
set -o pipefail

SCRIPT_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export PATH=/usr/local/go/bin:${PATH}
TMP=$(mktemp -d)
trap 'rm -rf "${TMP}"' EXIT

# Copy the tracked and untracked-but-not-ignored files (not _output, data, caches).
(cd "${SCRIPT_ROOT}" && git ls-files -co --exclude-standard -z | xargs -0 cp --parents -t "${TMP}")
# Reuse the generator binaries the work tree already built, if any.
if [ -d "${SCRIPT_ROOT}/_output/codegen-bin" ]; then
  mkdir -p "${TMP}/_output" && cp -a "${SCRIPT_ROOT}/_output/codegen-bin" "${TMP}/_output/"
fi
(cd "${TMP}" && bash hack/update-codegen.sh >/dev/null)
if ! diff -r -q "${SCRIPT_ROOT}/pkg" "${TMP}/pkg" >/dev/null ||
   ! diff -q "${SCRIPT_ROOT}/hack/api-rule-violations.list" "${TMP}/hack/api-rule-violations.list" >/dev/null; then
  diff -r -u "${SCRIPT_ROOT}/pkg" "${TMP}/pkg" | head -200
  diff -u "${SCRIPT_ROOT}/hack/api-rule-violations.list" "${TMP}/hack/api-rule-violations.list" | head -50
  echo "generated code is out of date: run hack/update-codegen.sh" >&2
  exit 1
fi
echo "generated code is up to date"
