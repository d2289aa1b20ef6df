#!/usr/bin/python3
"""mmdetection 3.3 itself as a test oracle: its own model, config, pipeline and post-processing.

mmdet, mmengine and mmcv-lite live in build/venv-mmdet (scripts/install_deps.sh, with the
torchvision shim for mmcv's two compiled ops: tests/mmdet/mmcv_ext.py), never in Debian's Python.
So this file has two sides:

  * the tests' side (Debian's /usr/bin/python3): run_oracle() runs this file with the venv's
    interpreter (mmdet_python(): `scripts/test_env.sh --mmdet-python`) and reads what it wrote.
    Importing this module needs only numpy;
  * the oracle's side (build/venv-mmdet/bin/python oracle_mmdet.py ...): main() and the functions
    under "Inside build/venv-mmdet", which import torch, mmengine and mmdet when called.

What the oracle does (one run):
  1. builds the model of an mmdet config: a file, or a name under the installed wheel's
     mmdet/.mim/configs (MASK_RCNN_R101 = mask_rcnn/mask-rcnn_r101_fpn_1x_coco.py), or a training
     config that `_base_`s on one; `cfg_options` are merged as mmdet's tools merge --cfg-options,
     and model.backbone.init_cfg is set to None (nothing is downloaded; init_detector never calls
     init_weights anyway);
  2. either loads a checkpoint (init_detector(cfg, checkpoint, device='cpu')) or fills every
     parameter and BatchNorm buffer from a seed (init_weights: the recipe of oracle.py, oracle.md
     §2, under mmdet's module names) and, with checkpoint_out, saves it as mmdet's publish tool
     writes a zoo file (save_checkpoint: {'meta', 'state_dict'}, torch's legacy format);
  3. runs inference_detector(model, img) on a BGR uint8 array.  The caller decodes the image
     (Pillow, or the array it passes), so mmdet's cv2 decoder and its EXIF handling play no part;
     mmdet's test pipeline (cv2 resize, normalisation, padding) and everything after it do;
  4. writes OUT.npz (np.savez_compressed): boxes [N,4] float32 (x1,y1,x2,y2, original image
     pixels), scores [N] float32, labels [N] int64 (0-based foreground class, mmdet's), masks
     [N,H,W] bool, ori_shape / img_shape (resized, unpadded) / pad_shape (h, w) int64,
     scale_factor (w, h) float64, num_classes, classes (names); with intermediates=True also
     what forward hooks saw (hook_* below: proposals, the box head's raw outputs, the mask RoIs and
     logits); with features=True also C2..C5 and P2..P6;
  5. prints one line `oracle_mmdet: {json}` with the timings (seconds) and counts.

Tests' side:
    MASK_RCNN_R101                      the stock R-101-FPN 1x config's name
    mmdet_python()                      the venv's interpreter, or OracleMissing ("run make deps")
    run_oracle(config, checkpoint_or_seed, image, out_npz, cfg_options=None, checkpoint_out=None,
               intermediates=False, features=False, bg_bias=0.0, threads=2, timeout=900)
        -> (results {name: ndarray}, report {timings and counts})
        checkpoint_or_seed: an int (seeded weights) or a checkpoint path; image: an image file
        (decoded with Pillow, RGB, then reversed to BGR) or a uint8 HxWx3 RGB ndarray; image and
        out_npz None: no inference (results None), e.g. to write checkpoint_out only.
CLI (inside the venv):
    oracle_mmdet.py --config CFG (--seed N | --checkpoint PTH) [--image IMG|ARRAY.npy --out OUT.npz]
                    [--checkpoint-out PTH] [--cfg-options-json JSON] [--intermediates] [--features]
                    [--bg-bias B] [--threads 2]
    ARRAY.npy holds uint8 HxWx3 in BGR order (what run_oracle writes); any other file is decoded
    with Pillow.

Hooks (intermediates): hook_rpn_cls_p{2..6} [A,H,W] and hook_rpn_reg_p{2..6} [4A,H,W] (the RPN
head's outputs: logits before the sigmoid, deltas); hook_box_rois [R,5] (batch, x1,y1,x2,y2: the
proposals in resized-image pixels, the box RoI extractor's input); hook_box_cls [R,K+1] and
hook_box_reg [R,4K or 4] (the box head's raw outputs, background last, before softmax, decoding
and NMS); hook_mask_rois [N,5] (the detections in resized-image pixels); hook_mask_logits
[N,K or 1,28,28].  A forward hook that returns a value replaces the module's output: these
return None.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
MASK_RCNN_R101 = "mask_rcnn/mask-rcnn_r101_fpn_1x_coco.py"
REPORT_PREFIX = "oracle_mmdet: "


class OracleMissing(RuntimeError):
    """build/venv-mmdet is not installed: the tests that need it fail with this message."""


# ---------------------------------------------------------------------------------------
# The tests' side (Debian's Python)
# ---------------------------------------------------------------------------------------

def mmdet_python():
    """The interpreter of build/venv-mmdet (scripts/test_env.sh --mmdet-python names it)."""
    path = subprocess.run(["bash", os.path.join(REPO, "scripts", "test_env.sh"), "--mmdet-python"],
                          capture_output=True, text=True, check=True).stdout.strip()
    if not os.access(path, os.X_OK):
        raise OracleMissing(f"{path} is missing: the mmdetection oracle is not installed; run make deps "
                            "(scripts/install_deps.sh test)")
    return path


def run_oracle(config, checkpoint_or_seed, image, out_npz, cfg_options=None, checkpoint_out=None,
               intermediates=False, features=False, bg_bias=0.0, threads=2, timeout=900):
    """Run mmdetection on one image in build/venv-mmdet; returns (results, report).

    config: a config file or a name under mmdet/.mim/configs (MASK_RCNN_R101);
    checkpoint_or_seed: int seed (seeded weights; saved to checkpoint_out when given) or the path
    of an mmdet checkpoint; image: an image file or a uint8 HxWx3 RGB array; cfg_options: {dotted
    key: value} merged into the config (e.g. {"model.roi_head.bbox_head.reg_class_agnostic": True})."""
    python = mmdet_python()
    cmd = [python, os.path.abspath(__file__), "--config", str(config), "--threads", str(threads),
           "--bg-bias", repr(float(bg_bias))]
    if out_npz is not None:
        cmd += ["--out", str(out_npz)]
    if isinstance(checkpoint_or_seed, (int, np.integer)) and not isinstance(checkpoint_or_seed, bool):
        cmd += ["--seed", str(int(checkpoint_or_seed))]
    else:
        cmd += ["--checkpoint", str(checkpoint_or_seed)]
    if checkpoint_out is not None:
        cmd += ["--checkpoint-out", str(checkpoint_out)]
    if cfg_options:
        cmd += ["--cfg-options-json", json.dumps(cfg_options)]
    if intermediates:
        cmd.append("--intermediates")
    if features:
        cmd.append("--features")
    with tempfile.TemporaryDirectory() as td:
        if image is None:
            if out_npz is not None:
                raise ValueError("out_npz without an image")
        elif isinstance(image, np.ndarray):
            if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
                raise ValueError(f"image array must be uint8 HxWx3 RGB, not {image.dtype} {image.shape}")
            path = os.path.join(td, "image_bgr.npy")
            np.save(path, np.ascontiguousarray(image[..., ::-1]))
            cmd += ["--image", path]
        else:
            cmd += ["--image", str(image)]
        # the venv's own packages only: the tests' PYTHONPATH (build/venv-test's site-packages,
        # scripts/test_env.sh) is not for it
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env.update(PYTHONWARNINGS="ignore", OMP_NUM_THREADS=str(threads))
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    if r.returncode != 0:
        raise RuntimeError(f"oracle_mmdet.py failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr[-4000:]}")
    report = next((json.loads(line[len(REPORT_PREFIX):]) for line in r.stdout.splitlines()
                   if line.startswith(REPORT_PREFIX)), None)
    if report is None:
        raise RuntimeError(f"oracle_mmdet.py printed no report:\n{r.stdout[-2000:]}")
    if out_npz is None:
        return None, report
    with np.load(out_npz) as z:
        results = {k: z[k] for k in z.files}
    return results, report


# ---------------------------------------------------------------------------------------
# Inside build/venv-mmdet
# ---------------------------------------------------------------------------------------

def resolve_config(config):
    """A config file, or a name relative to the installed mmdet's .mim/configs."""
    if os.path.isfile(config):
        return os.path.abspath(config)
    import mmdet
    path = os.path.join(os.path.dirname(mmdet.__file__), ".mim", "configs", config)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no config {config!r} (neither a file nor under {os.path.dirname(path)})")
    return path


def load_config(config, cfg_options=None):
    from mmengine.config import Config
    cfg = Config.fromfile(resolve_config(config))
    if cfg_options:
        cfg.merge_from_dict(cfg_options)
    cfg.model.backbone.init_cfg = None  # no torchvision:// or open-mmlab:// download
    return cfg


def build_model(cfg, checkpoint=None):
    """init_detector on the CPU: the model of `cfg`, eval mode, with `checkpoint`'s weights (and
    its dataset_meta) when given.  Without, mmdet leaves the layers as constructed and calls the
    classes COCO's; init_weights() and dataset_classes() replace both."""
    import warnings
    from mmdet.apis import init_detector
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return init_detector(cfg, checkpoint=checkpoint, device="cpu")


def _modules_with_weights(model):
    import torch.nn as nn
    from torch.nn.modules.batchnorm import _BatchNorm
    for name, m in model.named_modules():
        if isinstance(m, (_BatchNorm, nn.GroupNorm)):
            yield name, m, "norm"
        elif isinstance(m, (nn.Conv2d, nn.ConvTranspose2d, nn.Linear)):
            yield name, m, "layer"


PYTORCH_STYLE_STD_MEAN = (58.395 + 57.12 + 57.375) / 3


def init_weights(model, seed, bg_bias=0.0):
    """oracle.py's init_weights (oracle.md §2) under mmdet's module names.  One torch.Generator(seed),
    modules in named_modules() order, per module the weight first, then the bias (norms: weight,
    bias, running_mean, running_var).  N(0, gain/fan_in) keeps activations of order 1 through the
    trunk (He), FPN and heads; the RPN's objectness and the classifier's weights get std 0.05 (the
    classifier's rows centred), which spreads the scores so that detections are not ties;
    rpn_reg's dw, dh biases +0.3 (bigger proposals, so every FPN level is used).  bg_bias is
    added to the background logit (fc_cls' LAST row in mmdet)."""
    import torch
    g = torch.Generator().manual_seed(int(seed))

    def normal(t, std):
        t.copy_(torch.randn(t.shape, generator=g) * std)

    def uniform(t, a, b):
        t.copy_(torch.rand(t.shape, generator=g) * (b - a) + a)

    def gain_std(w, gain2, fan_in=None):
        return (gain2 / (fan_in or w[0].numel())) ** 0.5

    # He's std assumes inputs of unit scale: the pytorch-style std (58.395, 57.12, 57.375) gives
    # that; a caffe-style std of 1 leaves 0..255 inputs, so its stem is scaled down alike
    std = getattr(getattr(model, "data_preprocessor", None), "std", None)
    stem_scale = float(std.mean()) / PYTORCH_STYLE_STD_MEAN if std is not None else 1.0
    seen = 0
    with torch.no_grad():
        for name, m, kind in _modules_with_weights(model):
            seen += 1
            if kind == "norm":
                if name.startswith("backbone.") and name.endswith("bn3"):
                    uniform(m.weight, 0.1, 0.3)  # keeps the 33 residual sums bounded
                else:
                    uniform(m.weight, 0.8, 1.2)
                normal(m.bias, 0.1)
                if getattr(m, "running_mean", None) is not None:
                    normal(m.running_mean, 0.1)
                    uniform(m.running_var, 0.5, 1.5)
                continue
            w = m.weight
            if name.startswith("backbone."):
                normal(w, gain_std(w, 2.0))  # He
                if name == "backbone.conv1":
                    w *= stem_scale
            elif name.startswith("neck.lateral_convs."):
                normal(w, gain_std(w, 0.16))
            elif name.startswith("neck.fpn_convs."):
                normal(w, gain_std(w, 1.0))
            elif name == "rpn_head.rpn_cls":
                normal(w, 0.05)
            elif name == "rpn_head.rpn_reg":
                normal(w, 0.012)
            elif name == "roi_head.bbox_head.fc_cls":
                normal(w, 0.05)
                w -= w.mean(1, keepdim=True)  # row-centred: post-ReLU features share a DC part
            elif name == "roi_head.bbox_head.fc_reg":
                normal(w, 0.016)
            elif name == "roi_head.mask_head.upsample":
                normal(w, gain_std(w, 2.0, fan_in=w.shape[0]))  # ConvTranspose2d [in, out, 2, 2]
            elif name == "roi_head.mask_head.conv_logits":
                normal(w, gain_std(w, 4.0))
            elif name.startswith(("rpn_head.rpn_conv", "roi_head.bbox_head.shared_", "roi_head.mask_head.convs.")):
                normal(w, gain_std(w, 1.0))
            else:
                raise AssertionError(f"init recipe has no rule for {name} ({type(m).__name__})")
            if m.bias is not None:
                normal(m.bias, 0.05)
                if name == "rpn_head.rpn_reg":
                    m.bias.view(-1, 4)[:, 2:] += 0.3  # per anchor (dx, dy, dw, dh)
                if name == "roi_head.bbox_head.fc_cls":
                    m.bias[-1] += bg_bias
    assert seen > 0
    return model


def dataset_classes(cfg, num_classes):
    """The class names a training run on `cfg` would store: the dataset's metainfo classes (a
    custom config sets them), else COCO's 80 for an 80-class head (CocoDataset.METAINFO, what a
    COCO training run stores: 'traffic light', where mmdet.evaluation.get_classes('coco') says
    'traffic_light'), else class1..classN."""
    for path in ("train_dataloader.dataset.metainfo", "test_dataloader.dataset.metainfo", "metainfo"):
        node = cfg
        for key in path.split("."):
            node = node.get(key) if hasattr(node, "get") else None
            if node is None:
                break
        if node is not None and node.get("classes"):
            classes = tuple(node["classes"])
            if len(classes) == num_classes:
                return classes
    if num_classes == 80:
        from mmdet.datasets import CocoDataset
        return tuple(CocoDataset.METAINFO["classes"])
    return tuple(f"class{i + 1}" for i in range(num_classes))


def save_checkpoint(model, cfg, path, classes, seed):
    """As a published mmdet 3.x zoo file: what mmengine's Runner.save_checkpoint puts in 'meta'
    (cfg text, seed, time, versions, dataset_meta with the classes and a palette) and the
    state_dict, then mmdet/.mim/tools/model_converters/publish_model.py: only 'meta' and
    'state_dict' kept, torch.save(..., _use_new_zipfile_serialization=False)."""
    import mmengine
    import torch
    palette = [tuple(int(v) for v in np.random.default_rng(i).integers(0, 256, 3)) for i in range(len(classes))]
    meta = {"mmengine_version": mmengine.__version__, "time": time.strftime("%Y%m%d_%H%M%S"),
            "cfg": cfg.pretty_text, "seed": int(seed), "experiment_name": "oracle_mmdet",
            "epoch": 12, "iter": 0,
            "dataset_meta": {"classes": tuple(classes), "palette": palette}}
    torch.save({"meta": meta, "state_dict": model.state_dict()}, path, _use_new_zipfile_serialization=False)


def read_image_bgr(path):
    """uint8 HxWx3 BGR: an .npy array as it is, any other file decoded with Pillow (no EXIF
    rotation) and reversed from RGB."""
    if path.endswith(".npy"):
        img = np.load(path)
    else:
        from PIL import Image
        with Image.open(path) as im:
            img = np.asarray(im.convert("RGB"), dtype=np.uint8)[..., ::-1]
    if img.dtype != np.uint8 or img.ndim != 3 or img.shape[2] != 3:
        raise ValueError(f"{path}: expected uint8 HxWx3, got {img.dtype} {img.shape}")
    return np.ascontiguousarray(img)


def add_hooks(model, out, features=False):
    """Forward hooks that copy what they see into `out` (each returns None, so nothing changes).
    Returns the handles."""
    def rpn(mod, args, output):
        cls, reg = output
        for i, (c, r) in enumerate(zip(cls, reg)):
            out[f"hook_rpn_cls_p{i + 2}"] = c[0].numpy().copy()
            out[f"hook_rpn_reg_p{i + 2}"] = r[0].numpy().copy()

    def rois(prefix):
        def hook(mod, args, output):
            out[prefix + "_rois"] = args[1].numpy().copy()
        return hook

    def box_head(mod, args, output):
        out["hook_box_cls"] = output[0].numpy().copy()
        out["hook_box_reg"] = output[1].numpy().copy()

    def mask_head(mod, args, output):
        out["hook_mask_logits"] = output.numpy().copy()

    def feats(prefix, first):
        def hook(mod, args, output):
            for i, f in enumerate(output):
                out[f"{prefix}{i + first}"] = f[0].numpy().copy()
        return hook

    rh = model.roi_head
    handles = [model.rpn_head.register_forward_hook(rpn),
               rh.bbox_roi_extractor.register_forward_hook(rois("hook_box")),
               rh.bbox_head.register_forward_hook(box_head)]
    if getattr(rh, "with_mask", False):
        handles += [rh.mask_roi_extractor.register_forward_hook(rois("hook_mask")),
                    rh.mask_head.register_forward_hook(mask_head)]
    if features:
        handles += [model.backbone.register_forward_hook(feats("hook_c", 2)),
                    model.neck.register_forward_hook(feats("hook_p", 2))]
    return handles


def oracle(config, checkpoint=None, seed=None, image=None, out=None, checkpoint_out=None, cfg_options=None,
           intermediates=False, features=False, bg_bias=0.0, threads=2):
    """The oracle's side of run_oracle: returns the report dict (also written to `out`)."""
    import torch
    torch.set_num_threads(threads)
    t0 = time.perf_counter()
    from mmdet.apis import inference_detector
    t_import = time.perf_counter() - t0
    t = time.perf_counter()
    cfg = load_config(config, cfg_options)
    model = build_model(cfg, checkpoint)
    num_classes = int(model.roi_head.bbox_head.num_classes)
    if checkpoint is None:
        init_weights(model, seed, bg_bias)
        model.dataset_meta = {"classes": dataset_classes(cfg, num_classes)}
    t_build = time.perf_counter() - t
    t_save = 0.0
    if checkpoint_out:
        t = time.perf_counter()
        save_checkpoint(model, cfg, checkpoint_out, model.dataset_meta["classes"], seed if seed is not None else -1)
        t_save = time.perf_counter() - t
    report = dict(import_s=round(t_import, 3), build_s=round(t_build, 3), save_checkpoint_s=round(t_save, 3),
                  threads=threads, num_classes=num_classes)
    if image is None:  # the weights only
        return report
    img = read_image_bgr(image)
    hooked = {}
    handles = add_hooks(model, hooked, features) if intermediates or features else []
    t = time.perf_counter()
    res = inference_detector(model, img)
    t_infer = time.perf_counter() - t
    for h in handles:
        h.remove()
    pred = res.pred_instances
    meta = res.metainfo
    arrays = dict(
        boxes=pred.bboxes.numpy().astype(np.float32), scores=pred.scores.numpy().astype(np.float32),
        labels=pred.labels.numpy().astype(np.int64),
        masks=(pred.masks.numpy().astype(bool) if "masks" in pred else np.zeros((0,) + img.shape[:2], bool)),
        ori_shape=np.array(meta["ori_shape"], np.int64), img_shape=np.array(meta["img_shape"], np.int64),
        pad_shape=np.array(meta["pad_shape"], np.int64), scale_factor=np.array(meta["scale_factor"], np.float64),
        num_classes=np.array(num_classes, np.int64), classes=np.array(model.dataset_meta["classes"]))
    arrays.update(hooked)
    t = time.perf_counter()
    np.savez_compressed(out, **arrays)
    t_write = time.perf_counter() - t
    report.update(inference_s=round(t_infer, 3), write_s=round(t_write, 3), detections=int(len(arrays["scores"])),
                  image_hw=list(img.shape[:2]), img_shape=[int(v) for v in meta["img_shape"]], hooked=sorted(hooked))
    return report


def main(argv=None):
    ap = argparse.ArgumentParser(prog="oracle_mmdet.py", description=__doc__.split("\n")[0])
    ap.add_argument("--config", default=MASK_RCNN_R101, help="config file, or a name under mmdet/.mim/configs")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--seed", type=int, help="seeded random weights")
    src.add_argument("--checkpoint", help="an mmdet checkpoint (.pth)")
    ap.add_argument("--image", help="image file (decoded with Pillow) or a uint8 HxWx3 BGR .npy "
                                    "(without: no inference, e.g. only --checkpoint-out)")
    ap.add_argument("--out", help="results .npz (with --image)")
    ap.add_argument("--checkpoint-out", help="with --seed: save the weights as an mmdet zoo file here")
    ap.add_argument("--cfg-options-json", help="JSON object of dotted config keys to override")
    ap.add_argument("--intermediates", action="store_true", help="also the hooks' RPN, box head and mask head tensors")
    ap.add_argument("--features", action="store_true", help="also C2..C5 and P2..P6")
    ap.add_argument("--bg-bias", type=float, default=0.0, help="added to the background logit (seeded weights)")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)
    if (args.image is None) != (args.out is None):
        ap.error("--image and --out go together")
    report = oracle(args.config, checkpoint=args.checkpoint, seed=args.seed, image=args.image, out=args.out,
                    checkpoint_out=args.checkpoint_out,
                    cfg_options=json.loads(args.cfg_options_json) if args.cfg_options_json else None,
                    intermediates=args.intermediates, features=args.features, bg_bias=args.bg_bias,
                    threads=args.threads)
    print(REPORT_PREFIX + json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
