#!/usr/bin/env bash
# Installs what detect needs, skipping what is already there. Two sets:
#
#   scripts/install_deps.sh run    building and running: the compiler and the seven libraries
#                                  the engine links (make demo, make all; `make deps-run`)
#   scripts/install_deps.sh        everything above, plus the test tools (make test, make check,
#   scripts/install_deps.sh test   make bench; `make deps`): cmocka, pytest and the torch /
#                                  torchvision reference, clang and libFuzzer, valgrind, and
#                                  pycocotools from PyPI into build/venv-test (below)
#
# GCC's ASan/UBSan runtimes (libasan8, libubsan1) come with gcc. Needs root (or sudo) only
# when something is missing. The CUDA toolkit, cuDNN and cuBLAS are not installed here: the
# CUDA backend is built where nvcc exists (Makefile, CUDA=).
set -euo pipefail
cd "$(dirname "$0")/.."

MODE=${1:-test}
run_packages=(
  gcc make
  libdnnl-dev          # oneDNN: CPU convolutions and GEMM
  libcjson-dev         # JSON config and output
  libpng-dev           # PNG decoding
  libjpeg62-turbo-dev  # JPEG decoding
  libwebp-dev          # WebP decoding (libwebp, libwebpdemux)
  libtiff-dev          # TIFF decoding
  libgif-dev           # GIF decoding (giflib)
)
test_packages=(
  time                 # make bench, bench-peers: peak memory (/usr/bin/time)
  pkg-config           # the library's tests build examples/embed.c against detect.pc
  libcmocka-dev        # C unit tests
  python3-numpy python3-pytest
  python3-venv python3-setuptools python3-wheel  # make python-test: pip install . into a venv, offline
  python3-yaml         # make cluster-test: examples/k8s_indexed_job.yaml parsed
  binutils             # readelf, nm: the library's exported symbols and soname, the layer check's calls
  python3-torch python3-torchvision python3-pil python3-skimage  # the reference (tests, demo weights)
  libopenblas0-openmp  # fast BLAS for the reference's linear layers
  python3-pip          # installs pycocotools into build/venv-test (Debian 12 does not package it)
  clang-14 libclang-rt-14-dev  # make fuzz: libFuzzer (its runtime is only a recommendation of clang-14)
  llvm-14              # llvm-symbolizer: fuzz crash stacks with file:line
  valgrind             # make valgrind
)
case "$MODE" in
  run) packages=("${run_packages[@]}") ;;
  test) packages=("${run_packages[@]}" "${test_packages[@]}") ;;
  *) echo "usage: scripts/install_deps.sh [run|test]" >&2; exit 2 ;;
esac

sudo_cmd=""
[ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install_deps ($MODE): all ${#packages[@]} Debian packages present"
else
  echo "install_deps ($MODE): installing ${missing[*]}"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
[ "$MODE" = run ] && exit 0

# pycocotools: the independent reference for COCO RLE masks and results in the tests, the
# only Python package from PyPI that the tests need. It goes into a virtual environment of
# its own, never into Debian's Python: build/venv-test, made without pip (so it holds
# pycocotools alone, and shadows none of Debian's packages), filled by Debian's pip. Its
# site-packages, linked as build/venv-test/site-packages, is named by scripts/test_env.sh,
# which the Makefile and every test script read, so Debian's python3, the venvs the tests make from it and their subprocesses all
# find it. Prebuilt wheel; numpy stays Debian's (--no-deps).
venv=build/venv-test
site=$(scripts/test_env.sh --site)
if PYTHONPATH="$site" /usr/bin/python3 -c "import pycocotools.mask" 2>/dev/null; then
  echo "install_deps (test): pycocotools present in $venv"
  exit 0
fi
echo "install_deps (test): installing pycocotools from PyPI into $venv"
rm -rf "$venv"
/usr/bin/python3 -m venv --without-pip --system-site-packages "$venv"
/usr/bin/python3 -m pip --python "$venv/bin/python" install -q --no-deps --disable-pip-version-check --root-user-action=ignore \
  "pycocotools==2.0.11"
ln -sfn "$(cd "$venv" && ls -d lib/python3*/site-packages | head -n 1)" "$site"
PYTHONPATH="$site" /usr/bin/python3 -c "import pycocotools.mask"
