#!/usr/bin/env bash
# The README's quick start on a clean Debian 12, as a new user meets it: a minbase root made
# from Debian's packages alone, a clean clone of this checkout's commit copied into it, and
# the two commands run there as root. Nothing of this machine goes in but the clone and,
# optionally, a folder of .deb files that saves downloads. Catches what a machine that
# already has the packages hides (issue 44: pycocotools in the system Python hid a broken
# PYTHONPATH from make check, and from CI).
#
#   scripts/fresh_debian.sh                      make demo, then make check (about 45 min on 2 cores)
#   scripts/fresh_debian.sh make demo            any commands instead, each one argument string
#   FRESH_COMMANDS="make demo" scripts/fresh_debian.sh   (the same)
#
#   FRESH_DIR=/var/tmp/detect-fresh   where the root and the logs go (start over each run)
#   FRESH_CACHE=DIR                   .deb files reused and added to (none by default)
#   FRESH_REV=HEAD                    the commit cloned (uncommitted changes are not in it)
#   FRESH_KEEP=1                      keep the root afterwards (scripts/build_image.sh builds in it)
#   FRESH_MIRROR=http://deb.debian.org/debian
#
# The root holds Debian 12 minbase plus git and make: what a user needed to clone the
# repository and type `make`. Commands run in a new mount and PID namespace (unshare), so
# /proc, /dev, /dev/shm and /tmp are the root's own and any process left behind (a Ray
# worker) ends with the command. Needs root and mmdebstrap (apt-get install mmdebstrap).
# Prints each command's verdict and minutes; exits 1 if any failed. Logs: $FRESH_DIR/logs/.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
FRESH_DIR=${FRESH_DIR:-/var/tmp/detect-fresh}
FRESH_REV=${FRESH_REV:-HEAD}
FRESH_MIRROR=${FRESH_MIRROR:-http://deb.debian.org/debian}
FRESH_CACHE=${FRESH_CACHE:-}
if [ $# -gt 0 ]; then
  commands=("$@")
elif [ -n "${FRESH_COMMANDS:-}" ]; then
  commands=("$FRESH_COMMANDS")
else
  commands=("make demo" "make check")
fi

[ "$(id -u)" -eq 0 ] || { echo "fresh_debian.sh: needs root (a chroot, mounts and namespaces)" >&2; exit 2; }
command -v mmdebstrap >/dev/null || { echo "fresh_debian.sh: needs mmdebstrap (apt-get install mmdebstrap)" >&2; exit 2; }
rev=$(git rev-parse --verify "$FRESH_REV^{commit}")
[ -z "$(git status --porcelain --untracked-files=no)" ] ||
  echo "fresh_debian.sh: note: uncommitted changes are not tested; the clone is $rev"

root=$FRESH_DIR/root
logs=$FRESH_DIR/logs
# A root left mounted by a run that was killed: unmount before deleting.
if [ -d "$root" ]; then
  grep -o " $root/[^ ]*" /proc/mounts | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
fi
rm -rf "$FRESH_DIR"
mkdir -p "$logs"

cache_hooks=()
if [ -n "$FRESH_CACHE" ]; then
  mkdir -p "$FRESH_CACHE"
  FRESH_CACHE=$(cd "$FRESH_CACHE" && pwd)
  # mmdebstrap's own way to reuse downloads (its manual, "--skip"): copied in before, out after.
  cache_hooks=(--skip=essential/unlink
    --setup-hook="mkdir -p \"\$1\"/var/cache/apt/archives/"
    --setup-hook="sync-in '$FRESH_CACHE' /var/cache/apt/archives/"
    --customize-hook="sync-out /var/cache/apt/archives '$FRESH_CACHE'")
fi

t0=$SECONDS
echo "== fresh_debian: mmdebstrap --variant=minbase bookworm (+ git make) -> $root"
mmdebstrap --variant=minbase --include=git,make,ca-certificates "${cache_hooks[@]}" \
  bookworm "$root" "$FRESH_MIRROR" >"$logs/mmdebstrap.log" 2>&1 ||
  { tail -20 "$logs/mmdebstrap.log"; echo "fresh_debian.sh: mmdebstrap failed" >&2; exit 1; }
echo "   $(awk -v s=$((SECONDS - t0)) 'BEGIN { printf "%.1f", s / 60 }') min; $(du -sh "$root" | cut -f1)"
# apt in the root keeps what it downloads (minbase has no docker-clean hook); with a cache, the
# cache is its archive folder.
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true

git clone -q --no-local "$ROOT" "$root/root/detect"
git -C "$root/root/detect" checkout -q "$rev"
echo "== fresh_debian: clean clone of $(git log -1 --format='%h %s' "$rev" | cut -c1-90)"

# in_root LOG COMMAND: COMMAND in bash inside the root, in fresh namespaces, from the clone.
in_root() {
  local log=$1 cmd=$2
  unshare --mount --pid --fork --kill-child bash -c '
    set -e
    r=$1
    mount -t proc proc "$r/proc"
    mount --rbind /sys "$r/sys"
    mount --rbind /dev "$r/dev"
    mount -t tmpfs -o mode=1777 tmpfs "$r/dev/shm"
    mount -t tmpfs -o mode=1777 tmpfs "$r/tmp"
    if [ -n "$3" ]; then mount --bind "$3" "$r/var/cache/apt/archives"; fi
    exec chroot "$r" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
      PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      bash -lc "cd /root/detect && $2"
  ' in_root "$root" "$cmd" "$FRESH_CACHE" >"$log" 2>&1
}

names=() verdicts=() times=()
status=0
for cmd in "${commands[@]}"; do
  log="$logs/$(echo "$cmd" | tr -c 'A-Za-z0-9\n' '_').log"
  echo "== fresh_debian: $cmd (log: $log)"
  t=$SECONDS rc=0
  in_root "$log" "$cmd" || rc=$?
  names+=("$cmd") times+=("$(awk -v s=$((SECONDS - t)) 'BEGIN { printf "%.1f", s / 60 }')")
  if [ $rc -eq 0 ]; then verdicts+=(ok); else verdicts+=("FAILED (exit $rc)"); status=1; tail -30 "$log" | sed 's/^/    /'; fi
done

echo
echo "fresh_debian: Debian 12 minbase + git make, clone of $(git rev-parse --short "$rev")"
for i in "${!names[@]}"; do
  printf '  %-40s %-18s %6s min\n' "${names[$i]}" "${verdicts[$i]}" "${times[$i]}"
done
# make check's own table (steps, fuzz targets), where it ran.
for i in "${!names[@]}"; do
  case "${names[$i]}" in
    *"make check"*)
      l="$logs/$(echo "${names[$i]}" | tr -c 'A-Za-z0-9\n' '_').log"
      sed -n '/^======== check: summary/,$p' "$l" | sed 's/^/  /' ;;
  esac
done
if [ "${FRESH_KEEP:-0}" = 1 ]; then
  echo "fresh_debian: the root stays in $root"
else
  rm -rf "$root"
fi
exit $status
