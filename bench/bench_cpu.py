#!/usr/bin/python3
"""make bench: our CPU time per stage beside torchvision's, on one full-size
image, on this machine, in the same run.

Both run the same seeded R-101-FPN weights (tests/parity/oracle.py) on the
same pixels (a 800x1216 synthetic scene, so the network input is the
COCO-test size). Runs alternate (ours, torchvision, ours, ...) after a
warm-up of each; the table gives medians. Threads: 2 for both (--threads).
Peak RSS is that of our detect process (GNU time's %M)."""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "parity"))

peak_rss_kb = 0  # of our detect processes, kilobytes

STAGES = ["preprocess", "backbone", "fpn", "rpn", "box", "mask", "paste"]
OUR_NAME = {"box": "box_head", "mask": "mask_head", "paste": "mask_paste"}  # detect --profile-json names


def torch_stages(model, img, torch):
    """torchvision's forward unrolled as GeneralizedRCNN does it, timed per stage."""
    from torchvision.models.detection.roi_heads import maskrcnn_inference
    from torchvision.models.detection.rpn import concat_box_prediction_layers
    import oracle
    m, t, clock = model, {}, time.perf_counter
    with torch.no_grad():
        t0 = clock()
        x = oracle.image_tensor(img)
        il, _ = m.transform([x])
        t1 = clock(); t["preprocess"] = t1 - t0; t0 = t1
        body = m.backbone.body(il.tensors)
        t1 = clock(); t["backbone"] = t1 - t0; t0 = t1
        feats = m.backbone.fpn(body)
        t1 = clock(); t["fpn"] = t1 - t0; t0 = t1
        fl = list(feats.values())
        obj, dlt = m.rpn.head(fl)
        anchors = m.rpn.anchor_generator(il, fl)
        o, d = concat_box_prediction_layers(obj, dlt)
        props = m.rpn.box_coder.decode(d, anchors).view(1, -1, 4)
        pboxes, _ = m.rpn.filter_proposals(props, o, il.image_sizes, [v[0].numel() for v in obj])
        t1 = clock(); t["rpn"] = t1 - t0; t0 = t1
        rh = m.roi_heads
        cl, br = rh.box_predictor(rh.box_head(rh.box_roi_pool(feats, pboxes, il.image_sizes)))
        boxes, scores, labels = rh.postprocess_detections(cl, br, pboxes, il.image_sizes)
        t1 = clock(); t["box"] = t1 - t0; t0 = t1
        mp = maskrcnn_inference(rh.mask_predictor(rh.mask_head(rh.mask_roi_pool(feats, boxes, il.image_sizes))),
                                labels)
        t1 = clock(); t["mask"] = t1 - t0; t0 = t1
        m.transform.postprocess([dict(boxes=boxes[0], scores=scores[0], labels=labels[0], masks=mp[0])],
                                il.image_sizes, [tuple(x.shape[-2:])])
        t1 = clock(); t["paste"] = t1 - t0
    return t


def ours_stages(args, weights, png, runs):
    """One process: a warm-up run, then `runs` measured runs (--profile-runs);
    per-run stage times from --profile-json."""
    pj = os.path.join(os.path.dirname(png), "profile.json")
    rss = os.path.join(os.path.dirname(png), "rss.txt")
    # GNU time reports the peak RSS of detect itself; a child forked straight
    # from this (torch-sized) process would inherit its RSS in ru_maxrss.
    cmd = ["/usr/bin/time", "-f", "%M", "-o", rss, os.path.join(REPO, "build", "detect"), "-q", "--profile-runs",
           str(runs), "--profile-json", pj, "--threads", str(args.threads), "--config", args.config,
           "--weights", weights, png]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"bench: detect failed:\n{r.stderr}")
    global peak_rss_kb
    with open(rss) as f:
        peak_rss_kb = max(peak_rss_kb, int(f.read().split()[-1]))
    with open(pj) as f:
        doc = json.load(f)
    return [{s: r[OUR_NAME.get(s, s)] for s in STAGES} for r in doc["runs"]]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3, help="alternating measured rounds")
    ap.add_argument("--config", default=os.path.join(REPO, "configs", "mask_rcnn_R-101-FPN_torchvision.json"))
    args = ap.parse_args()

    import torch
    import oracle
    torch.set_num_threads(args.threads)
    tmp = tempfile.mkdtemp(prefix="detect-bench-")
    model = oracle.build_model(0)
    img = oracle.make_synthetic_image(800, 1216, 0)
    png, weights = os.path.join(tmp, "image.png"), os.path.join(tmp, "weights.safetensors")
    oracle.save_png(img, png)
    oracle.export_weights(model, weights)

    ours, theirs = [], []
    torch_stages(model, img, torch)                # warm-up
    for _ in range(args.rounds):
        ours += ours_stages(args, weights, png, 2)
        theirs.append(torch_stages(model, img, torch))

    print(f"\nCPU, {args.threads} threads, 800x1216 input, median of {args.rounds} alternating rounds")
    print(f"{'stage':<12}{'ours s':>10}{'torchvision s':>15}{'ratio':>8}")
    tot_o = tot_t = 0.0
    for s in STAGES:
        o = statistics.median(r[s] for r in ours)
        t = statistics.median(r[s] for r in theirs)
        tot_o += o
        tot_t += t
        print(f"{s:<12}{o:>10.3f}{t:>15.3f}{o / t if t else float('nan'):>8.2f}")
    print(f"{'total':<12}{tot_o:>10.3f}{tot_t:>15.3f}{tot_o / tot_t:>8.2f}")
    print(f"peak RSS (ours, whole process): {peak_rss_kb / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
