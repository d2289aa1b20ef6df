#!/usr/bin/env bash
# Creates build/venv-ray (or $1): Debian's numpy, PIL and pytest through
# --system-site-packages, Ray from PyPI (tests/ray/requirements.txt), and
# this checkout's detect package (pip install . builds libdetect with make).
# Re-running it only installs what changed. PyPI unreachable: it fails, loudly.
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-/usr/bin/python3}
venv=${1:-build/venv-ray}
if [ ! -x "$venv/bin/python" ]; then
    echo "== creating $venv"
    "$PYTHON" -m venv --system-site-packages "$venv"
fi
stamp="$venv/.requirements"
if ! cmp -s tests/ray/requirements.txt "$stamp"; then
    echo "== pip install -r tests/ray/requirements.txt into $venv (from PyPI)"
    if ! "$venv/bin/python" -m pip install --disable-pip-version-check -q -r tests/ray/requirements.txt; then
        echo "tests/ray/setup_venv.sh: could not install Ray from PyPI (is it reachable?)" >&2
        exit 1
    fi
    cp tests/ray/requirements.txt "$stamp"
fi
echo "== pip install . into $venv"
"$venv/bin/python" -m pip install --disable-pip-version-check -q --no-build-isolation --no-deps --no-index \
    --force-reinstall . >"$venv/pip-detect.log" 2>&1 || { cat "$venv/pip-detect.log"; exit 1; }
"$venv/bin/python" -c "import ray, detect; print('ray', ray.__version__, '| detect', detect.version())"
