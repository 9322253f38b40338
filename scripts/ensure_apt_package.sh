#!/usr/bin/env bash
# Installs a Debian package when the program it provides is missing: ensure_apt_package.sh PACKAGE PROGRAM WHY
#   chromium: the browser tests' headless Chromium (Playwright never downloads one)
#   graphviz: `dot`, the layout engine the browser draws experiment graphs with (without it, graphs fall
#             back to a plain layered drawing)
set -euo pipefail
package="$1" program="$2" why="$3"
if command -v "$program" >/dev/null 2>&1 || [ -x "/usr/bin/$program" ] || [ -x "/usr/lib/$package/$program" ]; then exit 0; fi
if [ "$(id -u)" != "0" ]; then
  echo "$package is missing: install Debian's '$package' package (apt-get install $package)" >&2
  exit 1
fi
echo "installing Debian $package for $why ..."
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$package" >/dev/null
