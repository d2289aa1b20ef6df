#!/usr/bin/env bash
# Installs the Debian packages detect needs to build and test (make test,
# make check: sanitizers, fuzzing; make valgrind), skipping what is already
# there. GCC's ASan/UBSan runtimes (libasan8, libubsan1) come with gcc.
# Needs root (or sudo) only when something is missing.
set -euo pipefail

packages=(
  gcc make pkg-config time
  libdnnl-dev          # oneDNN: CPU convolutions and GEMM
  libcjson-dev         # JSON config and output
  libpng-dev           # PNG decoding
  libjpeg62-turbo-dev  # JPEG decoding
  libcmocka-dev        # C unit tests
  python3-numpy python3-pytest
  python3-venv python3-setuptools python3-wheel  # make python-test: pip install . into a venv, offline
  python3-yaml         # make cluster-test: examples/k8s_indexed_job.yaml parsed
  binutils             # readelf, nm: the library's exported symbols and soname (tests/library)
  python3-torch python3-torchvision python3-pil python3-skimage  # the reference (tests, demo weights)
  libopenblas0-openmp  # fast BLAS for the reference's linear layers
  python3-pip          # for pycocotools below (Debian 12 does not package it)
  clang-14 libclang-rt-14-dev  # make fuzz: libFuzzer (its runtime is only a recommendation of clang-14)
  llvm-14              # llvm-symbolizer: fuzz crash stacks with file:line
  valgrind             # make valgrind
)

# pycocotools: the independent reference for COCO RLE masks in the tests.
# Only it comes from PyPI (a prebuilt wheel); numpy stays Debian's (--no-deps).
install_pycocotools() {
  /usr/bin/python3 -c "import pycocotools.mask" 2>/dev/null && return 0
  echo "install_deps: installing pycocotools from PyPI for /usr/bin/python3"
  $sudo_cmd /usr/bin/python3 -m pip install -q --break-system-packages --no-deps "pycocotools==2.0.11"
}

sudo_cmd=""
[ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install_deps: all ${#packages[@]} Debian packages present"
else
  echo "install_deps: installing ${missing[*]}"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
install_pycocotools
