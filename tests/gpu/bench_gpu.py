#!/usr/bin/env python3
"""GPU latency and throughput of ours against torchvision eager on the same GPU (tests/gpu/bench.sh).

  bench_gpu.py --work DIR [--device cuda|cpu] [--rounds R] [--runs N] [--batch K] [--jpegs J] [--min-size S]
               [--no-compile] [--tp-images I] [--tp-budget S] [--tp-run-limit S] [--tp-work DIR] [--deadline T]

1. Seeded torchvision Mask R-CNN R-101-FPN (tests/parity/oracle.py, seed 0),
   its weights exported for our engine; a synthetic 800x1216 image (the
   COCO-test input size) and K (default 50) seeded photo-like images of
   mixed sizes and orientations, 480x640 .. 1200x1600 (bench/bench_cpu.py's
   batch).
2. Per-stage latency on the 800x1216 image, R alternating rounds: in each
   round every variant once, in turn: ours (build-gpu/detect --profile-runs
   N: one warm-up run, then N measured runs, stage times from the GPU's
   events, the whole pass one CUDA graph) for fp32/tf32 x fold/--no-fold and
   fp16; tf32 and fp16 "staged" (MR_CUDA_DEVICE_COUNTS=0: counts copied
   back, a graph per feature-map stage, the design before bench/NOTES.md
   section 25); tf32 without CUDA graphs (MR_CUDA_GRAPHS=0); and torchvision
   eager fp32, tf32 and fp16 (torch.autocast; 3 warm-up forwards, then N
   runs, synchronised after each stage). The table gives the median over all
   measured runs, per stage and end to end (model time: decode and output
   excluded for both), each variant's ratio to torchvision eager of the same
   precision, and issue 35's targets.
   Then: --profile's overhead (wall per image over copies of the image,
   with and without it); the demo model's stages in each precision.
3. Issue 36's throughput, right after the latency table (before the
   overhead, the demo model and the sections below, which are older and
   give way when time is short), its tables printed last of
   all (also when a timeout stops the script) and written to
   WORK/throughput.md, in markdown for bench/NOTES.md. Two folders of I
   (default 400; the issue's figure is 2,000) JPEGs from
   bench/make_photo_folder.py, under --tp-work: COCO-sized mixed sizes, and
   every image 640x480. For tf32 and fp16 (the dry run: the CPU's fp32),
   each folder, and --in-flight default, 1, 2, 4 (the default's count, read
   from detect -v's in-flight line, is not run twice): images/s of
   `detect --json FILE --output DIR` from the model loaded (detect -v's
   model line) to the last output written; the load's seconds; GPU memory
   per context and in all (the in-flight line) and nvidia-smi's peak;
   "sizes seen" once detect reports it; and whether the --json document and
   every per-image file equal the --in-flight 1 run's, byte for byte. A
   detect without --in-flight gives "not available" for those rows. The
   runs go in order of what matters most (the defaults, then one at a
   time, then 2 and 4) while --tp-budget (150 s) lasts, each stopped after
   --tp-run-limit (60 s). Targets, on the default count over the mixed
   folder: fp16 >= 500 images/s, tf32 >= 350, mixed >= 0.9x same-size,
   outputs byte-identical; each PASS or MISS.
4. Peak GPU memory. torchvision: torch.cuda.max_memory_allocated (tensors)
   and max_memory_reserved (its caching allocator's pool), reset per variant.
   Ours reports no allocator figure, so for both the per-process used memory
   that nvidia-smi reports (context, cuDNN/cuBLAS handles and workspaces
   included) is sampled every 20 ms while the variant runs; the peak is shown.
5. Throughput over the K images, file to pasted masks (decode included, the
   model load and one warm-up image excluded): ours tf32, fp32 and fp16 (one
   process each over the folder; images/s from --profile-json's `finished`
   times, so decoding ahead on --decode-threads counts as overlapped) and
   torchvision eager tf32 and fp32 (after 3 warm-ups, synchronised per image,
   decode in turn as a plain loop does).
6. The issue's folder of J (default 500) JPEGs, COCO-sized (640x480 and
   480x640, quality 90): ours tf32 with the default --decode-threads and with
   0 (decode in turn), ours fp16 decoding ahead, torchvision eager tf32;
   target >= 200 images/s.
7. Last, the peers at their best on the same GPU, each row printed as it is
   measured, with its detections and torch's peak allocated MiB (beyond
   the weights and input):
   torchvision's whole forward with cudnn.benchmark (CUDA events, no sync
   between stages) in fp32, tf32 and fp16; detectron2 eager in the same
   three (its model zoo's mask_rcnn_R_101_FPN_3x.yaml, carried as source in
   tests/gpu/deps/detectron2 by tests/gpu/fetch_detectron2.sh, no compiled
   detectron2._C; the seeded weights above in its names, the stem conv
   reversed for BGR and scaled for 0..255 input as tests/parity/oracle_d2.py
   does; 3 warm-ups, then N runs of model([{"image", "height", "width"}]):
   its normalization, padding to 32, box scaling and mask paste at the image
   size; a row says so where it is not carried); and torch.compile of
   torchvision's backbone and FPN (unless --no-compile; what fails is
   printed).

--device cpu with a small --min-size runs every part of this script on a
machine without a GPU (bench.sh --dry-run): the numbers mean nothing then."""

import argparse
import hashlib
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "parity"))
sys.path.insert(0, os.path.join(REPO, "bench"))
BUILD = os.environ.get("DETECT_BUILD", os.path.join(REPO, "build-gpu"))
CONFIG = os.path.join(REPO, "configs", "mask_rcnn_R-101-FPN_torchvision.json")
STAGES = ["preprocess", "backbone", "fpn", "rpn", "box_head", "mask_head", "mask_paste"]
# (precision, batchnorm folded, graph mode). Graph modes: "graph", the default (counts on the device,
# the whole pass one CUDA graph per image size: bench/NOTES.md section 25); "staged", the design before
# it (MR_CUDA_DEVICE_COUNTS=0: counts copied back, one graph per feature-map stage, the heads op by op);
# "nograph" (MR_CUDA_GRAPHS=0: every op issued one by one); "fusedz" (MR_CUDA_FUSED_Z=1: the residual as
# cuDNN's z input, one pass instead of conv + bias/ReLU pass; opt-in until a device run checks it end to end);
# "find" (MR_CUDA_CONV_FIND=1: each convolution's algorithm measured by cuDNN's Find at the first image of a
# size instead of the heuristic's; bench/NOTES.md section 27 predicts its gain).
OUR_VARIANTS = [("fp32", True, "graph"), ("fp32", False, "graph"), ("tf32", True, "graph"), ("tf32", False, "graph"),
                ("fp16", True, "graph"), ("tf32", True, "fusedz"), ("fp16", True, "fusedz"), ("tf32", True, "find"),
                ("fp16", True, "find"), ("tf32", True, "staged"), ("fp16", True, "staged"), ("tf32", True, "nograph")]
MODE_ENV = {"graph": None, "staged": {"MR_CUDA_DEVICE_COUNTS": "0"}, "nograph": {"MR_CUDA_GRAPHS": "0"},
            "fusedz": {"MR_CUDA_FUSED_Z": "1"}, "find": {"MR_CUDA_CONV_FIND": "1"}}
# Issue 35's targets, model time at 800x1216 (ms).
TARGETS = {"tf32": 3.5, "fp16": 2.5, "fp32": 26.0}


def variant_name(prec, fold, mode):
    return f"ours {prec}{'' if fold else ' nofold'}{'' if mode == 'graph' else ' ' + mode}"

import torch  # noqa: E402
import oracle  # noqa: E402
import bench_cpu  # noqa: E402  (the batch's image list)


class GpuMemory:
    """Peak per-process used GPU memory (MiB) from nvidia-smi, sampled in a
    thread while a block runs; None where nvidia-smi is absent."""

    def __init__(self, enabled):
        self.enabled = enabled
        self.peak = {}

    def _sample(self):
        while not self._stop.is_set():
            try:
                out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory",
                                      "--format=csv,noheader,nounits"], capture_output=True, text=True,
                                     timeout=5).stdout
            except (OSError, subprocess.TimeoutExpired):
                return
            for line in out.splitlines():
                parts = [p.strip() for p in line.split(",")]
                if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
                    pid, mib = int(parts[0]), int(parts[1])
                    self.peak[pid] = max(self.peak.get(pid, 0), mib)
            self._stop.wait(0.02)

    def __enter__(self):
        self.peak = {}
        self._stop = threading.Event()
        if self.enabled:
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self.enabled:
            self._thread.join()

    def of(self, pid=None):
        """Peak of `pid`, or of every process but this one (a child we ran)."""
        if not self.enabled:
            return None
        vals = [v for p, v in self.peak.items() if (p == pid if pid is not None else p != os.getpid())]
        return max(vals, default=None)


def write_config(work, min_size, max_size):
    with open(CONFIG) as f:
        cfg = json.load(f)
    cfg["input"]["min_size"], cfg["input"]["max_size"] = min_size, max_size
    path = os.path.join(work, "config.json")
    with open(path, "w") as f:
        json.dump(cfg, f, indent=1)
    return path


def run_ours(a, cfg, images, args, mem, env=None):
    """One detect process (env: more environment variables); its
    --profile-json runs, and its peak GPU memory."""
    pj = os.path.join(a.work, "profile.json")
    cmd = [os.path.join(BUILD, "detect"), "--config", cfg, "--weights", os.path.join(a.work, "w.safetensors"),
           "--device", a.device, "-q", "--profile-json", pj] + args + images
    with mem:
        r = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, **(env or {})))
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{r.stderr}")
    with open(pj) as f:
        return json.load(f)["runs"], mem.of()


def set_tf32(on):
    torch.backends.cuda.matmul.allow_tf32 = on
    torch.backends.cudnn.allow_tf32 = on


def sync_fn(dev):
    return torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)


def torch_stage_runs(model, img, dev, runs, fp16=False):
    """Per-run stage seconds of torchvision's eager forward, synchronised
    after each stage; fp16: under torch.autocast (GPU only)."""
    from torchvision.models.detection.roi_heads import maskrcnn_inference
    m, x, sync = model, oracle.image_tensor(img).to(dev), sync_fn(dev)
    out = []
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.float16, enabled=fp16 and dev.type == "cuda"):
        for it in range(3 + runs):
            sync()
            t = [time.perf_counter()]
            il, _ = m.transform([x])
            sync(); t.append(time.perf_counter())
            body = m.backbone.body(il.tensors)
            sync(); t.append(time.perf_counter())
            feats = m.backbone.fpn(body)
            sync(); t.append(time.perf_counter())
            props, _ = m.rpn(il, feats)
            sync(); t.append(time.perf_counter())
            rh = m.roi_heads
            cl, br = rh.box_predictor(rh.box_head(rh.box_roi_pool(feats, props, il.image_sizes)))
            boxes, scores, labels = rh.postprocess_detections(cl, br, props, il.image_sizes)
            sync(); t.append(time.perf_counter())
            mp = maskrcnn_inference(rh.mask_predictor(rh.mask_head(rh.mask_roi_pool(feats, boxes, il.image_sizes))),
                                    labels)
            sync(); t.append(time.perf_counter())
            m.transform.postprocess([dict(boxes=boxes[0], scores=scores[0], labels=labels[0], masks=mp[0])],
                                    il.image_sizes, [tuple(x.shape[-2:])])
            sync(); t.append(time.perf_counter())
            if it >= 3:
                run = {s: t[k + 1] - t[k] for k, s in enumerate(STAGES)}
                run["total"] = t[-1] - t[0]
                out.append(run)
    return out


def profile_overhead(a, cfg, png, gpu):
    """Wall time per image of `detect` over copies of one image, with and
    without --profile (the difference of 2 + N and 2 copies, so the load
    and the first two images, op by op and captured, drop out); alternating."""
    n = max(4, a.runs)
    folders = {}
    for count in (2, 2 + n):
        d = os.path.join(a.work, f"copies_{count}")
        os.makedirs(d, exist_ok=True)
        for k in range(count):
            dst = os.path.join(d, f"{k:03d}.png")
            if not os.path.exists(dst):
                shutil.copyfile(png, dst)
        folders[count] = d
    base = [os.path.join(BUILD, "detect"), "--config", cfg, "--weights", os.path.join(a.work, "w.safetensors"),
            "--device", a.device, "-q"] + (["--precision", "tf32"] if gpu else [])
    walls = {"off": [], "on": []}
    for _ in range(max(1, a.rounds)):
        for mode in ("off", "on"):
            t = {}
            for count, d in folders.items():
                cmd = base + (["--profile-json", os.path.join(a.work, "overhead.json")] if mode == "on" else []) + [d]
                t0 = time.perf_counter()
                subprocess.run(cmd, capture_output=True, check=True)
                t[count] = time.perf_counter() - t0
            walls[mode].append((t[2 + n] - t[2]) / n)
    off, on = statistics.median(walls["off"]), statistics.median(walls["on"])
    print(f"\n--profile's overhead ({'tf32, ' if gpu else ''}{n} replayed images, wall per image incl. decode and "
          f"output): off {off * 1000:.2f} ms, on {on * 1000:.2f} ms ({(on / off - 1) * 100:+.1f}%)")


def demo_model_table(a, gpu, mem):
    """The shipped shapes model (models/README.md) on one of its scenes: ours per stage, every precision."""
    cfg = os.path.join(REPO, "configs", "mask_rcnn_R-101-FPN_shapes.json")
    weights = os.path.join(REPO, "models", "shapes_r101_narrow.safetensors")
    scene = os.path.join(REPO, "examples", "shapes", "scene_1.png")
    precs = ("fp32", "tf32", "fp16") if gpu else ("fp32",)
    cols = {}
    for _ in range(a.rounds):
        for prec in precs:
            pj = os.path.join(a.work, "demo_profile.json")
            cmd = [os.path.join(BUILD, "detect"), "--config", cfg, "--weights", weights, "--device", a.device, "-q",
                   "--profile-runs", str(a.runs), "--profile-json", pj] + (["--precision", prec] if gpu else []) + [scene]
            subprocess.run(cmd, capture_output=True, check=True)
            with open(pj) as f:
                runs = json.load(f)["runs"]
            cols.setdefault(prec, []).extend(runs)
    print(f"\nthe demo model (shapes_r101_narrow) on {os.path.basename(scene)}, ms per stage, median")
    print(f"{'stage':<11}" + "".join(f"{'ours ' + p:>12}" for p in precs))
    for s in STAGES + ["total"]:
        vals = [statistics.median(sum(x[t] for t in STAGES) if s == "total" else x[s] for x in cols[p]) for p in precs]
        print(f"{s:<11}" + "".join(f"{v * 1000:>12.2f}" for v in vals))


def peers_at_their_best(model, img, dev, runs, compile_too):
    """torchvision on the same GPU at its best: the whole forward (no sync
    between stages) timed with CUDA events, cudnn.benchmark on; detectron2
    eager (detectron2_model); then torch.compile of torchvision's backbone
    and FPN (the whole model does not compile without graph breaks in its
    data-dependent heads), where it compiles. Each row is printed as it is
    measured (a timeout in torch.compile keeps the rows before it); what
    fails is printed as its row."""
    x = oracle.image_tensor(img).to(dev)
    gpu = dev.type == "cuda"
    torch.backends.cudnn.benchmark = True
    precs = ("fp32", "tf32", "fp16") if gpu else ("fp32",)

    def timed(forward, fp16, warm=5):
        """(median ms, detections in the last output, MiB: torch's peak allocated during the runs
        beyond what was allocated before them, i.e. without the weights of either model; None on the CPU)."""
        out, base = [], 0
        if gpu:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.float16, enabled=fp16 and gpu):
            for it in range(warm + runs):
                if not gpu:  # the dry run: the host clock
                    t0 = time.perf_counter()
                    n = forward()
                    if it >= warm:
                        out.append((time.perf_counter() - t0) * 1000)
                    continue
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                n = forward()
                e.record()
                torch.cuda.synchronize()
                if it >= warm:
                    out.append(s.elapsed_time(e))
        return statistics.median(out), n, (torch.cuda.max_memory_allocated() - base) / 2**20 if gpu else None

    def row(name, ms=None, n=None, peak=None):
        """One row; only its name where nothing was measured (not carried, failed)."""
        print(f"  {name:<80}{ms:>8.2f}{n:>6}{mib(peak):>9}" if ms is not None else f"  {name}", flush=True)

    def tv():
        return len(model([x])[0]["scores"])

    print(f"\npeers at their best on the same {'GPU' if gpu else 'CPU (dry run)'}, {img.shape[0]}x{img.shape[1]} "
          f"image, whole forward incl. paste, {'CUDA events' if gpu else 'host clock'}, median of {runs} (ms); "
          f"det: detections; MiB: torch's peak allocated beyond the weights and input")
    print(f"  {'':<80}{'ms':>8}{'det':>6}{'MiB':>9}")
    for prec in precs:
        set_tf32(prec == "tf32")
        row(f"torchvision eager, cudnn.benchmark, {prec}", *timed(tv, prec == "fp16"))
    detectron2_rows(model, img, dev, precs, timed, row)
    if compile_too:
        backbone = model.backbone
        try:
            t = time.time()
            model.backbone = torch.compile(backbone)
            set_tf32(True)
            ms, n, peak = timed(tv, False)
            row(f"torch.compile(backbone+fpn), tf32 (compiled in {time.time() - t:.0f} s + first runs)", ms, n, peak)
            row("torch.compile(backbone+fpn), fp16", *timed(tv, True))
        except Exception as e:  # what fails is part of the result
            row(f"torch.compile failed: {type(e).__name__}: {str(e)[:200]}")
        finally:
            model.backbone = backbone
    torch.backends.cudnn.benchmark = False


# detectron2 carried as source (tests/gpu/fetch_detectron2.sh): its package, the two model zoo
# configs and the pure-Python packages its import needs.
D2_DIR = os.path.join(HERE, "deps", "detectron2")
D2_CONFIG = "COCO-InstanceSegmentation/mask_rcnn_R_101_FPN_3x.yaml"


def detectron2_model(model, dev):
    """detectron2's own R-101-FPN Mask R-CNN (its model zoo config, eager,
    no detectron2._C: ROIAlign and NMS are torchvision's) with the seeded
    weights of `model` (oracle.py, seed 0) in detectron2's names
    (zoo_checkpoints.d2_tensors: background class last, no background rows
    in bbox_pred and the mask predictor); the stem conv's input channels
    reversed for detectron2's BGR input and divided by
    oracle_d2.STEM_INPUT_SCALE for its 0..255 range, as
    tests/parity/test_detectron2_e2e.py does (unscaled, the scores saturate
    near 1.0 and 14 detections remain on the synthetic image, not 100). detectron2 keeps its own conventions (stride in the 1x1
    conv, ROIAlignV2, its anchors and paste), so its detections are not
    torchvision's, only as many."""
    for p in (D2_DIR, os.path.join(D2_DIR, "site")):
        if p not in sys.path:
            sys.path.append(p)  # after the installed packages: the machine's own come first
    import numpy as np
    import oracle_d2
    import zoo_checkpoints
    from detectron2.config import get_cfg
    from detectron2.modeling import build_model
    cfg = get_cfg()
    cfg.merge_from_file(os.path.join(D2_DIR, "configs", D2_CONFIG))
    cfg.MODEL.DEVICE = dev.type
    d2 = build_model(cfg).eval()
    canon, _ = oracle.convert.convert_state_dict(oracle.state_dict_numpy(model), "torchvision", "f32")
    stem = canon["backbone.stem.conv.weight"]
    canon["backbone.stem.conv.weight"] = np.ascontiguousarray(stem[:, ::-1] / oracle_d2.STEM_INPUT_SCALE)
    sd, _ = zoo_checkpoints.d2_tensors(canon)
    d2.load_state_dict({k: torch.from_numpy(v) for k, v in sd.items()}, strict=True)
    return d2.to(dev)


def detectron2_rows(model, img, dev, precs, timed, row):
    """detectron2 eager beside torchvision in peers_at_their_best: the whole
    model([{"image": CHW BGR float 0..255 on the device, "height", "width"}])
    call, i.e. its preprocessing (mean subtraction, padding to 32), the
    network and its postprocessing (boxes scaled, masks pasted at the image
    size, >= 0.5); no resize (the image is at the test size already). 3
    warm-ups, then the same runs as the other peers. A row says why where
    detectron2 is not carried or fails."""
    if not os.path.isdir(os.path.join(D2_DIR, "detectron2")):
        row("detectron2 eager: not carried (run tests/gpu/fetch_detectron2.sh, carry tests/gpu/deps)")
        return
    try:
        t = time.time()
        d2 = detectron2_model(model, dev)
    except Exception as e:  # what fails is part of the result
        row(f"detectron2 failed to build: {type(e).__name__}: {str(e)[:200]}")
        return
    built = time.time() - t
    h, w = img.shape[:2]
    x = torch.from_numpy(img[:, :, ::-1].copy()).permute(2, 0, 1).float().to(dev)

    def forward():
        return len(d2([{"image": x, "height": h, "width": w}])[0]["instances"])

    for prec in precs:
        set_tf32(prec == "tf32")
        try:
            with warnings.catch_warnings():  # its anchors' torch.meshgrid without indexing=, once, amid the table
                warnings.filterwarnings("ignore", message="torch.meshgrid")
                res = timed(forward, prec == "fp16", warm=3)
            row(f"detectron2 eager, cudnn.benchmark, {prec} (incl. its normalize, pad to 32, paste)", *res)
        except Exception as e:  # what fails is part of the result
            row(f"detectron2 {prec} failed: {type(e).__name__}: {str(e)[:200]}")
    with open(os.path.join(D2_DIR, "SOURCE.txt")) as f:
        source = f.readline().strip()
    print(f"  ({source}; built, oracle.py's seed-0 weights loaded in its names, in {built:.0f} s)")
    del d2
    if dev.type == "cuda":
        torch.cuda.empty_cache()


def torch_files(model, paths, dev):
    """Seconds per file, decode (PIL) to pasted masks on the host, after 3 warm-ups."""
    from PIL import Image
    import numpy as np
    sync, out = sync_fn(dev), []
    with torch.no_grad():
        for k, p in enumerate(paths[:3] + paths):
            sync()
            t0 = time.perf_counter()
            with Image.open(p) as im:
                img = np.array(im.convert("RGB"), dtype=np.uint8)
            r = model([oracle.image_tensor(img).to(dev)])[0]
            r["masks"].cpu()
            sync()
            if k >= 3:
                out.append(time.perf_counter() - t0)
    return out


def steady_rate(runs):
    """Images per second of ours after the warm-up image (runs[0]): from
    its end to the last image's end, by detect's own clock."""
    span = bench_cpu.finished_span(runs)
    return (len(runs) - 1) / span if span > 0 else float("nan")


def make_jpegs(work, count, scale):
    """`count` seeded COCO-sized scenes (640x480, every third one 480x640),
    JPEG quality 90, as a folder of photos gives them."""
    from PIL import Image
    d = os.path.join(work, "jpegs")
    os.makedirs(d, exist_ok=True)
    paths = []
    for i in range(count):
        h, w = (480, 640) if i % 3 else (640, 480)
        h, w = max(32, round(h * scale)), max(32, round(w * scale))
        p = os.path.join(d, f"img_{i:04d}.jpg")
        if not os.path.exists(p):
            Image.fromarray(oracle.make_synthetic_image(h, w, 1000 + i)).save(p, quality=90)
        paths.append(p)
    return paths


# Issue 36: images/s over a folder of JPEGs, file to --json (RLE) plus --output DIR, with N images in flight
# (--in-flight N: N execution contexts, each on its own stream with its own CUDA graphs). The targets are
# judged on the default in-flight count over the mixed folder, what a user gets on a real folder.
TP_TARGETS = {"fp16": 500.0, "tf32": 350.0}
TP_MIXED_RATIO = 0.9
TP_IN_FLIGHT = ("default", 1, 2, 4)
TP_SAME_SIZE = "640x480"  # COCO val2017's most common size
# detect -v, once its contexts exist: "detect: in flight: N on cuda:0; device memory per context: A, B MiB;
# in all T MiB" (on the CPU "detect: in flight: N on cpu", no memory part).
IN_FLIGHT_RE = re.compile(r"^detect: in flight: (\d+) on (\S+?)(?:; device memory per context: ([0-9., ]+) MiB; "
                          r"in all ([0-9.]+) MiB)?\s*$")
# detect -v's model line, printed once the model is loaded and the inputs planned: the clock starts there.
MODEL_LINE_RE = re.compile(r"^detect: .* \(\d+ classes\), weights ")
# A hook: detect does not yet say how many input sizes it saw (and warmed); a line such as
# "detect: 35 input sizes seen" or "sizes seen: 35" fills the column when it does.
# "warming up to them: 3.2 s of host time": the host time the contexts spent on a size's first passes
WARM_RE = re.compile(r"warming up to them: ([\d.]+) s")
SIZES_SEEN_RE = re.compile(r"(\d+) (?:network |input |padded )?sizes seen|sizes seen:? (\d+)")


def detect_has_option(flag):
    """Whether build/detect's --help lists `flag` (a variant whose flag is missing prints "not available")."""
    r = subprocess.run([os.path.join(BUILD, "detect"), "--help"], capture_output=True, text=True)
    return flag in r.stdout


def make_photo_folders(work, count):
    """bench/make_photo_folder.py's two folders of `count` JPEGs, made side by side: COCO-sized mixed
    sizes (seed 1) and every image TP_SAME_SIZE; a folder whose sizes.tsv lists `count` files is reused.
    Returns {"mixed": path, "same": path}; raises RuntimeError with the script's message."""
    script = os.path.join(REPO, "bench", "make_photo_folder.py")
    folders = {"mixed": os.path.join(work, f"mixed_{count}"), "same": os.path.join(work, f"same_{count}")}
    procs = {}
    for kind, d in folders.items():
        tsv = os.path.join(d, "sizes.tsv")
        if os.path.exists(tsv) and sum(1 for _ in open(tsv)) == count + 1:
            continue
        args = [sys.executable, script, d, "--count", str(count)]
        args += ["--same-size", TP_SAME_SIZE] if kind == "same" else []
        procs[kind] = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for kind, p in procs.items():
        out = p.communicate()[0]
        if p.returncode != 0:
            raise RuntimeError(f"make_photo_folder.py {folders[kind]} failed:\n{out[-2000:]}")
    return folders


def folder_sizes(folder, min_size, max_size):
    """(image sizes, network input sizes at this config's resize, padded to /32) of a made folder."""
    import make_photo_folder
    with open(os.path.join(folder, "sizes.tsv")) as f:
        sizes = {(int(h), int(w)) for _, w, h in (line.split("\t") for line in list(f)[1:])}
    return len(sizes), len({make_photo_folder.network_size(h, w, min_size, max_size) for h, w in sizes})


def tp_run(a, cfg, folder, prec, in_flight, mem, timeout):
    """One detect over `folder` with --json and --output (and -v for the in-flight line). images/s runs
    from detect -v's model line (the model loaded) to the last output written (the --json document's and
    the per-image files' modification times), so neither the load nor the process's exit counts. The
    per-image outputs are hashed, then removed. Returns a dict; "error" says why a run gave no rate."""
    tag = f"{os.path.basename(folder)}_{prec}_{in_flight}"
    doc, outd = os.path.join(a.tp_work, tag + ".json"), os.path.join(a.tp_work, tag)
    shutil.rmtree(outd, ignore_errors=True)
    cmd = [os.path.join(BUILD, "detect"), "--config", cfg, "--weights", os.path.join(a.work, "w.safetensors"),
           "--device", a.device, "-q", "-v", "--json", doc, "--output", outd]
    cmd += (["--precision", prec] if a.device == "cuda" else []) + \
        ([] if in_flight == "default" else ["--in-flight", str(in_flight)]) + [folder]
    lines = []

    def read(stream):
        for line in stream:
            lines.append((time.time(), line.rstrip("\n")))

    res = {"doc": doc, "error": None}
    with mem:
        t0 = time.time()
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, errors="replace")
        reader = threading.Thread(target=read, args=(p.stderr,), daemon=True)
        reader.start()
        try:
            rc = p.wait(timeout=max(1.0, timeout))
        except subprocess.TimeoutExpired:
            rc = None
        finally:  # also on SIGTERM's SystemExit: no detect outlives the bench
            if p.poll() is None:
                p.kill()
                p.wait()
        reader.join(5)
    res["smi"] = mem.of()
    last = next((line for _, line in reversed(lines) if line.strip() and not (
        IN_FLIGHT_RE.match(line) or MODEL_LINE_RE.match(line) or SIZES_SEEN_RE.search(line))), "")
    if rc is None:
        res["error"] = f"timed out after {timeout:.0f} s"
    elif rc != 0:
        res["error"] = f"exit {rc}: {last[:120]}"
    for t, line in lines:
        m = IN_FLIGHT_RE.match(line)
        if m:
            res["n"], res["on"] = int(m.group(1)), m.group(2)
            res["per_ctx"] = [float(v) for v in m.group(3).split(",")] if m.group(3) else None
            res["total_mib"] = float(m.group(4)) if m.group(4) else None
        m = SIZES_SEEN_RE.search(line)
        if m and line.startswith("detect:"):
            res["sizes_seen"] = int(m.group(1) or m.group(2))
            w = WARM_RE.search(line)
            if w:
                res["sizes_seen"] = f"{res['sizes_seen']} ({float(w.group(1)):.1f} s)"
    ready = next((t for t, line in lines if MODEL_LINE_RE.match(line)), None)
    res["load"] = (ready or t0) - t0
    if res["error"] is None:
        files = [os.path.join(outd, f) for f in sorted(os.listdir(outd))] if os.path.isdir(outd) else []
        done = max(os.stat(f).st_mtime for f in files + [doc])
        with open(doc) as f:
            res["images"] = len(json.load(f)["images"])
        res["rate"] = res["images"] / max(done - (ready or t0), 1e-9)
        res["digests"] = {}
        for path in files:
            with open(path, "rb") as f:
                res["digests"][os.path.basename(path)] = hashlib.md5(f.read()).hexdigest()
    shutil.rmtree(outd, ignore_errors=True)
    return res


def throughput(a, cfg, gpu, mem, state):
    """Issue 36's measurements, into `state` (printed last by throughput_table): both folders, every
    precision, the default in-flight count and 1, 2, 4; in order of what matters most (the defaults,
    then one at a time, then the rest), each started only while --tp-budget lasts."""
    t_start = state["t_start"] = time.time()
    end = t_start + a.tp_budget
    if a.deadline:
        end = min(end, a.deadline - 15)
    os.makedirs(a.tp_work, exist_ok=True)
    state.update(images=a.tp_images, precs=("tf32", "fp16") if gpu else ("fp32",), runs={})
    try:
        state["folders"] = make_photo_folders(a.tp_work, a.tp_images)
    except (RuntimeError, OSError) as e:
        state["error"] = str(e)
        print(f"\nthroughput: {e}", flush=True)
        return
    max_size = a.min_size * 1333 // 800
    state["sizes"] = {k: folder_sizes(d, a.min_size, max_size) for k, d in state["folders"].items()}
    state["in_flight_flag"] = detect_has_option("--in-flight")
    print(f"\nthroughput (issue 36): folders of {a.tp_images} JPEGs made in {time.time() - t_start:.1f} s; "
          f"--in-flight {'available' if state['in_flight_flag'] else 'not available in this build'}", flush=True)
    order = [(f, p, "default") for p in state["precs"] for f in ("mixed", "same")]
    order += [(f, p, 1) for f in ("mixed", "same") for p in state["precs"]]
    order += [(f, p, n) for n in (2, 4) for f in ("mixed", "same") for p in state["precs"]]
    runs, took = state["runs"], {}
    for folder, prec, n in order:
        key = (folder, prec, n)
        default = runs.get((folder, prec, "default"))
        if n != "default" and not state["in_flight_flag"]:
            runs[key] = {"error": "not available (detect has no --in-flight)"}
            continue
        if n != "default" and default and default.get("n") == n:
            runs[key] = dict(default, same_as_default=True)
            continue
        # Not started when less is left than the quickest run over this folder took: it would be stopped.
        left = end - time.time()
        if left < min(took.get(folder, []), default=5):
            runs[key] = {"error": "skipped: --tp-budget spent"}
            continue
        t = time.time()
        runs[key] = tp_run(a, cfg, state["folders"][folder], prec, n, mem, min(left, a.tp_run_limit))
        took.setdefault(folder, []).append(time.time() - t)
        r = runs[key]
        print(f"  {folder:<5} {prec} in flight {n}{' (' + str(r['n']) + ')' if r.get('n') else ''}: "
              f"{r['error'] or format(r['rate'], '.1f') + ' images/s'} ({time.time() - t:.1f} s)", flush=True)
    state["seconds"] = time.time() - t_start


def same_outputs(r, ref):
    """Whether run r wrote the same bytes as the one-at-a-time run ref: its --json document and every
    per-image file of --output."""
    with open(r["doc"], "rb") as f, open(ref["doc"], "rb") as g:
        doc_same = f.read() == g.read()
    files = set(r["digests"]) | set(ref["digests"])
    differ = sum(r["digests"].get(k) != ref["digests"].get(k) for k in files)
    if doc_same and not differ:
        return True, "identical"
    return False, (f"DIFFERS: --json {'differs' if not doc_same else 'equal'}, "
                   f"{differ} of {len(files)} --output files differ")


def throughput_table(state, name):
    """The throughput section's tables, in markdown for bench/NOTES.md, as text."""
    out = []
    if "images" not in state:
        return f"## Throughput (issue 36), {name}\n\nnot run: the bench stopped before the section\n"
    gpu_run = any(p != "fp32" for p in state.get("precs", ()))
    out.append(f"## Throughput (issue 36): {state['images']} JPEGs per folder, file to --json (RLE) + --output, {name}")
    out.append("")
    if state.get("error") or "folders" not in state:
        out.append(f"not run: {state.get('error', 'the section did not start')}")
        return "\n".join(out) + "\n"
    (mi, mn), (si, sn) = state["sizes"]["mixed"], state["sizes"]["same"]
    out.append(f"mixed: bench/make_photo_folder.py --count {state['images']} (COCO val2017's sizes: {mi} image sizes, "
               f"{mn} network input sizes at this config's resize); same: --same-size {TP_SAME_SIZE} ({sn} network "
               f"input size). The issue's figure is 2,000 images; {state['images']} here"
               f"{' (a dry run on the CPU: the numbers mean nothing)' if not gpu_run else ''}. images/s: from the "
               f"model loaded (detect -v's model line) to the last output written; load: seconds before that. "
               f"MiB per context and in all: detect -v's in-flight line; nvidia-smi: the process's peak.")
    out.append("")
    out.append("| precision | in flight | folder | images/s | load s | MiB per context | MiB in all | "
               "nvidia-smi peak MiB | sizes seen (warm-up s) | outputs vs --in-flight 1 |")
    out.append("|---|---|---|---|---|---|---|---|---|---|")
    runs = state["runs"]
    compared, identical = 0, 0
    for prec in state["precs"]:
        for n in TP_IN_FLIGHT:
            for folder in ("mixed", "same"):
                r = runs.get((folder, prec, n))
                if r is None:
                    r = {"error": "not run (stopped before it)"}
                label = str(n)
                if n == "default":
                    label = f"default ({r['n']})" if r.get("n") else \
                        "default (1: no --in-flight yet)" if not state.get("in_flight_flag") else "default (?)"
                if r.get("error"):
                    out.append(f"| {prec} | {label} | {folder} | {r['error']} | | | | | | |")
                    continue
                if r.get("same_as_default"):
                    out.append(f"| {prec} | {label} | {folder} | = default ({r['rate']:.1f}) | | | | | | |")
                    continue
                per = r.get("per_ctx")
                per_s = "n/r" if per is None else f"{len(per)} x {per[0]:.1f}" if len(set(per)) == 1 and len(per) > 1 \
                    else ", ".join(f"{v:.1f}" for v in per)
                total = f"{r['total_mib']:.1f}" if r.get("total_mib") is not None else "n/r"
                ref = runs.get((folder, prec, 1))
                if n == 1 or (n == "default" and r.get("n") == 1):
                    vs = "(the reference)"
                elif n == "default" and not state.get("in_flight_flag"):
                    vs = "n/a (one at a time already)"
                elif not ref or ref.get("error"):
                    vs = "n/a (no --in-flight 1 run)"
                else:
                    ok, vs = same_outputs(r, ref)
                    compared, identical = compared + 1, identical + ok
                out.append(f"| {prec} | {label} | {folder} | {r['rate']:.1f} | {r['load']:.1f} | {per_s} | {total} | "
                           f"{mib(r.get('smi'))} | {r.get('sizes_seen', 'n/r')} | {vs} |")
    out.append("")
    out.append("n/r: detect did not report it. Targets (issue 36; the default in-flight count, the mixed folder):")
    out.append("")
    out.append("| target | measured | verdict |")
    out.append("|---|---|---|")

    def rate(folder, prec, n="default"):
        r = runs.get((folder, prec, n)) or {}
        return r.get("rate")

    for prec, target in TP_TARGETS.items():
        v = rate("mixed", prec)
        if v is None:
            out.append(f"| {prec} >= {target:.0f} images/s | n/a | n/a |")
            continue
        best = max((rate("mixed", prec, n) or 0, n) for n in (1, 2, 4))
        best_s = f" (best: {best[0]:.1f} at --in-flight {best[1]})" if best[0] > v else ""
        out.append(f"| {prec} >= {target:.0f} images/s | {v:.1f}{best_s} | {'PASS' if v >= target else 'MISS'} |")
    for prec in TP_TARGETS:
        m, s = rate("mixed", prec), rate("same", prec)
        out.append(f"| {prec} mixed >= {TP_MIXED_RATIO}x same-size | " +
                   (f"{m / s:.2f}x ({m:.1f} / {s:.1f}) | {'PASS' if m >= TP_MIXED_RATIO * s else 'MISS'} |"
                    if m and s else "n/a | n/a |"))
    out.append(f"| outputs byte-identical to --in-flight 1 | " +
               (f"{identical} of {compared} runs identical | {'PASS' if identical == compared else 'MISS'} |"
                if compared else "n/a (nothing to compare) | n/a |"))
    if not gpu_run:
        out.append("")
        out.append("(dry run on the CPU: no fp16 or tf32, so the targets read n/a)")
    out.append("")
    spent = state.get("seconds", time.time() - state["t_start"])
    out.append(f"throughput section: {spent:.0f} s{'' if 'seconds' in state else ' (stopped before its end)'}")
    return "\n".join(out) + "\n"


def mib(v):
    return f"{v:.0f}" if v is not None else "n/a"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"], help="cpu: a dry run of this script")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds")
    ap.add_argument("--runs", type=int, default=10, help="measured runs per variant and round")
    ap.add_argument("--batch", type=int, default=50, help="images in the throughput batch (0: none)")
    ap.add_argument("--jpegs", type=int, default=500, help="COCO-sized JPEGs in the folder test (0: none)")
    ap.add_argument("--min-size", type=int, default=800, help="the resize's short side (dry runs: smaller)")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--no-compile", dest="compile", action="store_false", help="skip torch.compile's peer")
    ap.add_argument("--tp-images", type=int, default=400,
                    help="JPEGs in each of issue 36's two throughput folders (0: none; the issue's figure is 2000)")
    ap.add_argument("--tp-budget", type=float, default=150, help="seconds for the throughput section's runs")
    ap.add_argument("--tp-run-limit", type=float, default=60, help="seconds at most for one throughput run")
    ap.add_argument("--tp-work", default=os.path.join(tempfile.gettempdir(), "detect_throughput"),
                    help="the throughput folders and outputs (kept out of --work, which may be sent back)")
    ap.add_argument("--deadline", type=float, default=0,
                    help="Unix time by which the throughput section must have ended (0: none)")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    # The throughput table prints last, also when bench.sh's timeout stops this script (SIGTERM) in a
    # later section: the exit unwinds through the finally below.
    signal.signal(signal.SIGTERM, lambda sig, frame: sys.exit(128 + sig))
    state = {}
    try:
        return bench(a, state)
    finally:
        if a.tp_images > 0:
            print("\n" + write_throughput(a, state), flush=True)


def write_throughput(a, state):
    """The throughput tables into WORK/throughput.md (device_run.sh prints that file last); returned."""
    table = throughput_table(state, state.get("device", "?"))
    with open(os.path.join(a.work, "throughput.md"), "w") as f:
        f.write(table)
    return table


def bench(a, state):
    """Every section in turn; issue 36's throughput measured into `state` (its table printed by main)."""
    torch.set_num_threads(a.threads)
    dev = torch.device(a.device)
    gpu = dev.type == "cuda"
    mem = GpuMemory(gpu and subprocess.run(["which", "nvidia-smi"], capture_output=True).returncode == 0)
    max_size = a.min_size * 1333 // 800
    h, w = a.min_size, a.min_size * 1216 // 800

    t = time.time()
    cfg = write_config(a.work, a.min_size, max_size)
    model = oracle.build_model(0, min_size=a.min_size, max_size=max_size)
    oracle.export_weights(model, os.path.join(a.work, "w.safetensors"))
    model = model.to(dev)
    img = oracle.make_synthetic_image(h, w, 0)
    png = os.path.join(a.work, f"synthetic_{h}x{w}.png")
    oracle.save_png(img, png)
    batch = []
    if a.batch > 0:
        bdir = os.path.join(a.work, "batch")
        os.makedirs(bdir, exist_ok=True)
        batch = bench_cpu.make_batch(bdir, scale=a.min_size / 800)[:a.batch]
    jpegs = make_jpegs(a.work, a.jpegs, a.min_size / 800) if a.jpegs > 0 else []
    name = torch.cuda.get_device_name(0) if gpu else "cpu (dry run)"
    state["device"] = name
    print(f"weights and {1 + len(batch) + len(jpegs)} images: {time.time() - t:.1f} s (torch {torch.__version__}, {name})",
          flush=True)

    # Per-stage latency, alternating rounds.
    cols = {variant_name(*v): [] for v in OUR_VARIANTS}
    cols.update({f"torch {p}": [] for p in ("fp32", "tf32", "fp16")})
    peak = {k: None for k in cols}
    torch_alloc = {}
    for r in range(a.rounds):
        t = time.time()
        for prec, fold, mode in OUR_VARIANTS:
            k = variant_name(prec, fold, mode)
            args = ["--profile-runs", str(a.runs)]
            if gpu:
                args += ["--precision", prec] + ([] if fold else ["--no-fold"])
            runs, m = run_ours(a, cfg, [png], args, mem, MODE_ENV[mode])
            cols[k] += [{s: x[s] for s in STAGES} for x in runs]
            for x in cols[k][-len(runs):]:
                x["total"] = sum(x[s] for s in STAGES)
            peak[k] = max(filter(None, [peak[k], m]), default=None)
        for prec in ("fp32", "tf32", "fp16"):
            k = f"torch {prec}"
            set_tf32(prec == "tf32")
            if gpu:
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats()
            with mem:
                cols[k] += torch_stage_runs(model, img, dev, a.runs, fp16=prec == "fp16")
            peak[k] = max(filter(None, [peak[k], mem.of(os.getpid())]), default=None)
            if gpu:
                torch_alloc[k] = (torch.cuda.max_memory_allocated() / 2**20, torch.cuda.max_memory_reserved() / 2**20)
        print(f"round {r + 1}/{a.rounds}: {time.time() - t:.1f} s", flush=True)

    names = list(cols)
    med = {k: {s: statistics.median(x[s] for x in cols[k]) for s in STAGES + ["total"]} for k in names}
    print(f"\n{'GPU' if gpu else 'DRY RUN on the CPU'}: {h}x{w} input, ms per stage, median of {a.rounds} rounds x {a.runs} runs "
          f"(model time: decode and output excluded)")
    print(f"{'stage':<11}" + "".join(f"{n:>19}" for n in names))
    for s in STAGES + ["total"]:
        print(f"{s:<11}" + "".join(f"{med[n][s] * 1000:>19.2f}" for n in names))
    print(f"{'vs torch':<11}" + "".join(
        f"{med[n]['total'] / med['torch ' + n.split()[1]]['total']:>18.2f}x" for n in names))
    print(f"{'GPU MiB':<11}" + "".join(f"{mib(peak[n]):>19}" for n in names) +
          "   (nvidia-smi, per process, peak while it ran)")
    if gpu:
        print("targets (issue 35): " + ", ".join(
            f"{p} {med['ours ' + p]['total'] * 1000:.2f} ms (<= {TARGETS[p]}: "
            f"{'met' if med['ours ' + p]['total'] * 1000 <= TARGETS[p] else 'NOT met'})" for p in TARGETS))
    for k, (al, rs) in torch_alloc.items():
        print(f"{k}: max_memory_allocated {al:.0f} MiB, max_memory_reserved {rs:.0f} MiB")

    # Issue 36 next: the sections below are older and come after it when time is short.
    if a.tp_images > 0:
        throughput(a, cfg, gpu, mem, state)
        write_throughput(a, state)  # now too: a later section that hangs past the timeouts loses nothing

    profile_overhead(a, cfg, png, gpu)
    demo_model_table(a, gpu, mem)

    if batch:
        print(f"\nthroughput over {len(batch)} images of mixed sizes, file to pasted masks")
        print(f"{'variant':<16}{'images/s':>10}{'median ms':>11}{'GPU MiB':>9}   (median ms: one image's own total)")
        res = {}
        for prec in ("tf32", "fp32", "fp16"):
            args = ["--precision", prec] if gpu else []
            runs, m = run_ours(a, cfg, [batch[0]] + batch, args, mem)
            res[f"ours {prec}"] = (steady_rate(runs), [x["total"] for x in runs[1:]], m)
            if prec == "fp16":
                continue  # torchvision's fp16 is in the latency table; its batch loop stays tf32/fp32
            set_tf32(prec == "tf32")
            with mem:
                tt = torch_files(model, batch, dev)
            res[f"torch {prec}"] = (len(tt) / sum(tt), tt, mem.of(os.getpid()))
        for k, (rate, ts, m) in res.items():
            print(f"{k:<16}{rate:>10.2f}{statistics.median(ts) * 1000:>11.2f}{mib(m):>9}")

    if jpegs:
        print(f"\na folder of {len(jpegs)} JPEGs ({jpegs[1] if len(jpegs) > 1 else jpegs[0]} ...), tf32, "
              f"file to pasted masks")
        print(f"{'variant':<26}{'images/s':>10}{'decode ms':>11}")
        args = ["--precision", "tf32"] if gpu else []
        set_tf32(True)
        rates = {}
        fp16 = ["--precision", "fp16"] if gpu else []
        for label, extra in (("ours, decoding ahead", []), ("ours, --decode-threads 0", ["--decode-threads", "0"]),
                             ("ours fp16, decoding ahead", None)):
            run_args = args + (extra or [])
            if extra is None:
                run_args = fp16 + ([] if gpu else ["--decode-threads", "1"])
            elif not gpu and not extra:
                run_args = args + ["--decode-threads", "1"]  # the CPU default is 0: show the path anyway
            runs, _ = run_ours(a, cfg, [jpegs[0]] + jpegs, run_args, mem)
            rates[label] = steady_rate(runs)
            dec = statistics.median(x["decode"] for x in runs[1:]) * 1000
            print(f"{label:<26}{rates[label]:>10.2f}{dec:>11.2f}")
        tt = torch_files(model, jpegs, dev)
        print(f"{'torch eager':<26}{len(tt) / sum(tt):>10.2f}")
        r, r16 = rates["ours, decoding ahead"], rates["ours fp16, decoding ahead"]
        if gpu:
            print(f"target (issue #8): >= 200 images/s over the folder: tf32 {r:.0f}, fp16 {r16:.0f} "
                  f"({'met' if max(r, r16) >= 200 else 'NOT met'})")
    # last: torch.compile takes minutes, and a call that runs out of time keeps everything above
    peers_at_their_best(model, img, dev, a.runs, a.compile and gpu)
    # A detect that failed in the throughput section fails the bench (a slow one, stopped, does not).
    failed = [k for k, r in state.get("runs", {}).items() if (r.get("error") or "").startswith("exit")]
    if failed:
        print(f"\nthroughput: detect failed in {len(failed)} runs: {', '.join(map(str, failed))}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
