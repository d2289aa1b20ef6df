#!/usr/bin/env bash
# Installs the Debian packages detect needs to build and test, skipping
# what is already there. Needs root (or sudo) only when something is missing.
set -euo pipefail

packages=(
  gcc make pkg-config
  libdnnl-dev          # oneDNN: CPU convolutions and GEMM
  libcjson-dev         # JSON config and output
  libpng-dev           # PNG decoding
  libjpeg62-turbo-dev  # JPEG decoding
  libcmocka-dev        # C unit tests
  python3-numpy python3-pytest
  python3-torch python3-torchvision python3-pil python3-skimage  # the reference (tests, demo weights)
  libopenblas0-openmp  # fast BLAS for the reference's linear layers
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install_deps: all ${#packages[@]} packages present"
  exit 0
fi
echo "install_deps: installing ${missing[*]}"
sudo_cmd=""
[ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
$sudo_cmd apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
