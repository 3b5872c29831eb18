#!/usr/bin/env bash
# Install the Debian packages zbpp needs, only those missing. Never downloads anything else.
set -euo pipefail
packages=(build-essential cmake pkg-config libopenblas-dev libblis-dev libcmocka-dev libglpk-dev
          libopenmpi-dev openmpi-bin clang libclang-rt-14-dev python3
          chromium) # chromium: tests/svg_render.sh checks that the SVG charts render
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "setup: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
