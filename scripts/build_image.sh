#!/usr/bin/env bash
# The container image detect:VERSION, built here from clean Debian 12 roots with no registry,
# no Docker engine and nothing of this machine but the clone (make image). The same image as
# the Containerfile describes, for people who have a registry and an engine.
#
#   scripts/build_image.sh       -> build/image/detect_VERSION.oci.tar     (OCI archive)
#                                   build/image/detect_VERSION.docker.tar  (docker-archive)
#   docker load -i build/image/detect_VERSION.oci.tar      (Docker 25 or later; earlier: .docker.tar)
#   podman load -i build/image/detect_VERSION.oci.tar      (either file)
#
#   IMAGE_WORK=/var/tmp/detect-image   the roots, the OCI layout and the logs (started over)
#   IMAGE_CACHE=DIR                    .deb files reused and added to (none by default)
#   IMAGE_REV=HEAD                     the commit built (uncommitted changes are not in it)
#
# How:
#   1. Build stage: Debian 12 minbase + git, make and pip; a clean clone; scripts/install_deps.sh
#      run (the compiler and the engine's -dev packages); scripts/image_stage.sh (make install,
#      pip install, the demo model and scenes into /stage; CUDA=0: no toolkit in the root).
#   2. The runtime packages are read off the stage by image_stage.sh, not listed by hand: the
#      owners of every shared library its files need, plus python3 and python3-numpy.
#   3. Runtime root: Debian 12 minbase + those packages, without documentation, manual pages,
#      locales and apt's lists (as debian:bookworm-slim); no compiler, no test tools.
#   4. umoci (Debian's package; OCI layouts as plain root, with no daemon, storage driver or user
#      namespace, which buildah and docker build need and this machine lacks) makes two layers:
#      the runtime root, then the stage. skopeo writes the two archives from that layout.
# The image's tests: tests/image/run.sh (make image-test).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
. scripts/debian_root.sh
WORK=${IMAGE_WORK:-/var/tmp/detect-image}
REV=${IMAGE_REV:-HEAD}
DEBIAN_ROOT_CACHE=${IMAGE_CACHE:-}
VERSION=$(sed -n 's/^#define DETECT_VERSION_STRING "\(.*\)"/\1/p' include/detect.h)
OUT=$ROOT/build/image
NAME=detect

debian_root_require build_image.sh umoci skopeo
debian_root_clear "$WORK"
mkdir -p "$WORK/logs" "$OUT"
t0=$SECONDS
step() { echo "== build_image ($(minutes $((SECONDS - t0))) min): $*"; }

# ---- 1. build stage ------------------------------------------------------------------------
build=$WORK/build
step "build stage: Debian 12 minbase + git make python3-pip"
debian_root_make "$build" "$WORK/logs/build-root.log" git,make,ca-certificates,python3-pip,python3-setuptools,python3-wheel
short=$(debian_root_clone "$REV" "$build/src")
step "build stage: install_deps run, make install, pip install (log: $WORK/logs/build.log)"
debian_root_run "$build" "$WORK/logs/build.log" \
  'set -euo pipefail; cd /src && scripts/install_deps.sh run && scripts/image_stage.sh /stage' ||
  { tail -30 "$WORK/logs/build.log"; echo "build_image.sh: the build stage failed" >&2; exit 1; }
grep '^image_stage.sh' "$WORK/logs/build.log"
packages=$(tr '\n' ',' <"$build/stage.packages")python3,python3-numpy

# ---- 2. runtime root -----------------------------------------------------------------------
runtime=$WORK/runtime
step "runtime root: Debian 12 minbase + ${packages//,/ }"
# debian:bookworm-slim's trims: /usr merged by mmdebstrap's hook instead of the usrmerge package
# (which brings perl, 40 MB), no recommended packages, and as dpkg path excludes, no
# documentation, manual pages or locales.
slim=(--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr --aptopt='APT::Install-Recommends "false"'
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright'
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*'
  --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-include=/usr/share/locale/locale.alias'
  --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin "$1"/var/log/*.log "$1"/var/log/apt/*')
debian_root_make "$runtime" "$WORK/logs/runtime-root.log" "$packages" "${slim[@]}"
# No downloaded packages, no device nodes (an engine gives each container its own /dev), no
# name servers of this machine.
rm -rf "$runtime"/var/cache/apt/archives/*.deb "$runtime"/dev/* "$runtime/etc/resolv.conf"
: >"$runtime/etc/resolv.conf"
# Nor the authorities debian_root_make added for this machine's proxy.
if ls "$runtime"/usr/local/share/ca-certificates/*.crt >/dev/null 2>&1; then
  rm -f "$runtime"/usr/local/share/ca-certificates/*.crt
  chroot "$runtime" update-ca-certificates --fresh >/dev/null 2>&1
fi

# ---- 3. OCI layout: two layers -------------------------------------------------------------
layout=$WORK/oci bundle=$WORK/bundle
step "umoci: layer 1 (runtime root), layer 2 (detect)"
umoci init --layout "$layout"
umoci new --image "$layout:$VERSION"
umoci unpack --image "$layout:$VERSION" "$bundle" >/dev/null
cp -a "$runtime/." "$bundle/rootfs/"
umoci repack --refresh-bundle --history.created_by "Debian 12 minbase + runtime packages: ${packages//,/ }" \
  --image "$layout:$VERSION" "$bundle"
cp -a "$build/stage/." "$bundle/rootfs/"
chroot "$bundle/rootfs" ldconfig
umoci repack --history.created_by "make install PREFIX=/usr/local; pip install .; demo model and scenes ($short)" \
  --image "$layout:$VERSION" "$bundle"
umoci config --image "$layout:$VERSION" \
  --config.env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --config.env LANG=C.UTF-8 \
  --config.workingdir /data --config.cmd detect --config.cmd --help \
  --config.label org.opencontainers.image.title=detect \
  --config.label "org.opencontainers.image.version=$VERSION" \
  --config.label "org.opencontainers.image.revision=$(git rev-parse "$short")" \
  --config.label "org.opencontainers.image.description=Mask R-CNN R-101-FPN instance segmentation (CPU build)" \
  --history.created_by "config: PATH, /data, detect --help"
umoci gc --layout "$layout"

# ---- 4. archives ---------------------------------------------------------------------------
step "skopeo: $OUT/${NAME}_$VERSION.{oci,docker}.tar"
rm -f "$OUT/${NAME}_$VERSION.oci.tar" "$OUT/${NAME}_$VERSION.docker.tar"
skopeo copy -q "oci:$layout:$VERSION" "oci-archive:$OUT/${NAME}_$VERSION.oci.tar:$NAME:$VERSION"
skopeo copy -q "oci:$layout:$VERSION" "docker-archive:$OUT/${NAME}_$VERSION.docker.tar:$NAME:$VERSION"
debian_root_clear "$bundle"

echo
echo "image $NAME:$VERSION ($short), $(minutes $((SECONDS - t0))) min:"
for f in "$OUT/${NAME}_$VERSION".{oci,docker}.tar; do
  echo "  $f  $(du -h "$f" | cut -f1)"
done
echo "  layers (compressed):"
skopeo inspect --raw "oci-archive:$OUT/${NAME}_$VERSION.oci.tar" |
  python3 -c 'import json,sys; m=json.load(sys.stdin); [print("    %s  %6.1f MB" % (l["digest"][7:19], l["size"]/1e6)) for l in m["layers"]]'
echo "  unpacked: runtime root $(du -sh "$runtime" | cut -f1), detect $(du -sh "$build/stage" | cut -f1)"
