#!/usr/bin/env bash
# Installs Debian's chromium for the browser tests when it is missing (Playwright never downloads one).
set -euo pipefail
if [ -x /usr/bin/chromium ] || [ -x /usr/lib/chromium/chromium ]; then exit 0; fi
if [ "$(id -u)" != "0" ]; then
  echo "chromium is missing: install Debian's 'chromium' package (apt-get install chromium)" >&2
  exit 1
fi
echo "installing Debian chromium for the browser tests ..."
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
