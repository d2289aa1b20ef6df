#!/usr/bin/env bash
# tests/gpu/fetch_detectron2.sh GIT_DIR_OR_SOURCE_TREE: detectron2 for the
# GPU bench's "peers at their best" (tests/gpu/bench_gpu.py section 7),
# carried as source: its R-101-FPN Mask R-CNN runs inference without the
# compiled detectron2._C (ROIAlign and NMS come from torchvision, the mask
# paste is grid_sample). Run it on the development machine (PyPI reachable);
# it writes tests/gpu/deps/detectron2/ (git ignores tests/gpu/deps/; about
# 6 MB, 1.4 MB compressed), which bench_gpu.py appends to sys.path, so packages the machine
# already has are used before these:
#   detectron2/  the Python package (no layers/csrc, no _C)
#   configs/     Base-RCNN-FPN.yaml, COCO-InstanceSegmentation/mask_rcnn_R_101_FPN_3x.yaml, and for
#                tests/gpu/d2_strong_parity.py the LazyConfigs common/ and new_baselines/ and
#                Misc/mask_rcnn_R_50_FPN_3x_gn.yaml
#   site/        what the import of detectron2.config and detectron2.modeling needs that
#                Python 3.12 with torch and torchvision may lack, unpacked (no pip install):
#                fvcore, iopath, yacs, omegaconf + antlr4-python3-runtime, termcolor, tabulate,
#                cloudpickle, portalocker, tqdm (pure Python, from PyPI); pycocotools (compiled:
#                the cp312-abi3 manylinux wheel for the GPU machine's Python 3.12; only
#                imported, by structures/masks.py and data/detection_utils.py, not used in
#                inference; 3.12+ on x86_64 only: elsewhere the machine's own is needed)
#   SOURCE.txt   the commit and the package versions
#
# The source: detectron2 is not on PyPI, and this machine reaches only PyPI
# and Debian, so its repository (github.com/facebookresearch/detectron2)
# comes from wherever a copy is at hand: a bare git directory or a
# checked-out source tree, e.g.
#   bash tests/gpu/fetch_detectron2.sh /path/to/detectron2.git
# Then carry tests/gpu/deps to the GPU machine, as for tests/gpu/fetch_deps.sh.
#
#   env: PYTHON (default python3, with pip), REV (the git revision, default HEAD)
set -euo pipefail
SRC=${1:?usage: tests/gpu/fetch_detectron2.sh GIT_DIR_OR_SOURCE_TREE}
PY=${PYTHON:-python3}
REV=${REV:-HEAD}
cd "$(dirname "$0")"
DST=$PWD/deps/detectron2
CONFIGS="configs/Base-RCNN-FPN.yaml configs/COCO-InstanceSegmentation/mask_rcnn_R_101_FPN_3x.yaml
configs/Misc/mask_rcnn_R_50_FPN_3x_gn.yaml configs/common configs/new_baselines"
# Pinned within detectron2's setup.py ranges (fvcore <0.1.6, iopath <0.1.10, omegaconf <2.4 with
# the antlr4 runtime it pins).
PURE="fvcore==0.1.5.post20221221 iopath==0.1.9 yacs==0.1.8 omegaconf==2.3.1 antlr4-python3-runtime==4.9.3
termcolor==3.3.0 tabulate==0.10.0 cloudpickle==3.1.3 portalocker==4.4.2 tqdm==4.70.1"
COCO=pycocotools==2.0.11

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
rm -rf "$DST"
mkdir -p "$DST/site"

if git --git-dir="$SRC" rev-parse --verify -q "$REV^{commit}" >/dev/null 2>&1; then
    commit=$(git --git-dir="$SRC" rev-parse "$REV^{commit}")
    git --git-dir="$SRC" archive "$commit" detectron2 $CONFIGS | tar -x -C "$DST"
    origin="$commit ($(git --git-dir="$SRC" log -1 --format=%cs "$commit"))"
elif [ -f "$SRC/detectron2/__init__.py" ]; then
    mkdir -p "$DST/configs/COCO-InstanceSegmentation" "$DST/configs/Misc"
    cp -r "$SRC/detectron2" "$DST/"
    for f in $CONFIGS; do cp -r "$SRC/$f" "$DST/$f"; done
    origin="$(git -C "$SRC" rev-parse HEAD 2>/dev/null || echo "(no git)") (a source tree)"
else
    echo "$SRC is neither a git directory with $REV nor a source tree with detectron2/__init__.py" >&2
    exit 1
fi
# No compiled extension: its C++/CUDA sources and any built _C go.
rm -rf "$DST/detectron2/layers/csrc"
find "$DST/detectron2" \( -name "_C*.so" -o -name "__pycache__" \) -prune -exec rm -rf {} +
for f in $CONFIGS; do [ -e "$DST/$f" ] || { echo "$SRC lacks $f" >&2; exit 1; }; done

$PY -m pip download -q --no-deps -d "$TMP/dl" $PURE
$PY -m pip download -q --no-deps --only-binary :all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_17_x86_64 -d "$TMP/dl" $COCO
for whl in "$TMP"/dl/*.whl; do $PY -m zipfile -e "$whl" "$DST/site"; done
for sdist in "$TMP"/dl/*.tar.gz; do tar -xzf "$sdist" -C "$TMP"; done
# The sdists (no wheels on PyPI): their packages as they are.
cp -r "$TMP"/fvcore-*/fvcore "$DST/site/"
cp -r "$TMP"/antlr4-python3-runtime-*/src/antlr4 "$DST/site/"
rm -rf "$DST/site/pydevd_plugins"  # omegaconf's debugger hook

{
    echo "detectron2 $origin"
    echo "site/ (PyPI): $PURE $COCO (cp312-abi3 manylinux wheel)" | tr '\n' ' '
    echo
} >"$DST/SOURCE.txt"
cat "$DST/SOURCE.txt"
du -sh "$DST"
