#!/usr/bin/env bash
# Builds the helm CLI (_output/bin/helm) from the Go module proxy: the chart
# (charts/backstop) is linted, rendered into artifacts/deploy
# (hack/update-deploy.sh) and installed, upgraded and uninstalled in the
# cluster harness with it. Helm is not a dependency of this module: it is
# built as its own main module from a writable copy under _output/src/, as
# install-kopia.sh builds kopia.
#
# Idempotent: does nothing when _output/bin/helm.version names the version
# (build_module_main).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${root}"
source hack/lib.sh
export PATH=/usr/local/go/bin:${PATH}
# This module's build flags are not helm's.
export GOFLAGS=

# Helm 4, the current major version; the chart is apiVersion v2, which
# Helm 3 installs as well.
version=v4.3.1
build_module_main helm.sh/helm/v4 "${version}" ./cmd/helm "${root}/_output/bin/helm" "-X helm.sh/helm/v4/internal/version.version=${version}"
"${root}/_output/bin/helm" version
