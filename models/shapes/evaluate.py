"""Accuracy and parity of the shipped shapes model on held-out generated scenes.

    build/venv-test/bin/python models/shapes/evaluate.py [--count 200] [--weights models/shapes_r101_narrow.safetensors]
                                               [--work build/shapes_eval] [--threads 1] [--no-torchvision]
                                               [--demo-score 0.8[,0.85,...]] [--seed 2] [--precision bf16|int8]

1. writes scenes 0..count-1 of shapes_data.HELDOUT_SEED (never used in training; --seed
   chooses another, e.g. shapes_data.VALIDATION_SEED) with their COCO annotations to WORK/images/;
2. runs `build/detect --coco-results --json` on them (the engine);
3. runs torchvision 0.14 on the same PNGs with the same weights (the F16 file, widened to F32
   exactly) and the config's inference settings, and writes its COCO results;
4. prints box and mask AP (pycocotools COCOeval) of both result files, their differences, and
   the detection-by-detection match (class, box IoU >= 0.99, score within 1e-3; mask IoU).
5. the same again with `detect --agnostic-nms` (box_head.agnostic_nms), against torchvision's
   detections post-processed with torchvision.ops.nms over all classes (before the 100 cut);
6. prints, with and without --agnostic-nms, what the demo draws (detections scoring above
   --demo-score, the threshold of scripts/demo.sh, or each of a comma-separated list of
   thresholds) against the ground truth of shapes_data.py:
   recall (objects found by a detection of the right class with box IoU >= 0.5, each detection
   finding at most one), precision (detections that found an object / all), the share of scenes
   drawn exactly right (every object found once and nothing else), what the other detections
   were (on an object of another class, or on background), and box and mask AP (0.5:0.95, all
   detections above the config's 0.05).
Exits non-zero if AP50 < 0.9, if the APs differ by more than 0.001 or a detection is unmatched
(other than a near-tie at the 0.05 score threshold or the 100th score).  --no-torchvision skips
steps 3 to 5's torchvision runs (and the parity verdict).  tests/parity/test_trained_model.py runs
the same code on a few scenes.
"""

import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [HERE, os.path.join(REPO, "models")]
import shapes_data  # noqa: E402

CONFIG = os.path.join(REPO, "configs", "mask_rcnn_R-101-FPN_shapes.json")
WEIGHTS = os.path.join(REPO, "models", "shapes_r101_narrow.safetensors")
DETECT = os.path.join(REPO, "build", "detect")
SCORE_THRESH = 0.05
TIE_EPS = 2e-4
MAX_DETS = 100  # box_head.detections_per_image
_BOX_HEAD = json.load(open(CONFIG))["box_head"]
NMS_THRESH = _BOX_HEAD["nms_thresh"]  # the per-class NMS (torchvision's box_nms_thresh)
# --agnostic-nms's IoU threshold, as the engine reads it (the config's own, else nms_thresh)
AGNOSTIC_NMS_THRESH = _BOX_HEAD.get("agnostic_nms_thresh", NMS_THRESH)
DEMO_SCORE = 0.85  # scripts/demo.sh --score-thresh (tests/parity/test_trained_model.py checks they agree)


def load_torchvision(weights, threads=1):
    """The FrozenBatchNorm torchvision model with the weights of a canonical safetensors file."""
    import torch
    import model as shapes_model
    torch.set_num_threads(threads)
    return shapes_model.load_converted(shapes_model.build_model(frozen_bn=True), weights).eval()


def run_torchvision(model, image_dir, ann, agnostic=False):
    """torchvision detections per image id: dict(boxes, scores, labels, masks (bool HxW)).
    agnostic: torchvision.ops.nms at AGNOSTIC_NMS_THRESH over all classes of its per-class NMS survivors
    (taken uncut), then the best MAX_DETS: the reference for box_head.agnostic_nms."""
    import torch
    import torchvision
    from PIL import Image
    out = {}
    cut = model.roi_heads.detections_per_img
    model.roi_heads.detections_per_img = 10 ** 6 if agnostic else cut
    with torch.no_grad():
        for im in ann["images"]:
            img = np.asarray(Image.open(os.path.join(image_dir, im["file_name"])).convert("RGB"))
            x = torch.from_numpy(img.copy()).permute(2, 0, 1).float() / 255
            r = model([x])[0]
            if agnostic:
                keep = torchvision.ops.nms(r["boxes"], r["scores"], AGNOSTIC_NMS_THRESH)[:MAX_DETS]
                r = {k: v[keep] for k, v in r.items()}
            out[im["id"]] = {"boxes": r["boxes"].numpy().astype(np.float64), "scores": r["scores"].numpy(),
                             "labels": r["labels"].numpy(), "masks": r["masks"][:, 0].numpy() > 0.5}
    model.roi_heads.detections_per_img = cut
    return out


def coco_results(dets):
    """COCO results list (bbox x,y,w,h; RLE segmentation) from per-image detections."""
    from pycocotools import mask as mask_util
    res = []
    for image_id, d in dets.items():
        for b, s, l, m in zip(d["boxes"], d["scores"], d["labels"], d["masks"]):
            rle = mask_util.encode(np.asfortranarray(m.astype(np.uint8)))
            res.append({"image_id": int(image_id), "category_id": int(l), "score": float(s),
                        "bbox": [float(b[0]), float(b[1]), float(b[2] - b[0]), float(b[3] - b[1])],
                        "segmentation": {"size": list(rle["size"]), "counts": rle["counts"].decode()}})
    return res


def run_engine(image_dir, ann, work, weights, config=CONFIG, threads=1, agnostic=False, precision="fp32"):
    """Runs build/detect on the scenes (at `precision`: detect --precision); returns (per-image
    detections from --json, --coco-results path)."""
    from pycocotools import mask as mask_util
    files = [os.path.join(image_dir, im["file_name"]) for im in ann["images"]]
    lst = os.path.join(work, "inputs.txt")
    with open(lst, "w") as f:
        f.write("\n".join(files) + "\n")
    tag = ("_agnostic" if agnostic else "") + ("" if precision == "fp32" else "_" + precision)
    js, cr = os.path.join(work, f"engine{tag}.json"), os.path.join(work, f"engine{tag}_coco_results.json")
    # the config with box_head.agnostic_nms off, whatever the shipped file says: --agnostic-nms turns it on
    cfg = json.load(open(config))
    cfg["box_head"]["agnostic_nms"] = False
    config = os.path.join(work, "config_per_class_nms.json")
    with open(config, "w") as f:
        json.dump(cfg, f, indent=2)
    cmd = [DETECT, "--config", config, "--weights", weights, "--threads", str(threads), "-q", "--device", "cpu",
           "--precision", precision, "--json", js, "--coco-results", cr, "--list", lst] + \
        (["--agnostic-nms"] if agnostic else [])
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {r.returncode}\n{r.stderr}")
    by_file = {im["file_name"]: im["id"] for im in ann["images"]}
    out = {}
    for im in json.load(open(js))["images"]:
        dets = im["detections"]
        out[by_file[os.path.basename(im["file"])]] = {
            "boxes": np.array([d["box"] for d in dets], np.float64).reshape(-1, 4),
            "scores": np.array([d["score"] for d in dets], np.float64),
            "labels": np.array([d["class_id"] for d in dets], np.int64),
            "masks": np.array([mask_util.decode(d["mask"]).astype(bool) for d in dets]).reshape(
                (-1, im["height"], im["width"]))}
    return out, cr


def coco_ap(ann_path, results):
    """{'bbox': (AP, AP50, AP75), 'segm': (...)} from pycocotools; results = list or path."""
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval
    out = {}
    with contextlib.redirect_stdout(io.StringIO()):
        gt = COCO(ann_path)
        res = json.load(open(results)) if isinstance(results, str) else results
        dt = gt.loadRes(res) if res else None
        for kind in ("bbox", "segm"):
            if dt is None:
                out[kind] = (0.0, 0.0, 0.0)
                continue
            ev = COCOeval(gt, dt, kind)
            ev.evaluate()
            ev.accumulate()
            ev.summarize()
            out[kind] = tuple(float(x) for x in ev.stats[:3])
    return out


def match_all(ref, ours):
    """Greedy per-image matching of torchvision's detections to the engine's: same class, box
    IoU >= 0.99, score within 1e-3.  Returns a summary dict; 'bad' lists unmatched detections
    that are not near-ties at a cut."""
    sys.path.insert(0, os.path.join(REPO, "tests", "parity"))
    from metrics import iou_matrix, mask_iou, match_detections
    s = {"ref": 0, "ours": 0, "matched": 0, "ties": 0, "bad": [], "min_box_iou": 1.0, "max_score_diff": 0.0,
         "min_mask_iou": 1.0}
    for image_id, r in ref.items():
        o = ours[image_id]
        pairs, missed, extra = match_detections(r["boxes"], r["scores"], r["labels"], o["boxes"], o["scores"],
                                                o["labels"], iou=0.99, score_tol=1e-3)
        s["ref"] += len(r["scores"])
        s["ours"] += len(o["scores"])
        s["matched"] += len(pairs)
        # A score this close to a cut (the threshold, or the last kept score when the
        # detections-per-image cap binds) may fall on either side of it.
        cuts = [SCORE_THRESH] + [float(d["scores"].min()) for d in (r, o) if len(d["scores"]) >= MAX_DETS]
        for name, idx, d in (("torchvision", missed, r), ("engine", extra, o)):
            for i in idx:
                if any(abs(float(d["scores"][i]) - c) <= TIE_EPS for c in cuts):
                    s["ties"] += 1
                else:
                    s["bad"].append(f"image {image_id}: {name} only: class {d['labels'][i]} score "
                                    f"{d['scores'][i]:.4f} box {np.round(d['boxes'][i], 2).tolist()}")
        for i, j in pairs:
            s["min_box_iou"] = min(s["min_box_iou"], float(iou_matrix(r["boxes"][i:i + 1], o["boxes"][j:j + 1])[0, 0]))
            s["max_score_diff"] = max(s["max_score_diff"], abs(float(r["scores"][i]) - float(o["scores"][j])))
            s["min_mask_iou"] = min(s["min_mask_iou"], mask_iou(r["masks"][i], o["masks"][j]))
    return s


def scene_metrics(ann, dets, score):
    """What the demo draws (detections scoring above `score`) against the ground truth: each
    image's detections, best first, each take the unmatched object of their class with the
    highest box IoU >= 0.5.  Returns recall, precision, exact (share of scenes with every object
    found once and nothing else), and the unmatched detections by kind: 'other_class' (box IoU
    >= 0.5 with an object of another class), 'same_class' (a second detection of an object
    already found) and 'background'."""
    sys.path.insert(0, os.path.join(REPO, "tests", "parity"))
    from metrics import iou_matrix
    gts = {im["id"]: [] for im in ann["images"]}
    for a in ann["annotations"]:
        x, y, w, h = a["bbox"]
        gts[a["image_id"]].append(([x, y, x + w, y + h], a["category_id"]))
    n_gt = n_det = tp = exact = 0
    kinds = {"other_class": 0, "same_class": 0, "background": 0}
    for image_id, gt in gts.items():
        d = dets[image_id]
        sel = np.argsort(-d["scores"], kind="stable")
        sel = sel[d["scores"][sel] > score]
        gb = np.array([g[0] for g in gt], np.float64).reshape(-1, 4)
        gl = np.array([g[1] for g in gt], np.int64)
        iou = iou_matrix(d["boxes"][sel], gb) if len(sel) and len(gt) else np.zeros((len(sel), len(gt)))
        found = np.zeros(len(gt), bool)
        hits = 0
        for row, i in enumerate(sel):
            cand = np.where((gl == d["labels"][i]) & ~found & (iou[row] >= 0.5))[0]
            if len(cand):
                found[cand[np.argmax(iou[row][cand])]] = True
                hits += 1
            elif ((gl != d["labels"][i]) & (iou[row] >= 0.5)).any():
                kinds["other_class"] += 1
            elif ((gl == d["labels"][i]) & (iou[row] >= 0.5)).any():
                kinds["same_class"] += 1
            else:
                kinds["background"] += 1
        n_gt += len(gt)
        n_det += len(sel)
        tp += hits
        exact += hits == len(gt) == len(sel)
    return {"recall": tp / max(n_gt, 1), "precision": tp / max(n_det, 1), "exact": exact / max(len(gts), 1),
            "objects": n_gt, "detections": n_det, "found": tp, "scenes": len(gts), "exact_scenes": exact, **kinds}


def write_scenes(work, count, seed=shapes_data.HELDOUT_SEED, start=0, log=print):
    """Writes scenes start..start+count-1 of seed with their COCO annotations to WORK/images/;
    returns the annotations' path (what evaluate() takes)."""
    img_dir = os.path.join(work, "images")
    t = time.time()
    ann_path = shapes_data.write_dataset(img_dir, seed, count, start)
    n_objects = len(json.load(open(ann_path))["annotations"])
    log(f"{count} scenes (seed {seed}, {n_objects} objects) in {img_dir} ({time.time() - t:.0f} s)")
    return ann_path


def evaluate(ann_path, weights, work, threads=1, log=print, agnostic=False, torchvision=True, precision="fp32"):
    """Runs the engine (with --agnostic-nms if agnostic, at `precision`) and (unless not
    torchvision) torchvision (with torchvision.ops.nms over all classes if agnostic) on the
    scenes write_scenes() wrote, returns a report dict."""
    img_dir = os.path.dirname(ann_path)
    ann = json.load(open(ann_path))
    t = time.time()
    ours, engine_cr = run_engine(img_dir, ann, work, weights, threads=threads, agnostic=agnostic, precision=precision)
    what = ("engine --agnostic-nms" if agnostic else "engine") + ("" if precision == "fp32" else f" {precision}")
    log(f"{what}: {sum(len(d['scores']) for d in ours.values())} detections ({time.time() - t:.0f} s)")
    rep = {"ap_engine": coco_ap(ann_path, engine_cr), "ann": ann_path, "engine": ours, "annotations": ann}
    if not torchvision:
        return rep
    t = time.time()
    ref = run_torchvision(load_torchvision(weights, threads), img_dir, ann, agnostic=agnostic)
    tv_res = coco_results(ref)
    tv_cr = os.path.join(work, "torchvision_agnostic_coco_results.json" if agnostic else "torchvision_coco_results.json")
    with open(tv_cr, "w") as f:
        json.dump(tv_res, f)
    log(f"torchvision{' + ops.nms over all classes' if agnostic else ''}: {len(tv_res)} detections "
        f"({time.time() - t:.0f} s)")
    rep.update(ap_torchvision=coco_ap(ann_path, tv_cr), match=match_all(ref, ours))
    return rep


def print_parity(rep, label):
    """The parity lines of one report; returns (same, accurate)."""
    accurate, same = True, True
    for kind in ("bbox", "segm"):
        e, t = rep["ap_engine"][kind], rep["ap_torchvision"][kind]
        print(f"{kind:4s}  {label} AP {e[0]:.4f} AP50 {e[1]:.4f} AP75 {e[2]:.4f} | torchvision AP {t[0]:.4f} "
              f"AP50 {t[1]:.4f} AP75 {t[2]:.4f} | |diff| {max(abs(x - y) for x, y in zip(e, t)):.5f}")
        accurate &= e[1] >= 0.9
        same &= all(abs(x - y) <= 0.001 for x, y in zip(e, t))
    m = rep["match"]
    print(f"detections: torchvision {m['ref']}, {label} {m['ours']}, matched {m['matched']} "
          f"(class, box IoU >= 0.99, score within 1e-3), near-ties at a cut {m['ties']}, "
          f"other unmatched {len(m['bad'])}")
    print(f"matched pairs: min box IoU {m['min_box_iou']:.6f}, max score difference {m['max_score_diff']:.2e}, "
          f"min mask IoU {m['min_mask_iou']:.4f}")
    for line in m["bad"][:20]:
        print("  " + line)
    same &= not m["bad"]
    return same, accurate


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=200)
    ap.add_argument("--weights", default=WEIGHTS)
    ap.add_argument("--work", default=os.path.join(REPO, "build", "shapes_eval"))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--no-torchvision", action="store_true", help="the engine only: no parity check")
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16", "int8"],
                    help="the engine's CPU arithmetic (bf16: AVX512_BF16 or AMX; int8: with the ranges beside the "
                         "weights, detect calibrate); the parity check against torchvision (fp32) is meant for "
                         "fp32, so bf16 and int8 imply --no-torchvision")
    ap.add_argument("--demo-score", default=str(DEMO_SCORE),
                    help="the demo's drawing threshold, or several, comma-separated, to compare")
    ap.add_argument("--seed", type=int, default=shapes_data.HELDOUT_SEED,
                    help=f"the scenes' seed (held-out {shapes_data.HELDOUT_SEED}; the demo's threshold was chosen "
                         f"on validation seed {shapes_data.VALIDATION_SEED})")
    a = ap.parse_args()
    try:
        scores = [float(v) for v in a.demo_score.split(",")]
    except ValueError:
        ap.error(f"--demo-score {a.demo_score}: not a number or a comma-separated list of numbers")
    os.makedirs(a.work, exist_ok=True)
    tv = not a.no_torchvision and a.precision == "fp32"
    ann_path = write_scenes(a.work, a.count, a.seed)
    reps = {agn: evaluate(ann_path, a.weights, a.work, a.threads, agnostic=agn, torchvision=tv, precision=a.precision)
            for agn in (False, True)}
    same, accurate = True, True
    if tv:
        for agn, label in ((False, "engine"), (True, "engine --agnostic-nms")):
            s, acc = print_parity(reps[agn], label)
            same &= s
            accurate &= acc if not agn else True
        print(f"parity with torchvision (every detection matched, AP within 0.001; with --agnostic-nms against "
              f"torchvision + ops.nms over all classes): {'OK' if same else 'FAILED'}")
        print(f"accuracy target (box and mask AP50 >= 0.9): {'met' if accurate else 'NOT MET'}")
    print(f"\nwhat the demo draws at {a.precision} (score > {a.demo_score}) on {a.count} scenes of seed {a.seed}, against "
          f"shapes_data.py's ground truth (right class, box IoU >= 0.5); AP over all detections "
          f"(score > {SCORE_THRESH}):")
    print(f"{'':28s} {'recall':>7s} {'precision':>9s} {'exact scenes':>12s} {'other class':>11s} "
          f"{'same class':>10s} {'background':>10s} {'box AP':>7s} {'mask AP':>7s}")
    for agn, nms in ((False, "per-class NMS"), (True, "+ agnostic NMS")):
        r = reps[agn]
        for score in scores:
            m = scene_metrics(r["annotations"], r["engine"], score)
            label = f"{nms}, > {score:g}"
            print(f"{label:28s} {m['recall']:7.3f} {m['precision']:9.3f} {m['exact']:12.3f} {m['other_class']:11d} "
                  f"{m['same_class']:10d} {m['background']:10d} {r['ap_engine']['bbox'][0]:7.3f} "
                  f"{r['ap_engine']['segm'][0]:7.3f}")
            print(f"{'':28s} ({m['found']} of {m['objects']} objects found, {m['detections']} detections, "
                  f"{m['exact_scenes']} of {m['scenes']} scenes exact)")
    return 0 if same and accurate else 1


if __name__ == "__main__":
    sys.exit(main())
