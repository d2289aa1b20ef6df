#!/usr/bin/env bash
# The tests' Python environment, in one place. pycocotools, the one PyPI package the tests import,
# lives in build/venv-test (scripts/install_deps.sh makes it); its site-packages must be on
# PYTHONPATH for Debian's python3, the venvs the tests make from it and their subprocesses.
#
#   . scripts/test_env.sh          (bash, from the checkout's root) exports PYTHONPATH with the
#                                  venv's site-packages first, once, whether or not it exists yet
#   scripts/test_env.sh --site     prints that folder (the Makefile and install_deps.sh read it)
#   scripts/test_env.sh --mmdet-python
#                                  prints the interpreter of build/venv-mmdet, the mmdetection
#                                  oracle's environment (install_deps.sh makes it; the tests run
#                                  tests/parity/oracle_mmdet.py with it, and fail, saying "run
#                                  make deps", where it is missing)
#
# The folder is a fixed name, build/venv-test/site-packages (install_deps.sh links it to the
# venv's lib/python3.X/site-packages), never found by a glob: make caches the folders it has
# read, so a $(wildcard) taken before `make deps` made the venv stayed empty for every recipe
# after it (issue 44: make check's sanitize step lost pycocotools on a fresh clone). Nor does
# it ask python3 for its version: on a fresh machine python3 comes with make's deps step.
detect_test_site() {
  echo "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/build/venv-test/site-packages"
}
detect_mmdet_python() {
  echo "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/build/venv-mmdet/bin/python"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  case "${1:-}" in
    --site) detect_test_site ;;
    --mmdet-python) detect_mmdet_python ;;
    *) echo "usage: . scripts/test_env.sh | scripts/test_env.sh --site | scripts/test_env.sh --mmdet-python" >&2; exit 2 ;;
  esac
else
  detect_site_=$(detect_test_site)
  case ":${PYTHONPATH:-}:" in
    *":$detect_site_:"*) ;;
    *) export PYTHONPATH="$detect_site_${PYTHONPATH:+:$PYTHONPATH}" ;;
  esac
  unset detect_site_
fi
