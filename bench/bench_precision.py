#!/usr/bin/python3
"""Our CPU time per stage at each precision, on one full-size image, in the same run.

    /usr/bin/python3 bench/bench_precision.py [--precisions fp32,bf16,int8] [--rounds 3] [--threads 2]

The seeded R-101-FPN weights and the 800x1216 synthetic scene of `make bench`
(bench_cpu.py, tests/parity/oracle.py). Each round runs one detect process per
precision, in turn (fp32, bf16, fp32, ...), each a warm-up run and two
measured runs (--profile-runs 2); the table gives each stage's median over
the rounds and its ratio to the first precision. Then agreement of each
precision's detections with the first's on this image (seeded weights give
near-tied scores, so this is a smoke check: matched by class at box IoU >= 0.9 and
at >= 0.5, with the pairs' mask IoU; accuracy is measured on the demo
model, models/shapes/evaluate.py --precision). A precision the CPU lacks
(bf16 without AVX512_BF16 or AMX) is reported and skipped. int8 first
calibrates (detect calibrate) on 8 other synthetic scenes of the same size
(seeds 1-8; the timed one is seed 0); calibration is not timed."""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "parity"))

import bench_cpu  # noqa: E402  (STAGES, OUR_NAME, run_detect)
from metrics import iou_matrix  # noqa: E402


def box_iou(a, b):
    return float(iou_matrix([a], [b])[0, 0])


def detections(args, weights, png, precision, out):
    cmd = [os.path.join(REPO, "build", "detect"), "-q", "--precision", precision, "--threads", str(args.threads),
           "--config", args.config, "--weights", weights, "--json", out, png]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"bench_precision: detect --precision {precision} failed:\n{r.stderr}")
    with open(out) as f:
        return json.load(f)["images"][0]["detections"]


def mask_iou_rle(a, b):
    from pycocotools import mask as mask_util
    return float(mask_util.iou([a], [b], [0])[0][0])


def matched(ref, got, iou=0.9, ious=None):
    """Detections of `ref` with one of `got` of the same class at box IoU >= iou (greedy, best score
    first); the pairs' mask IoUs are appended to `ious`."""
    used, n = set(), 0
    for d in ref:
        best, bi = 0.0, -1
        for i, g in enumerate(got):
            if i in used or g["class"] != d["class"]:
                continue
            v = box_iou(d["box"], g["box"])
            if v > best:
                best, bi = v, i
        if best >= iou:
            used.add(bi)
            n += 1
            if ious is not None:
                ious.append(mask_iou_rle(d["mask"], got[bi]["mask"]))
    return n


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--precisions", default="fp32,bf16,int8")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--config", default=os.path.join(REPO, "configs", "mask_rcnn_R-101-FPN_torchvision.json"))
    args = ap.parse_args()
    import oracle

    precisions = args.precisions.split(",")
    with tempfile.TemporaryDirectory(prefix="bench_precision_") as tmp:
        model = oracle.build_model(0)
        img = oracle.make_synthetic_image(800, 1216, 0)
        png, weights = os.path.join(tmp, "image.png"), os.path.join(tmp, "weights.safetensors")
        oracle.save_png(img, png)
        oracle.export_weights(model, weights)
        del model
        if "int8" in precisions:
            cal = os.path.join(tmp, "calibration")
            os.makedirs(cal)
            for k in range(1, 9):
                oracle.save_png(oracle.make_synthetic_image(800, 1216, k), os.path.join(cal, f"{k}.png"))
            subprocess.run([os.path.join(REPO, "build", "detect"), "calibrate", "-q", "--threads", str(args.threads),
                            "--config", args.config, "--weights", weights, cal], check=True)

        usable = []
        for p in precisions:
            probe = subprocess.run([os.path.join(REPO, "build", "detect"), "-q", "--precision", p, "--config",
                                    args.config, "--weights", weights, png], capture_output=True, text=True)
            if probe.returncode != 0:
                print(f"{p}: skipped: {probe.stderr.strip()}")
            else:
                usable.append(p)
        runs = {p: [] for p in usable}
        rss = {}
        for _ in range(args.rounds):
            for p in usable:
                bench_cpu.peak_rss_kb["full"] = 0
                doc = bench_cpu.run_detect(args, weights, [png], ["--profile-runs", "2", "--precision", p], "full")
                runs[p] += [{s: r[bench_cpu.OUR_NAME.get(s, s)] for s in bench_cpu.STAGES} for r in doc]
                rss[p] = max(rss.get(p, 0), bench_cpu.peak_rss_kb["full"])

        base = usable[0]
        print(f"\nCPU, {args.threads} threads, 800x1216, seeded R-101-FPN, median of {args.rounds} alternating "
              f"rounds x 2 runs (seconds)")
        print(f"{'stage':<12}" + "".join(f"{p:>10}" for p in usable) +
              "".join(f"{p + '/' + base:>14}" for p in usable[1:]))
        for s in bench_cpu.STAGES + ["total"]:
            med = {}
            for p in usable:
                vals = [sum(r.values()) if s == "total" else r[s] for r in runs[p]]
                med[p] = statistics.median(vals)
            print(f"{s:<12}" + "".join(f"{med[p]:>10.3f}" for p in usable) +
                  "".join(f"{med[p] / med[base] if med[base] else float('nan'):>14.2f}" for p in usable[1:]))
        print("peak RSS MiB " + "".join(f"{rss[p] / 1024:>10.0f}" for p in usable))

        ref = detections(args, weights, png, base, os.path.join(tmp, f"{base}.json"))
        for p in usable[1:]:
            got = detections(args, weights, png, p, os.path.join(tmp, f"{p}.json"))
            for at in (0.9, 0.5):  # 0.5: as bench_peers.py matches the peers
                ious = []
                print(f"{p} vs {base}: {matched(ref, got, iou=at, ious=ious)} of {len(ref)} detections matched "
                      f"(class, box IoU >= {at}), their mask IoU mean {statistics.mean(ious) if ious else 0:.3f}, "
                      f"min {min(ious) if ious else 0:.3f}; {len(got)} detections")


if __name__ == "__main__":
    main()
