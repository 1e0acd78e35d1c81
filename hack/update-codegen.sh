#!/usr/bin/env bash
# Regenerates every generated file: deepcopy, conversion and defaulter
# functions (zz_generated.*.go beside the types), OpenAPI definitions and the
# clientset, listers, informers and apply configurations under pkg/generated.
# The generators are k8s.io/code-generator at the version go.mod pins.
set -o errexit
set -o nounset
set -o pipefail

SCRIPT_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "${SCRIPT_ROOT}"
export PATH=/usr/local/go/bin:${PATH}
# The generator binaries are installed into the work tree, not into GOPATH.
export GOBIN="${SCRIPT_ROOT}/_output/codegen-bin"
mkdir -p "${GOBIN}"
export PATH="${GOBIN}:${PATH}"

CODEGEN_PKG=$(go list -m -f '{{.Dir}}' k8s.io/code-generator)
source "${CODEGEN_PKG}/kube_codegen.sh"

THIS_PKG="github.com/backstop-io/backstop"
BOILERPLATE="${SCRIPT_ROOT}/hack/boilerplate.go.txt"
# openapi-gen's API rule report: the known violations (upstream names kept for
# wire compatibility) are recorded here; verify-codegen.sh flags new ones.
touch "${SCRIPT_ROOT}/hack/api-rule-violations.list"

kube::codegen::gen_helpers \
    --boilerplate "${BOILERPLATE}" \
    --extra-peer-dir "${THIS_PKG}/pkg/apis/velero" \
    --extra-peer-dir "${THIS_PKG}/pkg/apis/velero/v1" \
    "${SCRIPT_ROOT}/pkg/apis"

kube::codegen::gen_openapi \
    --output-dir "${SCRIPT_ROOT}/pkg/generated/openapi" \
    --output-pkg "${THIS_PKG}/pkg/generated/openapi" \
    --report-filename "${SCRIPT_ROOT}/hack/api-rule-violations.list" \
    --update-report \
    --output-model-name-file "zz_generated.model_name.go" \
    --extra-pkgs "k8s.io/api/core/v1" \
    --extra-pkgs "k8s.io/api/rbac/v1" \
    --extra-pkgs "k8s.io/api/authorization/v1" \
    --extra-pkgs "k8s.io/api/authentication/v1" \
    --extra-pkgs "k8s.io/api/coordination/v1" \
    --extra-pkgs "k8s.io/apimachinery/pkg/util/intstr" \
    --boilerplate "${BOILERPLATE}" \
    "${SCRIPT_ROOT}/pkg/apis"

kube::codegen::gen_client \
    --with-watch \
    --with-applyconfig \
    --applyconfig-openapi-schema <(go run "${THIS_PKG}/pkg/generated/openapi/cmd/models-schema") \
    --output-dir "${SCRIPT_ROOT}/pkg/generated" \
    --output-pkg "${THIS_PKG}/pkg/generated" \
    --boilerplate "${BOILERPLATE}" \
    "${SCRIPT_ROOT}/pkg/apis"
