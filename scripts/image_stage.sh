#!/usr/bin/env bash
# The container image's build stage, in one place for scripts/build_image.sh (run in a clean
# Debian root) and the Containerfiles (RUN in their build stage): from the source at the
# current folder, into STAGE (default /stage):
#
#   make install DESTDIR=STAGE PREFIX=/usr/local   detect, libdetect.so.N, detect.h, detect.pc, configs
#   pip install --root STAGE .                     the Python package (with its own libdetect)
#   STAGE/usr/local/share/detect/models, examples  the demo model and its example scenes
#   STAGE.packages                                 the Debian/Ubuntu packages owning every shared
#                                                  library the staged files need (ldd, dpkg -S):
#                                                  what the runtime stage installs
#
#   scripts/image_stage.sh [STAGE]       IMAGE_CUDA=0|1 (default 0): the CUDA backend too
#
# Expects the compiler, make, pip and the engine's -dev packages installed (Debian:
# scripts/install_deps.sh run, plus python3-pip python3-setuptools python3-wheel).
set -euo pipefail
STAGE=${1:-/stage}
CUDA=${IMAGE_CUDA:-0}
make -j"$(nproc)" CUDA="$CUDA" all
make CUDA="$CUDA" install DESTDIR="$STAGE" PREFIX=/usr/local
# --root: into the stage, not this system's Python. Debian marks its Python as managed by apt;
# the stage is another tree, so the flag that allows installing is safe here.
python3 -m pip install -q --root "$STAGE" --no-deps --no-build-isolation --no-index \
  --disable-pip-version-check --root-user-action=ignore --break-system-packages .
install -d "$STAGE/usr/local/share/detect/models" "$STAGE/usr/local/share/detect/examples"
install -m 644 models/shapes_r101_narrow.safetensors "$STAGE/usr/local/share/detect/models/"
cp -r examples/shapes "$STAGE/usr/local/share/detect/examples/"
find "$STAGE" -type f -exec sh -c 'head -c 4 "$1" | grep -q ELF && echo "$1"' _ {} \; |
  xargs ldd 2>/dev/null | sed -n 's/.*=> \(\/[^ ]*\) .*/\1/p' | sort -u |
  while read -r lib; do
    case "$lib" in "$STAGE"/*) continue ;; esac # our own libraries, in the stage
    # libcuda.so.1 comes from the host's driver (the NVIDIA container toolkit mounts it).
    case "$lib" in */libcuda.so*) continue ;; esac
    dpkg -S "$lib" 2>/dev/null || dpkg -S "$(readlink -f "$lib")" 2>/dev/null ||
      echo "image_stage.sh: $lib belongs to no package (not in the runtime list)" >&2
  done | cut -d: -f1 | sort -u >"$STAGE.packages"
echo "image_stage.sh: $STAGE is $(du -sh "$STAGE" | cut -f1); runtime packages: $(tr '\n' ' ' <"$STAGE.packages")"
