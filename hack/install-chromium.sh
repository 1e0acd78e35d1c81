#!/usr/bin/env bash
# Installs Chromium from Debian's packages (/usr/bin/chromium): the browser
# tests (test/integration/browser) drive it headless with chromedp, as a
# user's browser opens pages through `kubectl proxy`. Needs root
# (apt-get); idempotent: does nothing when it is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
source hack/lib.sh

APT_INSTALL_OPTIONS=--no-install-recommends apt_install chromium chromium
echo "install-chromium: chromium $(dpkg-query -W -f='${Version}' chromium)"
