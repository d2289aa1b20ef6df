#!/usr/bin/env bash
# make python-test: the library as another program gets it.
#  1. make install into a temporary prefix (bin/detect, libdetect.so.N, detect.h, detect.pc, configs);
#  2. pip install . into a temporary virtual environment (Debian's numpy, setuptools and
#     wheel through --system-site-packages, so nothing is downloaded);
#  3. pytest tests/library with that environment's python: examples/embed.c built with
#     pkg-config against the installed tree, and the Python package, each compared with
#     the installed detect --json; then make uninstall.
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/test_env.sh  # pycocotools on PYTHONPATH, run by make or by hand
PYTHON=${PYTHON:-/usr/bin/python3}
MAKE=${MAKE:-make}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export DETECT_TEST_PREFIX="$tmp/prefix"
echo "== make install PREFIX=$DETECT_TEST_PREFIX"
$MAKE -s install PREFIX="$DETECT_TEST_PREFIX" >/dev/null
echo "== pip install . into $tmp/venv"
"$PYTHON" -m venv --system-site-packages "$tmp/venv"
# pip builds in a copy-free temporary build folder; its log goes to the terminal only on failure.
if ! "$tmp/venv/bin/python" -m pip install --no-build-isolation --no-deps --no-index . >"$tmp/pip.log" 2>&1; then
    cat "$tmp/pip.log"
    exit 1
fi
echo "== pytest tests/library"
# Run from outside the checkout, so `import detect` finds the installed package, not python/.
status=0
(cd "$tmp" && "$tmp/venv/bin/python" -m pytest -q -rs -p no:cacheprovider "$OLDPWD/tests/library") || status=$?
echo "== make uninstall PREFIX=$DETECT_TEST_PREFIX"
$MAKE -s uninstall PREFIX="$DETECT_TEST_PREFIX" >/dev/null
left=$(find "$DETECT_TEST_PREFIX" -type f -o -type l)
if [ -n "$left" ]; then
    echo "make uninstall left files behind:"; echo "$left"; status=1
fi
exit $status
