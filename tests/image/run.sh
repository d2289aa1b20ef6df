#!/usr/bin/env bash
# The container image's tests (make image-test), on its own root file system: the OCI archive
# that scripts/build_image.sh wrote is unpacked by skopeo and umoci (as an engine would pull
# it), and each check runs in a chroot of it (scripts/debian_root.sh's debian_root_run). The
# reference is this checkout's own build (build/detect, make all): the image must give its
# results byte for byte.
#
#   tests/image/run.sh [ARCHIVE]     default build/image/detect_VERSION.oci.tar
#
# Checks: no compiler or test tool in it; detect --help, detect --version, detect merge and
# detect calibrate answer; the header, pkg-config file, configs, demo model and Python package
# are in place; the demo gives the host's detections.json; a 2-part --shard run of the
# example scenes merged by detect merge gives the host's single-run --json and --coco-results;
# WebP and TIFF files give the host's detections, with the config found by name under the
# prefix; the Python package's result equals the host's --json entry. Needs root, skopeo and umoci.
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
. scripts/debian_root.sh
VERSION=$(sed -n 's/^#define DETECT_VERSION_STRING "\(.*\)"/\1/p' include/detect.h)
ARCHIVE=${1:-build/image/detect_$VERSION.oci.tar}
WORK=${IMAGE_TEST_WORK:-/var/tmp/detect-image-test}
[ -f "$ARCHIVE" ] || { echo "image-test: no $ARCHIVE (make image first)" >&2; exit 2; }
[ -x build/detect ] || { echo "image-test: no build/detect (make all first): the host's results are the reference" >&2; exit 2; }

debian_root_clear "$WORK"
mkdir -p "$WORK/host" "$WORK/logs"
skopeo copy -q "oci-archive:$ARCHIVE" "oci:$WORK/oci:test" || exit 1
umoci unpack --image "$WORK/oci:test" "$WORK/bundle" >/dev/null || exit 1
rootfs=$WORK/bundle/rootfs
mkdir -p "$rootfs/data"
share=/usr/local/share/detect
config=$share/configs/mask_rcnn_R-101-FPN_shapes.json
weights=$share/models/shapes_r101_narrow.safetensors

failed=0 n=0
check() { # check NAME COMMAND: COMMAND (bash, in the image, from /usr/local/share/detect) exits 0
  local name=$1 log="$WORK/logs/$(echo "$1" | tr -c 'A-Za-z0-9\n' '_').log"
  n=$((n + 1))
  if debian_root_run "$rootfs" "$log" "set -euo pipefail; cd $share; $2"; then
    echo "ok   $name"
  else
    echo "FAIL $name (log: $log)"
    sed 's/^/       /' "$log" | tail -15
    failed=$((failed + 1))
  fi
}
same() { # same NAME HOST_FILE IMAGE_FILE (image path under /data): byte-for-byte equal
  n=$((n + 1))
  if cmp -s "$2" "$rootfs$3"; then echo "ok   $1"; else echo "FAIL $1: $2 and the image's $3 differ"; failed=$((failed + 1)); fi
}

# The host's results: the same commands from the same relative paths (examples/shapes), so the
# documents name the same files.
demo_args=(--config configs/mask_rcnn_R-101-FPN_shapes.json --weights models/shapes_r101_narrow.safetensors)
build/detect "${demo_args[@]}" --score-thresh 0.85 --agnostic-nms -q --json "$WORK/host/demo.json" examples/shapes >/dev/null
build/detect "${demo_args[@]}" -q --json "$WORK/host/all.json" --coco-results "$WORK/host/all_coco.json" examples/shapes >/dev/null

check "no compiler or test tool in the image" \
  'for t in gcc cc c++ clang make nvcc pytest pip pip3; do ! command -v $t; done; ! python3 -c "import pytest"'
check "detect --help" 'detect --help >/tmp/help.txt && grep -q -- --config /tmp/help.txt'
check "detect --version says $VERSION" "detect --version >/tmp/version.txt && grep -qw $VERSION /tmp/version.txt"
check "detect merge and detect calibrate answer" 'detect merge --help >/dev/null; detect calibrate --help >/dev/null'
check "header, pkg-config, library, configs, model, scenes" \
  "test -f /usr/local/include/detect.h && grep -q 'Version: $VERSION' /usr/local/lib/pkgconfig/detect.pc &&
   ldconfig -p | grep -q libdetect.so.1 && ls configs/*.json >/dev/null && test -f models/shapes_r101_narrow.safetensors &&
   ls examples/shapes/*.png >/dev/null"
check "the demo" "detect --config $config --weights $weights --score-thresh 0.85 --agnostic-nms \
   --output /data/demo --json /data/demo.json examples/shapes && ls /data/demo/scene_1.png"
same "the demo's detections equal the host's" "$WORK/host/demo.json" /data/demo.json
check "two shards and their merge" "for k in 0 1; do detect --config $config --weights $weights --shard \$k/2 -q \
   --json /data/part-\$k.json --coco-results /data/coco-\$k.json examples/shapes; done &&
   detect merge --json /data/all.json --coco-results /data/all_coco.json /data/part-0.json /data/part-1.json"
same "merged --json equals the host's single run" "$WORK/host/all.json" /data/all.json
same "merged --coco-results equals the host's single run" "$WORK/host/all_coco.json" /data/all_coco.json
# The other formats' libraries came with the image (read off the stage's ldd): WebP and TIFF
# files Pillow writes give the host's detections, and a config named without a folder is found
# under the install prefix.
/usr/bin/python3 -c 'import sys; from PIL import Image; im = Image.open("examples/shapes/scene_2.png").convert("RGB")
im.save(sys.argv[1] + "/scene_2.webp", lossless=True); im.save(sys.argv[1] + "/scene_2.tif", compression="tiff_lzw")' "$rootfs/data"
(cd "$rootfs/data" && "$ROOT/build/detect" --config "$ROOT/configs/mask_rcnn_R-101-FPN_shapes.json" \
  --weights "$ROOT/models/shapes_r101_narrow.safetensors" -q --json "$WORK/host/formats.json" scene_2.webp scene_2.tif >/dev/null)
check "WebP and TIFF, the config by its name alone" "cd /data && detect --config mask_rcnn_R-101-FPN_shapes.json \
   --weights $weights -q --json /data/formats.json scene_2.webp scene_2.tif"
same "WebP and TIFF detections equal the host's" "$WORK/host/formats.json" /data/formats.json
# The Python entry of scene_1 against the host's --json entry for it, as JSON values.
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(json.dumps([e for e in d["images"] if e["file"].endswith("scene_1.png")][0], sort_keys=True))' \
  "$WORK/host/all.json" >"$rootfs/data/host_scene_1.json"
check "the Python package gives the host's scene_1 entry" "python3 -c '
import json, detect
with detect.Model(\"$config\", \"$weights\", device=\"cpu\") as m:
    mine = m(\"examples/shapes/scene_1.png\").to_json(\"examples/shapes/scene_1.png\")
host = json.load(open(\"/data/host_scene_1.json\"))
assert json.dumps(mine, sort_keys=True) == json.dumps(host, sort_keys=True), (mine, host)
'"

echo "image-test: $((n - failed)) of $n passed ($ARCHIVE)"
[ $failed -eq 0 ] && debian_root_clear "$WORK"
[ $failed -eq 0 ]
