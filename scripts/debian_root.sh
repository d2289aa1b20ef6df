# Clean Debian 12 roots, made from Debian's packages and nothing of this machine, and commands
# run inside them. Sourced (bash) by scripts/fresh_debian.sh (the quick start on a clean machine)
# and scripts/build_image.sh (the container image's build stage and runtime layer). Needs root
# and mmdebstrap.
#
#   debian_root_make DIR LOG PACKAGES [MMDEBSTRAP-OPTION...]
#       Debian 12 minbase plus PACKAGES (comma-separated, may be empty) into DIR, which must
#       not exist; mmdebstrap's output to LOG. With DEBIAN_ROOT_CACHE=FOLDER, .deb files are
#       copied in from FOLDER before and out to it after (mmdebstrap's manual, "--skip").
#   debian_root_run DIR LOG CMD
#       CMD in bash -l inside DIR, as root, with a clean environment, in a new mount and PID
#       namespace: /proc, /dev/shm and /tmp are the root's own, and any process CMD leaves
#       behind (a Ray worker) ends with it. DEBIAN_ROOT_CACHE is DIR's apt archive while it runs.
#   debian_root_clear DIR
#       removes DIR, unmounting first whatever a killed run left mounted under it.
#   debian_root_require SCRIPT TOOL...
#       exits 2, naming SCRIPT, unless this runs as root and every TOOL is on PATH.
#   debian_root_clone REV DEST
#       a clean clone of this checkout at REV into DEST (only committed work: says so when the
#       working tree has changes), and prints the commit's short hash.

DEBIAN_ROOT_MIRROR=${DEBIAN_ROOT_MIRROR:-http://deb.debian.org/debian}
DEBIAN_ROOT_CACHE=${DEBIAN_ROOT_CACHE:-}

debian_root_make() {
  local dir=$1 log=$2 packages=$3
  shift 3
  local cache_hooks=()
  if [ -n "$DEBIAN_ROOT_CACHE" ]; then
    mkdir -p "$DEBIAN_ROOT_CACHE"
    DEBIAN_ROOT_CACHE=$(cd "$DEBIAN_ROOT_CACHE" && pwd)
    cache_hooks=(--skip=essential/unlink
      --setup-hook="mkdir -p \"\$1\"/var/cache/apt/archives/"
      --setup-hook="sync-in '$DEBIAN_ROOT_CACHE' /var/cache/apt/archives/"
      --customize-hook="sync-out /var/cache/apt/archives '$DEBIAN_ROOT_CACHE'")
  fi
  mmdebstrap --variant=minbase ${packages:+--include="$packages"} "${cache_hooks[@]}" "$@" \
    bookworm "$dir" "$DEBIAN_ROOT_MIRROR" >"$log" 2>&1 || { tail -20 "$log" >&2; return 1; }
  # The network as this machine reaches it, and nothing else of this machine: its name servers,
  # and the certificate authorities it added locally (/usr/local/share/ca-certificates), where a
  # proxy re-signs HTTPS (this project's workplace does: pip in a clean root failed with
  # "self-signed certificate in certificate chain" without them). A root without the
  # ca-certificates package gets no authority.
  cp /etc/resolv.conf "$dir/etc/resolv.conf" 2>/dev/null || true
  if [ -x "$dir/usr/sbin/update-ca-certificates" ] && ls /usr/local/share/ca-certificates/*.crt >/dev/null 2>&1; then
    cp /usr/local/share/ca-certificates/*.crt "$dir/usr/local/share/ca-certificates/"
    chroot "$dir" update-ca-certificates >/dev/null 2>&1
  fi
}

debian_root_run() {
  local dir=$1 log=$2 cmd=$3
  unshare --mount --pid --fork --kill-child bash -c '
    set -e
    r=$1
    mount -t proc proc "$r/proc"
    mount --rbind /sys "$r/sys"
    mount --rbind /dev "$r/dev"
    mount -t tmpfs -o mode=1777 tmpfs "$r/dev/shm"
    mount -t tmpfs -o mode=1777 tmpfs "$r/tmp"
    if [ -n "$3" ] && [ -d "$r/var/cache/apt/archives" ]; then mount --bind "$3" "$r/var/cache/apt/archives"; fi
    exec chroot "$r" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
      PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin bash -lc "$2"
  ' debian_root_run "$dir" "$cmd" "$DEBIAN_ROOT_CACHE" >"$log" 2>&1
}

debian_root_clear() {
  local dir=$1
  [ -e "$dir" ] || return 0
  grep -o " $dir/[^ ]*" /proc/mounts | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
  rm -rf "$dir"
}

debian_root_require() {
  local script=$1 tool
  shift
  [ "$(id -u)" -eq 0 ] || { echo "$script: needs root (chroots, mounts, namespaces)" >&2; exit 2; }
  for tool in mmdebstrap "$@"; do
    command -v "$tool" >/dev/null || { echo "$script: needs $tool (apt-get install $tool)" >&2; exit 2; }
  done
}

debian_root_clone() {
  local rev
  rev=$(git rev-parse --verify "$1^{commit}") || return 1
  [ -z "$(git status --porcelain --untracked-files=no)" ] ||
    echo "note: uncommitted changes are not in the clean clone of $(git rev-parse --short "$rev")" >&2
  git clone -q --no-local "$(git rev-parse --show-toplevel)" "$2" && git -C "$2" checkout -q "$rev" &&
    git rev-parse --short "$rev"
}

# minutes SECONDS: "12.3"
minutes() { awk -v s="$1" 'BEGIN { printf "%.1f", s / 60 }'; }
