#!/usr/bin/python3
"""The demo model's accuracy in every engine of make bench-peers, at fp32 and int8 (and our bf16).

    build/venv-peers/bin/python bench/peers_demo_ap.py [--count 200] [--calibration 100] [--threads 2]

The shipped shapes model (models/shapes_r101_narrow.safetensors) on its held-out scenes (seed
2), box and mask AP by pycocotools (models/shapes/evaluate.py's coco_ap), per-class NMS:
- ours: build/detect --precision fp32, bf16 (where the CPU has it) and int8 with the ranges
  shipped beside the weights (detect calibrate on 100 training scenes, seed 1);
- torchvision eager (the venv's torch) at fp32;
- ONNX Runtime at fp32 and its static int8, OpenVINO (its own converter) at fp32 and its int8
  through NNCF, made exactly as bench_peers.py makes them for the seeded R-101 (the same
  functions: the Conv nodes outside roi_heads quantized), calibrated on the same 100 training
  scenes ours were, none of which is evaluated.
Writes build/bench_peers_ap.md. pycocotools comes from build/venv-test (make deps) on
PYTHONPATH, as the Makefile sets it."""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path[:0] = [HERE, os.path.join(REPO, "models", "shapes"), os.path.join(REPO, "models"),
                os.path.join(REPO, "tests", "parity")]
import numpy as np  # noqa: E402

import bench_peers  # noqa: E402
import evaluate  # noqa: E402
import shapes_data  # noqa: E402


def load_images(image_dir, ann):
    from PIL import Image
    return [(im["id"], np.asarray(Image.open(os.path.join(image_dir, im["file_name"])).convert("RGB")))
            for im in ann["images"]]


def peer_dets(peer, images):
    out = {}
    for image_id, img in images:
        b, l, s, m = peer.detect(img)
        out[image_id] = {"boxes": np.asarray(b, np.float64).reshape(-1, 4), "scores": np.asarray(s, np.float64),
                         "labels": np.asarray(l, np.int64), "masks": np.asarray(m) > 0.5}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--count", type=int, default=200, help="held-out scenes evaluated")
    ap.add_argument("--calibration", type=int, default=100, help="training scenes the int8 engines calibrate on")
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    import torch
    torch.set_num_threads(a.threads)
    t_start = time.perf_counter()
    rows, log = [], []

    def say(s):
        print(s, flush=True)
        log.append(s)

    with tempfile.TemporaryDirectory(prefix="detect-peers-ap-") as d:
        ann_path = evaluate.write_scenes(os.path.join(d, "heldout"), a.count, log=lambda s: None)
        ann = json.load(open(ann_path))
        image_dir = os.path.dirname(ann_path)
        cal_dir = os.path.join(d, "calibration")
        subprocess.run([sys.executable, os.path.join(REPO, "models", "shapes", "shapes_data.py"), cal_dir, "--seed",
                        str(shapes_data.TRAIN_SEED), "--count",
                        str(a.calibration)], check=True, capture_output=True)
        os.remove(os.path.join(cal_dir, "annotations.json"))
        images = load_images(image_dir, ann)
        calib = [np.ascontiguousarray(img.transpose(2, 0, 1)).astype(np.float32) / np.float32(255)
                 for _, img in load_images(cal_dir, {"images": [{"id": 0, "file_name": f}
                                                                for f in sorted(os.listdir(cal_dir))]})]

        # ours
        for precision in ("fp32", "bf16", "int8"):
            work = os.path.join(d, f"ours-{precision}")
            os.makedirs(work)
            try:
                _, cr = evaluate.run_engine(image_dir, ann, work, evaluate.WEIGHTS, threads=a.threads,
                                            precision=precision)
            except RuntimeError as e:
                say(f"ours {precision}: skipped: {str(e).strip().splitlines()[-1]}")
                continue
            rows.append(("ours", precision, "detect", evaluate.coco_ap(ann_path, cr)))

        # the peers, from the same torch model
        model = evaluate.load_torchvision(evaluate.WEIGHTS, a.threads)
        dets = evaluate.run_torchvision(model, image_dir, ann)
        rows.append(("torch", "fp32", f"torch {torch.__version__}", evaluate.coco_ap(ann_path,
                                                                                      evaluate.coco_results(dets))))
        info = {}
        x = torch.from_numpy(images[0][1].copy()).permute(2, 0, 1).float() / 255
        bench_peers.export_onnx(model, x, d, info)
        bench_peers.prepare_converted(d, model, x, info)
        if "model_export_s" in info:
            bench_peers.prepare_onnxruntime_int8(d, calib, info)
        if "ov_convert_s" in info:
            bench_peers.prepare_openvino_int8(d, calib, info)
        say(f"prepared: {json.dumps(info)}")
        for kind in ("onnxruntime", "onnxruntime-int8", "openvino-converted", "openvino-int8", "openvino-int8-heads"):
            if not os.path.exists(os.path.join(d, bench_peers.MODEL_FILE[kind])):
                say(f"{kind}: no model file (see prepared)")
                continue
            peer = bench_peers.OnnxPeer(d, a.threads, kind)
            t0 = time.perf_counter()
            res = evaluate.coco_results(peer_dets(peer, images))
            say(f"{kind}: {len(images)} scenes in {time.perf_counter() - t0:.0f} s")
            rows.append((kind, bench_peers.precision_of(kind), peer.version, evaluate.coco_ap(ann_path, res)))

    L = [f"# The demo model's accuracy in each engine, {time.strftime('%Y-%m-%d %H:%M')}", "",
         f"{a.count} held-out scenes (seed 2), per-class NMS, pycocotools; int8 engines calibrated on "
         f"{a.calibration} training scenes (seed 1). AP / AP50 / AP75.", "",
         "| engine | precision | version | box AP | mask AP |", "|---|---|---|---|---|"]
    for name, precision, version, r in rows:
        f = lambda t: " / ".join(f"{v:.3f}" for v in t)  # noqa: E731
        L.append(f"| {name} | {precision} | {version} | {f(r['bbox'])} | {f(r['segm'])} |")
    L += ["", "## Log", "", *[f"    {s}" for s in log], "",
          f"peers_demo_ap took {(time.perf_counter() - t_start) / 60:.1f} min"]
    text = "\n".join(L) + "\n"
    print("\n" + text)
    with open(os.path.join(REPO, "build", "bench_peers_ap.md"), "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
