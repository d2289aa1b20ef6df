#!/usr/bin/env bash
# Installs what detect needs, skipping what is already there. Two sets:
#
#   scripts/install_deps.sh run    building and running: the compiler and the seven libraries
#                                  the engine links (make demo, make all; `make deps-run`)
#   scripts/install_deps.sh        everything above, plus the test tools (make test, make check,
#   scripts/install_deps.sh test   make bench; `make deps`): cmocka, pytest and the torch /
#                                  torchvision reference, clang and libFuzzer, valgrind,
#                                  pycocotools from PyPI into build/venv-test, and the
#                                  mmdetection oracle into build/venv-mmdet (both below)
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
  python3-scipy python3-matplotlib python3-shapely python3-six python3-packaging \
    python3-requests python3-typing-extensions  # imported by mmdet/mmengine in build/venv-mmdet (below)
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
# only Python package from PyPI that the tests import (the mmdetection oracle's packages, below,
# run in a venv of their own). It goes into a virtual environment of
# its own, never into Debian's Python: build/venv-test, made without pip (so it holds
# pycocotools alone, and shadows none of Debian's packages), filled by Debian's pip. Its
# site-packages, linked as build/venv-test/site-packages, is named by scripts/test_env.sh,
# which the Makefile and every test script read, so Debian's python3, the venvs the tests make from it and their subprocesses all
# find it. Prebuilt wheel; numpy stays Debian's (--no-deps).
venv=build/venv-test
site=$(scripts/test_env.sh --site)
if PYTHONPATH="$site" /usr/bin/python3 -c "import pycocotools.mask" 2>/dev/null; then
  echo "install_deps (test): pycocotools present in $venv"
else
  echo "install_deps (test): installing pycocotools from PyPI into $venv"
  rm -rf "$venv"
  /usr/bin/python3 -m venv --without-pip --system-site-packages "$venv"
  /usr/bin/python3 -m pip --python "$venv/bin/python" install -q --no-deps --disable-pip-version-check --root-user-action=ignore \
    "pycocotools==2.0.11"
  ln -sfn "$(cd "$venv" && ls -d lib/python3*/site-packages | head -n 1)" "$site"
  PYTHONPATH="$site" /usr/bin/python3 -c "import pycocotools.mask"
fi

# The mmdetection oracle (tests/parity/oracle_mmdet.py): mmdetection 3.3 itself, its config,
# pipeline and post-processing, as the reference for the mmdetection zoo's conventions. It lives in
# a virtual environment of its own, build/venv-mmdet, never on the tests' PYTHONPATH: the tests run
# it as a subprocess (scripts/test_env.sh --mmdet-python names the interpreter).
#   - tests/mmdet/requirements.txt: every PyPI package it needs, each pinned, installed with
#     --no-deps (nothing resolved, nothing else downloaded); pure-Python wheels plus opencv's and
#     pycocotools' prebuilt ones. torch, torchvision, numpy, scipy, ... stay Debian's (the venv
#     is --system-site-packages; the Debian packages are in test_packages above).
#   - mmcv-lite, not mmcv: PyPI has no mmcv wheel with compiled ops for this Python and torch, and
#     building them from source takes about 20 minutes on 2 cores. mmcv-lite's ops modules load
#     a compiled `mmcv._ext` at import, so tests/mmdet/mmcv_ext.py is copied to mmcv/_ext.py: nms
#     and roi_align_forward (the two ops Mask R-CNN's inference runs) on torchvision.ops, every
#     other op a stub that raises naming it.
# Skipped when the venv imports mmdet.apis and mmcv.ops, holds the shim as it is in the tree, and
# was filled from this requirements.txt (a copy is kept in the venv).
mvenv=build/venv-mmdet
mpy=$(scripts/test_env.sh --mmdet-python)
mreq=tests/mmdet/requirements.txt
# Without PYTHONPATH, as the oracle runs: make exports build/venv-test's site-packages on it, and
# pip then took that venv's pycocotools for installed here (a fresh clone's make check failed so).
mmdet_ready() {
  cmp -s "$mreq" "$mvenv/requirements.txt" && env -u PYTHONPATH "$mpy" - <<'PY' 2>/dev/null
import filecmp, os, warnings
warnings.simplefilter("ignore")
import mmcv
assert filecmp.cmp(os.path.join(os.path.dirname(mmcv.__file__), "_ext.py"), "tests/mmdet/mmcv_ext.py", shallow=False)
import mmcv.ops
from mmdet.apis import inference_detector, init_detector
PY
}
if mmdet_ready; then
  echo "install_deps (test): mmdetection oracle present in $mvenv"
  exit 0
fi
echo "install_deps (test): installing the mmdetection oracle from PyPI into $mvenv ($mreq)"
rm -rf "$mvenv"
/usr/bin/python3 -m venv --without-pip --system-site-packages "$mvenv"
env -u PYTHONPATH /usr/bin/python3 -m pip --python "$mpy" install -q --no-deps --ignore-installed \
  --disable-pip-version-check --root-user-action=ignore -r "$mreq"
cp tests/mmdet/mmcv_ext.py "$(env -u PYTHONPATH "$mpy" -c 'import mmcv, os; print(os.path.dirname(mmcv.__file__))')/_ext.py"
cp "$mreq" "$mvenv/requirements.txt"
mmdet_ready || { echo "install_deps (test): $mvenv does not import mmdet.apis and mmcv.ops" >&2; exit 1; }
