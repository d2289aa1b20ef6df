#!/usr/bin/env bash
# Fetch an official Mask R-CNN checkpoint from its model zoo, check it, convert it.
#
#   models/download.sh NAME        (models/download.sh --list for the names)
#
# The checkpoint is kept as $DETECT_ZOO_DIR/NAME.{pkl,pth} (default models/zoo/) and
# converted to $DETECT_ZOO_DIR/NAME.safetensors with models/convert.py.  A checkpoint already
# at that path (e.g. downloaded by hand on another machine) is checked and converted without
# any download.  Checks: where the zoo publishes one, a checksum -- detectron2's and
# torchvision's file names carry an md5 / SHA-256 prefix, Detectron publishes URL.md5sum
# beside each file (fetched, so only verifiable online); maskrcnn-benchmark publishes none
# (the SHA-256 is printed for the record).  The zoos publish no file sizes.
# Sources and published AP: models/README.md.
#
# Progress goes to stdout; a failure is one message on stderr saying what to do.  Exit status:
# 0 converted; 1 download or checksum failure; 2 usage or conversion error.

set -u

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
zoo_dir=${DETECT_ZOO_DIR:-$here/zoo}
if [ -n "${PYTHON:-}" ]; then
    python=$PYTHON
elif [ -x /usr/bin/python3 ]; then
    python=/usr/bin/python3
else
    python=python3
fi

DT=https://dl.fbaipublicfiles.com/detectron
D2=https://dl.fbaipublicfiles.com/detectron2/COCO-InstanceSegmentation
TRAIN=output/train/coco_2014_train%3Acoco_2014_valminusminival/generalized_rcnn/model_final.pkl

# name | source format | URL | checksum kind (md5-url, md5-prefix:HEX, sha256-prefix:HEX, none)
zoo_entry() {
    case "$1" in
    detectron-R101) echo "detectron|$DT/35861858/12_2017_baselines/e2e_mask_rcnn_R-101-FPN_2x.yaml.02_32_51.SgT4y1cO/$TRAIN|md5-url" ;;
    detectron-R50) echo "detectron|$DT/35859007/12_2017_baselines/e2e_mask_rcnn_R-50-FPN_2x.yaml.01_49_07.By8nQcCH/$TRAIN|md5-url" ;;
    detectron2-R101) echo "detectron2|$D2/mask_rcnn_R_101_FPN_3x/138205316/model_final_a3ec72.pkl|md5-prefix:a3ec72" ;;
    detectron2-R50) echo "detectron2|$D2/mask_rcnn_R_50_FPN_3x/137849600/model_final_f10217.pkl|md5-prefix:f10217" ;;
    maskrcnn-benchmark-R101) echo "maskrcnn-benchmark|https://download.pytorch.org/models/maskrcnn/e2e_mask_rcnn_R_101_FPN_1x.pth|none" ;;
    maskrcnn-benchmark-R50) echo "maskrcnn-benchmark|https://download.pytorch.org/models/maskrcnn/e2e_mask_rcnn_R_50_FPN_1x.pth|none" ;;
    torchvision-R50) echo "torchvision|https://download.pytorch.org/models/maskrcnn_resnet50_fpn_coco-bf2d0c1e.pth|sha256-prefix:bf2d0c1e" ;;
    *) return 1 ;;
    esac
}
NAMES="detectron-R101 detectron-R50 detectron2-R101 detectron2-R50 maskrcnn-benchmark-R101 maskrcnn-benchmark-R50 torchvision-R50"

usage() {
    echo "usage: models/download.sh NAME   (NAME: ${NAMES// /, })" >&2
    exit 2
}

[ $# -eq 1 ] || usage
if [ "$1" = "--list" ]; then
    for n in $NAMES; do echo "$n"; done
    exit 0
fi
name=$1
entry=$(zoo_entry "$name") || usage
IFS='|' read -r format url check <<<"$entry"
case "$url" in *.pkl) ext=pkl ;; *) ext=pth ;; esac
ckpt=$zoo_dir/$name.$ext
out=$zoo_dir/$name.safetensors

fail() { # one message, exit 1
    echo "download.sh: $name: $*" >&2
    exit 1
}

mkdir -p "$zoo_dir" || fail "cannot create $zoo_dir"
if [ ! -s "$ckpt" ]; then
    echo "download.sh: $name: downloading $url"
    tmp=$ckpt.part
    if ! err=$(curl -fsSL --connect-timeout 20 --retry 2 -o "$tmp" "$url" 2>&1); then
        rm -f "$tmp"
        err=${err##*$'\n'} # curl's last try
        fail "cannot download $url (${err:-curl failed}). Where this machine has no network" \
             "access, download that file by hand and put it at $ckpt, then run" \
             "models/download.sh $name again: it checks and converts the file it finds there."
    fi
    mv "$tmp" "$ckpt" || fail "cannot write $ckpt"
fi

hash_of() { "$1" "$ckpt" | cut -d' ' -f1; }
# The zoo's file name carries the first hex digits of the file's hash ($1: md5sum or sha256sum).
check_prefix() {
    local tool=$1 label=$2 want=$3 got
    got=$(hash_of "$tool")
    [ "${got:0:${#want}}" = "$want" ] ||
        fail "$ckpt has $label $got; the zoo's file name says it starts with $want: a corrupt or" \
             "different file. Delete it and run models/download.sh $name again (or download $url by hand)."
    echo "download.sh: $name: $label $got matches the published prefix $want"
}
case "$check" in
md5-prefix:*) check_prefix md5sum md5 "${check#md5-prefix:}" ;;
sha256-prefix:*) check_prefix sha256sum SHA-256 "${check#sha256-prefix:}" ;;
md5-url)
    got=$(hash_of md5sum)
    if want=$(curl -fsSL --connect-timeout 20 "$url.md5sum" 2>/dev/null | cut -d' ' -f1) && [ -n "$want" ]; then
        [ "$got" = "$want" ] ||
            fail "$ckpt has md5 $got, Detectron publishes $want ($url.md5sum): a corrupt or" \
                 "different file. Delete it and run models/download.sh $name again."
        echo "download.sh: $name: md5 $got matches $url.md5sum"
    else
        echo "download.sh: $name: warning: cannot fetch $url.md5sum; md5 $got not verified" >&2
    fi ;;
none)
    echo "download.sh: $name: maskrcnn-benchmark publishes no checksum; SHA-256 $(hash_of sha256sum)" ;;
esac

"$python" "$here/convert.py" --from "$format" "$ckpt" "$out" || exit 2
echo "download.sh: $name: converted to $out"
