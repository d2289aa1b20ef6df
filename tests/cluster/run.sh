#!/usr/bin/env bash
# make cluster-test: detect --shard / detect merge and the Slurm and
# Kubernetes recipes with Debian's python, then the Ray pipeline on a local
# Ray cluster with build/venv-ray's (tests/ray/setup_venv.sh installs Ray
# there from PyPI; when it cannot, this fails: it does not skip).
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/test_env.sh  # pycocotools on PYTHONPATH, run by make or by hand
PYTHON=${PYTHON:-/usr/bin/python3}
status=0
echo "== tests/cluster: --shard, merge, recipes"
"$PYTHON" -m pytest -q -rs -p no:cacheprovider tests/cluster/test_shard.py tests/cluster/test_recipes.py || status=1
echo "== tests/ray/setup_venv.sh"
if PYTHON=$PYTHON tests/ray/setup_venv.sh; then
    echo "== tests/cluster: Ray"
    # Ray's own files (session logs, sockets) go to a temporary folder, removed after.
    tmp=$(mktemp -d)
    RAY_TMPDIR=$tmp timeout 600 build/venv-ray/bin/python -m pytest -q -rs -p no:cacheprovider \
        tests/cluster/test_ray.py || status=1
    rm -rf "$tmp"
else
    echo "cluster-test: could not set up build/venv-ray (Ray from PyPI): the Ray tests did not run" >&2
    status=1
fi
exit $status
