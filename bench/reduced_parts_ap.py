#!/usr/bin/python3
"""Which parts may leave fp32 under --precision bf16 or int8: the demo model's box and mask AP
with each `reduced_precision` part (configs/README.md) switched on alone, and all together,
against fp32, on the same held-out scenes.

    build/venv-test/bin/python bench/reduced_parts_ap.py [--count 200] [--threads 2]
                                                          [--work build/reduced_parts_ap]

The shipped shapes model (models/shapes_r101_narrow.safetensors, its int8 ranges beside it) on
held-out scenes of models/shapes/shapes_data.py, through models/shapes/evaluate.py's run_engine
and coco_ap (pycocotools). Issue 49's rule: a part leaves fp32 by default where it costs at most
0.01 box or mask AP at that precision. Accuracy only: the time each part saves is
bench/bench_precision.py's (--reduced-precision)."""

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path[:0] = [os.path.join(REPO, "models", "shapes"), os.path.join(REPO, "models")]

import evaluate  # noqa: E402

PARTS = ("stem", "rpn_predictors", "box_head", "mask_head")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=200)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--work", default=os.path.join(REPO, "build", "reduced_parts_ap"))
    ap.add_argument("--precisions", default="bf16,int8")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    ann_path = evaluate.write_scenes(a.work, a.count, log=lambda *_: None)
    with open(ann_path) as f:
        ann = json.load(f)
    image_dir = os.path.dirname(ann_path)
    weights = os.path.join(REPO, "models", "shapes_r101_narrow.safetensors")
    with open(evaluate.CONFIG) as f:
        base = json.load(f)

    def ap_of(precision, parts):
        cfg = json.loads(json.dumps(base))
        for p in PARTS:
            cfg["reduced_precision"][p] = p in parts
        work = os.path.join(a.work, f"{precision}_{'-'.join(parts) or 'none'}")
        os.makedirs(work, exist_ok=True)
        config = os.path.join(work, "config.json")
        with open(config, "w") as f:
            json.dump(cfg, f)
        _, results = evaluate.run_engine(image_dir, ann, work, weights, config=config, threads=a.threads,
                                         precision=precision)
        got = evaluate.coco_ap(ann_path, results)
        return got["bbox"][0], got["segm"][0]

    ref = ap_of("fp32", ())
    print(f"{a.count} held-out scenes, the shapes model; box / mask AP (0.5:0.95)")
    print("| precision | reduced parts | box AP | mask AP | box - fp32 | mask - fp32 |")
    print("|---|---|---|---|---|---|")
    print(f"| fp32 | - | {ref[0]:.4f} | {ref[1]:.4f} | | |")
    for precision in a.precisions.split(","):
        for parts in [()] + [(p,) for p in PARTS] + [PARTS]:
            box, mask = ap_of(precision, parts)
            print(f"| {precision} | {', '.join(parts) or 'none (default)'} | {box:.4f} | {mask:.4f} | "
                  f"{box - ref[0]:+.4f} | {mask - ref[1]:+.4f} |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
