#!/usr/bin/env bash
# Installs Debian's graphviz (the `dot` layout engine the browser draws experiment graphs with) when missing.
# Without it the browser still serves every page; graphs fall back to a plain layered drawing.
set -euo pipefail
if command -v dot >/dev/null 2>&1; then exit 0; fi
if [ "$(id -u)" != "0" ]; then
  echo "graphviz is missing: install Debian's 'graphviz' package (apt-get install graphviz)" >&2
  exit 1
fi
echo "installing Debian graphviz for the browser's graph layouts ..."
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq graphviz >/dev/null
