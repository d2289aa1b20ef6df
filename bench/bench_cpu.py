#!/usr/bin/python3
"""make bench: our CPU time per stage beside torchvision's, on one full-size
image, and images/s over a batch of photo-like images of mixed sizes, on this
machine, in the same run.

Both run the same seeded R-101-FPN weights (tests/parity/oracle.py) on the
same pixels. Full size: a 800x1216 synthetic scene (the network input is the
COCO-test size); runs alternate (ours, torchvision, ours, ...) after a
warm-up of each; the table gives medians. Batch: 50 seeded synthetic scenes
whose sizes run from 480x640 to 1200x1600 in both orientations and several
aspect ratios (so several network input shapes, as a folder of photos gives);
each image is timed from its file to its pasted masks (decode included, model
load and one warm-up image excluded), in chunks that alternate between us and
torchvision. A batch image costs about as much as the full-size one (every
image is resized to short side 800), so `make bench` times the first
--batch-images of the 50 (default 16, one round, about 6 minutes in all on a
2-core machine); `--batch-images 50` times the whole batch (about 12 minutes).
Threads: 2 for both (--threads). Peak RSS is that of our detect process (GNU
time's %M)."""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "parity"))

peak_rss_kb = {"full": 0, "batch": 0}  # of our detect processes, kilobytes

# (h, w) of the batch's images: 4:3, 3:2, 16:9 and 1:1 at several sizes from
# 480x640 to 1200x1600, both orientations; the list is sampled with a seed.
BATCH_SIZES = [(480, 640), (600, 800), (768, 1024), (900, 1200), (1200, 1600), (480, 720), (667, 1000),
               (1067, 1600), (450, 800), (720, 1280), (900, 1600), (640, 640), (1024, 1024)]
BATCH_COUNT = 50

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


def run_detect(args, weights, images, extra, kind, detect=None):
    """One detect process over `images` (detect: another build's binary, else
    ours); returns --profile-json's runs and records the process's peak RSS
    under peak_rss_kb[kind]."""
    tmp = os.path.dirname(weights)
    pj, rss = os.path.join(tmp, "profile.json"), os.path.join(tmp, "rss.txt")
    # GNU time reports the peak RSS of detect itself; a child forked straight
    # from this (torch-sized) process would inherit its RSS in ru_maxrss.
    cmd = ["/usr/bin/time", "-f", "%M", "-o", rss, detect or os.path.join(REPO, "build", "detect"), "-q", *extra,
           "--profile-json", pj, "--threads", str(args.threads), "--config", args.config, "--weights", weights,
           *images]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"bench: detect failed:\n{r.stderr}")
    with open(rss) as f:
        peak_rss_kb[kind] = max(peak_rss_kb[kind], int(f.read().split()[-1]))
    with open(pj) as f:
        return json.load(f)["runs"]


def ours_stages(args, weights, png, runs):
    """One process: a warm-up run, then `runs` measured runs (--profile-runs);
    per-run stage times from --profile-json."""
    doc = run_detect(args, weights, [png], ["--profile-runs", str(runs)], "full")
    return [{s: r[OUR_NAME.get(s, s)] for s in STAGES} for r in doc]


def make_batch(tmp, scale=1.0):
    """The batch's PNG files (seeded), in the order they are timed; `scale`
    shrinks every size (tests/gpu/bench_gpu.py's dry run)."""
    import numpy as np
    import oracle
    rng = np.random.RandomState(2026)
    paths = []
    for i in range(BATCH_COUNT):
        h, w = BATCH_SIZES[rng.randint(len(BATCH_SIZES))]
        if rng.randint(2):
            h, w = w, h
        h, w = max(32, round(h * scale)), max(32, round(w * scale))
        path = os.path.join(tmp, f"batch_{i:02d}_{h}x{w}.png")
        oracle.save_png(oracle.make_synthetic_image(h, w, 100 + i), path)
        paths.append(path)
    return paths


def torch_file(model, path, torch):
    """torchvision from a file to its pasted masks, as detect does: decode
    (PIL), the model's own forward, outputs at the original size."""
    from PIL import Image
    import numpy as np
    import oracle
    t0 = time.perf_counter()
    with Image.open(path) as im:
        img = np.array(im.convert("RGB"), dtype=np.uint8)
    with torch.no_grad():
        model([oracle.image_tensor(img)])
    return time.perf_counter() - t0


def finished_span(runs):
    """Seconds from the first run's end (the warm-up image) to the last's,
    by detect's own clock (--profile-json's `finished`)."""
    return runs[-1]["finished"] - runs[0]["finished"]


def bench_batch(args, model, weights, paths, torch):
    """Images/s of both over `paths`, in alternating chunks; ours in one
    process per chunk after a warm-up image (the chunk's first, run twice),
    from the warm-up's end to the last image's (so decoding ahead, when
    --decode-threads has any, counts as overlapped), plus each image's own
    total."""
    ours, span, theirs = [], 0.0, []
    for k in range(0, len(paths), args.batch_chunk):
        chunk = paths[k:k + args.batch_chunk]
        runs = run_detect(args, weights, [chunk[0]] + chunk, [], "batch")
        ours += [r["total"] for r in runs[1:]]
        span += finished_span(runs)
        theirs += [torch_file(model, p, torch) for p in chunk]
    return ours, span, theirs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3, help="alternating measured rounds")
    ap.add_argument("--batch-images", type=int, default=16,
                    help=f"how many of the {BATCH_COUNT} batch images to time (0: none)")
    ap.add_argument("--batch-chunk", type=int, default=8, help="batch images per alternating chunk")
    ap.add_argument("--config", default=os.path.join(REPO, "configs", "mask_rcnn_R-101-FPN_torchvision.json"))
    args = ap.parse_args()

    import torch
    torch.set_num_threads(args.threads)
    tmp = tempfile.mkdtemp(prefix="detect-bench-")
    try:
        run(args, tmp, torch)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run(args, tmp, torch):
    import oracle
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
    print(f"peak RSS (ours, whole process): {peak_rss_kb['full'] / 1024:.0f} MiB")

    n = min(max(args.batch_images, 0), BATCH_COUNT)
    if n:
        paths = make_batch(tmp)[:n]
        o, span, t = bench_batch(args, model, weights, paths, torch)
        shapes = sorted({os.path.basename(p).split("_")[2][:-4] for p in paths})
        print(f"\nbatch: {n} of {BATCH_COUNT} images, {len(shapes)} sizes ({', '.join(shapes)}), file to masks, "
              f"one round in chunks of {args.batch_chunk}")
        print(f"{'':<12}{'ours':>10}{'torchvision':>15}{'ratio':>8}   (ratio: ours' time / torchvision's)")
        print(f"{'images/s':<12}{n / span:>10.3f}{n / sum(t):>15.3f}{span / sum(t):>8.2f}")
        print(f"{'median s':<12}{statistics.median(o):>10.3f}{statistics.median(t):>15.3f}"
              f"{statistics.median(o) / statistics.median(t):>8.2f}")
        print(f"peak RSS (ours, whole process over a chunk): {peak_rss_kb['batch'] / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
