#!/usr/bin/env bash
# The README's quick start on a clean Debian 12, as a new user meets it: a minbase root made
# from Debian's packages alone, a clean clone of this checkout's commit copied into it, and
# the two commands run there as root. Nothing of this machine goes in but the clone and,
# optionally, a folder of .deb files that saves downloads. Catches what a machine that
# already has the packages hides (issue 44: pycocotools in the system Python hid a broken
# PYTHONPATH from make check, and from CI).
#
#   scripts/fresh_debian.sh                   make demo, then make check (about 45 min on 2 cores)
#   scripts/fresh_debian.sh "make demo" ...   other commands, each one argument, run in the clone
#
#   FRESH_DIR=/var/tmp/detect-fresh   where the root and the logs go (started over each run)
#   FRESH_CACHE=DIR                   .deb files reused and added to (none by default)
#   FRESH_REV=HEAD                    the commit cloned (uncommitted changes are not in it)
#   FRESH_KEEP=1                      keep the root afterwards
#
# The root holds Debian 12 minbase plus git and make: what a user needed to clone the
# repository and type `make`. Commands run as scripts/debian_root.sh's debian_root_run says
# (own /proc, /dev/shm and /tmp; nothing left running). Needs root and mmdebstrap. Prints each
# command's verdict and minutes, and make check's own table; exits 1 if any command failed.
# Logs: $FRESH_DIR/logs/.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/debian_root.sh
FRESH_DIR=${FRESH_DIR:-/var/tmp/detect-fresh}
FRESH_REV=${FRESH_REV:-HEAD}
DEBIAN_ROOT_CACHE=${FRESH_CACHE:-}
if [ $# -gt 0 ]; then commands=("$@"); else commands=("make demo" "make check"); fi

debian_root_require fresh_debian.sh
root=$FRESH_DIR/root logs=$FRESH_DIR/logs
debian_root_clear "$FRESH_DIR"
mkdir -p "$logs"

t0=$SECONDS
echo "== fresh_debian: Debian 12 minbase + git make -> $root"
debian_root_make "$root" "$logs/mmdebstrap.log" git,make,ca-certificates
echo "   $(minutes $((SECONDS - t0))) min, $(du -sh "$root" | cut -f1)"
short=$(debian_root_clone "$FRESH_REV" "$root/root/detect")
echo "== fresh_debian: clean clone of $(git log -1 --format='%h %s' "$short" | cut -c1-90)"

names=() verdicts=() times=() status=0
for cmd in "${commands[@]}"; do
  log="$logs/$(echo "$cmd" | tr -c 'A-Za-z0-9\n' '_').log"
  echo "== fresh_debian: $cmd (log: $log)"
  t=$SECONDS rc=0
  debian_root_run "$root" "$log" "cd /root/detect && $cmd" || rc=$?
  names+=("$cmd") times+=("$(minutes $((SECONDS - t)))")
  if [ $rc -eq 0 ]; then verdicts+=(ok); else verdicts+=("FAILED (exit $rc)") status=1; tail -30 "$log" | sed 's/^/    /'; fi
done

echo
echo "fresh_debian: Debian 12 minbase + git make, clone of $short"
for i in "${!names[@]}"; do
  printf '  %-40s %-18s %6s min\n' "${names[$i]}" "${verdicts[$i]}" "${times[$i]}"
  case "${names[$i]}" in # make check's own table: its steps and fuzz targets
    *"make check"*) sed -n '/^======== check: summary/,$p' "$logs/$(echo "${names[$i]}" | tr -c 'A-Za-z0-9\n' '_').log" | sed 's/^/      /' ;;
  esac
done
if [ "${FRESH_KEEP:-0}" = 1 ]; then echo "fresh_debian: the root stays in $root"; else debian_root_clear "$root"; fi
exit $status
