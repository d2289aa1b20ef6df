"""Accuracy and parity of the shipped shapes model on held-out generated scenes.

    /usr/bin/python3 models/shapes/evaluate.py [--count 200] [--weights models/shapes_r101_narrow.safetensors]
                                               [--work build/shapes_eval] [--threads 1]

1. writes scenes 0..count-1 of shapes_data.HELDOUT_SEED (never used in training) with their
   COCO annotations to WORK/images/;
2. runs `build/detect --coco-results --json` on them (the engine);
3. runs torchvision 0.14 on the same PNGs with the same weights (the F16 file, widened to F32
   exactly) and the config's inference settings, and writes its COCO results;
4. prints box and mask AP (pycocotools COCOeval) of both result files, their differences, and
   the detection-by-detection match (class, box IoU >= 0.99, score within 1e-3; mask IoU).
Exits non-zero if AP50 < 0.9, if the APs differ by more than 0.001 or a detection is unmatched
(other than a near-tie at the 0.05 score threshold or the 100th score).  tests/parity/test_trained_model.py runs
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


def load_torchvision(weights, threads=1):
    """The FrozenBatchNorm torchvision model with the weights of a canonical safetensors file."""
    import torch
    import convert
    import safetensors_io
    import model as shapes_model
    torch.set_num_threads(threads)
    m = shapes_model.build_model(frozen_bn=True).eval()
    tensors, _ = safetensors_io.load(weights)
    fmt = convert.SOURCE_FORMATS["torchvision"]
    sd = {fmt.source_name(k): torch.from_numpy(v.astype(np.float32)) for k, v in tensors.items()}
    m.load_state_dict(sd, strict=True)
    return m


def run_torchvision(model, image_dir, ann):
    """torchvision detections per image id: dict(boxes, scores, labels, masks (bool HxW))."""
    import torch
    from PIL import Image
    out = {}
    with torch.no_grad():
        for im in ann["images"]:
            img = np.asarray(Image.open(os.path.join(image_dir, im["file_name"])).convert("RGB"))
            x = torch.from_numpy(img.copy()).permute(2, 0, 1).float() / 255
            r = model([x])[0]
            out[im["id"]] = {"boxes": r["boxes"].numpy().astype(np.float64), "scores": r["scores"].numpy(),
                             "labels": r["labels"].numpy(), "masks": r["masks"][:, 0].numpy() > 0.5}
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


def run_engine(image_dir, ann, work, weights, config=CONFIG, threads=1):
    """Runs build/detect on the scenes; returns (per-image detections from --json, --coco-results path)."""
    from pycocotools import mask as mask_util
    files = [os.path.join(image_dir, im["file_name"]) for im in ann["images"]]
    lst = os.path.join(work, "inputs.txt")
    with open(lst, "w") as f:
        f.write("\n".join(files) + "\n")
    js, cr = os.path.join(work, "engine.json"), os.path.join(work, "engine_coco_results.json")
    cmd = [DETECT, "--config", config, "--weights", weights, "--threads", str(threads), "-q",
           "--json", js, "--coco-results", cr, "--list", lst]
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


def evaluate(count, weights, work, threads=1, start=0, log=print):
    """Generates the held-out scenes, runs both, returns a report dict."""
    img_dir = os.path.join(work, "images")
    t = time.time()
    ann_path = shapes_data.write_dataset(img_dir, shapes_data.HELDOUT_SEED, count, start)
    ann = json.load(open(ann_path))
    log(f"{count} held-out scenes (seed {shapes_data.HELDOUT_SEED}, {len(ann['annotations'])} objects) "
        f"in {img_dir} ({time.time() - t:.0f} s)")
    t = time.time()
    ours, engine_cr = run_engine(img_dir, ann, work, weights, threads=threads)
    log(f"engine: {sum(len(d['scores']) for d in ours.values())} detections ({time.time() - t:.0f} s)")
    t = time.time()
    ref = run_torchvision(load_torchvision(weights, threads), img_dir, ann)
    tv_res = coco_results(ref)
    tv_cr = os.path.join(work, "torchvision_coco_results.json")
    with open(tv_cr, "w") as f:
        json.dump(tv_res, f)
    log(f"torchvision: {len(tv_res)} detections ({time.time() - t:.0f} s)")
    ap_engine, ap_tv = coco_ap(ann_path, engine_cr), coco_ap(ann_path, tv_cr)
    return {"ap_engine": ap_engine, "ap_torchvision": ap_tv, "match": match_all(ref, ours), "ann": ann_path}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=200)
    ap.add_argument("--weights", default=WEIGHTS)
    ap.add_argument("--work", default=os.path.join(REPO, "build", "shapes_eval"))
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    rep = evaluate(a.count, a.weights, a.work, a.threads)
    accurate, same = True, True
    for kind in ("bbox", "segm"):
        e, t = rep["ap_engine"][kind], rep["ap_torchvision"][kind]
        print(f"{kind:4s}  engine AP {e[0]:.4f} AP50 {e[1]:.4f} AP75 {e[2]:.4f} | torchvision AP {t[0]:.4f} "
              f"AP50 {t[1]:.4f} AP75 {t[2]:.4f} | |diff| {max(abs(x - y) for x, y in zip(e, t)):.5f}")
        accurate &= e[1] >= 0.9
        same &= all(abs(x - y) <= 0.001 for x, y in zip(e, t))
    m = rep["match"]
    print(f"detections: torchvision {m['ref']}, engine {m['ours']}, matched {m['matched']} "
          f"(class, box IoU >= 0.99, score within 1e-3), near-ties at a cut {m['ties']}, "
          f"other unmatched {len(m['bad'])}")
    print(f"matched pairs: min box IoU {m['min_box_iou']:.6f}, max score difference {m['max_score_diff']:.2e}, "
          f"min mask IoU {m['min_mask_iou']:.4f}")
    for line in m["bad"][:20]:
        print("  " + line)
    same &= not m["bad"]
    print(f"parity with torchvision (every detection matched, AP within 0.001): {'OK' if same else 'FAILED'}")
    print(f"accuracy target (box and mask AP50 >= 0.9): {'met' if accurate else 'NOT MET'}")
    return 0 if same and accurate else 1


if __name__ == "__main__":
    sys.exit(main())
