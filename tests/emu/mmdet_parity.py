#!/usr/bin/python3
"""mmdet_parity.py --work DIR [--cases r101-chelsea,agnostic]: mmdetection's own predictor against
detect --device cuda (tests/emu/run.sh runs it on the CUDA emulator; on a GPU machine it runs as
it is). The cases and the comparison are tests/parity/test_mmdet_e2e.py's (build_case, compare):
mmdet's seeded checkpoint converted, then detect on CUDA in strict fp32 against mmdet's
inference_detector on the same pixels, every detection matched (box IoU >= 0.99, score within
1e-3), masks IoU >= 0.98. Default cases: the R-101 zoo config on a full-size photo (800x1203) and
the class-agnostic training config read with --train-config. Exit 1 on a mismatch."""

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [os.path.join(REPO, "tests", "parity"), os.path.join(REPO, "models")]

import test_mmdet_e2e  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--cases", default="r101-chelsea,agnostic")
    a = ap.parse_args()
    bad = 0
    for name in a.cases.split(","):
        root = os.path.join(a.work, name)
        os.makedirs(root, exist_ok=True)
        ok, line = test_mmdet_e2e.compare(test_mmdet_e2e.build_case(name, root, device="cuda"))
        print(f"  {'OK  ' if ok else 'FAIL'} {line}", flush=True)
        bad += not ok
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
