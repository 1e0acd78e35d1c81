#!/usr/bin/env bash
# Builds the kopia CLI (_output/bin/kopia) from the Go module proxy, at the
# version the data mover's library is (go.mod): the tests read the data
# mover's repositories with it (`kopia repository connect`, `kopia snapshot
# list`), and the data mover's benchmark runs it as the peer. The module
# proxy lists no versions of kopia (a `go install kopia@version` asks for
# the list), so the module is built as its own main module from a writable
# copy under _output/src/, as install-velero.sh builds Velero.
#
# Idempotent: does nothing when _output/bin/kopia.version names the version
# (build_module_main).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${root}"
source hack/lib.sh
export PATH=/usr/local/go/bin:${PATH}
# This module's build flags are not kopia's.
export GOFLAGS=

version="$(go list -m -f '{{.Version}}' github.com/kopia/kopia)"
build_module_main github.com/kopia/kopia "${version}" . "${root}/_output/bin/kopia" \
  "-X github.com/kopia/kopia/repo.BuildVersion=${version#v} -X github.com/kopia/kopia/repo.BuildInfo=${version}"
"${root}/_output/bin/kopia" --version
