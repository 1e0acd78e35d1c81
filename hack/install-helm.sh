#!/usr/bin/env bash
# Builds the helm CLI (_output/bin/helm) from hack/tools/helm: the chart
# (charts/backstop) is linted, rendered into artifacts/deploy and
# artifacts/monitoring (hack/update-deploy.sh) and installed, upgraded and
# uninstalled in the cluster harness with it. Helm is built inside this
# module, at the version go.mod requires, as kubectl is: the Kubernetes
# libraries it shares with kubectl and the server are compiled once (a
# module of its own compiled them again, at its own versions: minutes of a
# cold run). go build is cached: a second run builds nothing.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${root}"
export PATH=/usr/local/go/bin:${PATH}
version="$(go list -m -f '{{.Version}}' helm.sh/helm/v4)"
go build -ldflags "-X helm.sh/helm/v4/internal/version.version=${version}" -o "${root}/_output/bin/helm" ./hack/tools/helm
"${root}/_output/bin/helm" version
