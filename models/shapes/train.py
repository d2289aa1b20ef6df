"""Train the shapes demo model (narrow R-101-FPN Mask R-CNN) from scratch, on the CPU or a GPU.

    nice -n 10 /usr/bin/python3 models/shapes/train.py --out build/shapes_train [--iters N]
                                                       [--freeze-iters N] [--threads 1]
                                                       [--device auto|cpu|cuda|cuda:N]
                                                       [--init W.safetensors] [--freeze-lr LR]
                                                       [--freeze-warmup N] [--hard-fraction F]
                                                       [--cut-corners P] [--scene-offset K] [--rois N]
                                                       [--workers N]

The shipped weights are this command with the default iterations and --threads 2 (about 66
minutes on 2 idle cores): models/README.md.

Recipe (the defaults; everything is seeded, so a rerun retraces the same steps up to
floating-point thread nondeterminism): scenes shapes_data.make_scene(TRAIN_SEED, i) generated on
the fly, batch BATCH, RPN/RoI sampling settings below, SGD momentum 0.9, weight decay 1e-4.
1. `--iters` iterations with trainable BatchNorm (zero-initialised residual gammas): linear
   warm-up over WARMUP iterations to LR, then cosine decay to 0.
2. "Precise BN": the running statistics are recomputed as a plain average over
   PRECISE_BN_BATCHES batches with the final weights, and the model is frozen
   (FrozenBatchNorm2d, eps 1e-5): the inference model.
3. `--freeze-iters` more iterations of that frozen model (cosine from FREEZE_LR to 0), on new
   scenes.  Why: with a batch of 4 very different scenes, training-mode BatchNorm normalises
   each batch by its own statistics, and the network comes to rely on that; with the fixed
   population statistics the same weights score wrong classes high (a square also called a
   circle at 0.89).  Training a while with the statistics the engine folds removes that gap
   (held-out box AP50 0.886 -> 0.920 in 500 iterations; 1000 more trainable-BN iterations
   instead had given 0.893).
Then the model is written as OUT/model_final.pth (torch.save(state_dict)).  Convert it with
    /usr/bin/python3 models/convert.py OUT/model_final.pth models/shapes_r101_narrow.safetensors --dtype f16

Fine-tuning (`--init W.safetensors`): start from a converted model (its FrozenBatchNorm
statistics included) and run only phase 3, `--freeze-iters` iterations with a linear warm-up of
`--freeze-warmup` to `--freeze-lr`, then cosine to 0.  `--hard-fraction` draws that share of the
training scenes from shapes_data's hard mix (textured backgrounds, at least 5 shapes),
`--cut-corners` places shapes of that mix across corners of earlier ones (a tip cut off and left
visible is still part of its shape), `--scene-offset` moves to scenes no earlier run saw,
`--rois` samples more RoIs per image (more background examples for the box classifier).
models/README.md gives the command of the shipped model.

A checkpoint OUT/checkpoint.pth (model, optimiser, iteration, phase) is written every CKPT_EVERY
iterations of either phase; rerunning the same command resumes from it (on either device).
Progress goes to stdout.

--device: where the model trains; `auto` (the default) takes the first CUDA GPU when PyTorch
sees one, else the CPU.  Scenes are rendered on the CPU by a DataLoader worker either way; the
checkpoints and model_final.pth hold CPU tensors.  On a GPU the steps are the same, but its
convolutions and the RoI sampling's random draws differ in the last bits, so a GPU run does not
retrace a CPU run exactly.
"""

import argparse
import collections
import math
import os
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]  # model.py, shapes_data.py; models/ for load_converted
import model as shapes_model  # noqa: E402
import shapes_data  # noqa: E402

BATCH = 4
LR = 0.02
WARMUP = 100
WEIGHT_DECAY = 1e-4
CKPT_EVERY = 50
PRECISE_BN_BATCHES = 50
FREEZE_ITERS = 500
FREEZE_LR = 0.004
TORCH_SEED = 0
# Training-time sampling (inference uses the config's values): fewer proposals and RoIs than
# torchvision's defaults (2000/2000/512) keep an iteration cheap; a scene has at most 7 objects.
TRAIN_KW = dict(rpn_pre_nms_top_n_train=500, rpn_post_nms_top_n_train=300,
                rpn_batch_size_per_image=256, box_batch_size_per_image=64)


def is_hard(seed, index, fraction):
    """Whether training scene `index` is drawn from shapes_data's hard mix (a fixed function of
    the scene, so a resumed run sees the same scenes)."""
    return fraction > 0 and np.random.default_rng([int(seed), int(index), 7]).random() < fraction


def scene_target(seed, index, hard_fraction=0.0, cut_corners=0.0):
    hard = is_hard(seed, index, hard_fraction)
    img, objs = shapes_data.make_scene(seed, index, hard=hard, cut_corners=cut_corners if hard else 0.0)
    x = torch.from_numpy(img.copy()).permute(2, 0, 1).float() / 255
    masks = np.stack([m for _, m in objs]) if objs else np.zeros((0,) + img.shape[:2], bool)
    t = {"boxes": torch.tensor([shapes_data.mask_box(m) for _, m in objs], dtype=torch.float32).reshape(-1, 4),
         "labels": torch.tensor([c for c, _ in objs], dtype=torch.int64),
         "masks": torch.from_numpy(masks.astype(np.uint8))}
    return x, t


class Scenes(torch.utils.data.Dataset):
    def __init__(self, seed, n, hard_fraction, cut_corners):
        self.seed, self.n, self.hard_fraction, self.cut_corners = seed, n, hard_fraction, cut_corners

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return scene_target(self.seed, i, self.hard_fraction, self.cut_corners)


DEVICE = torch.device("cpu")  # set by main from --device
HARD_FRACTION = 0.0           # set by main from --hard-fraction
CUT_CORNERS = 0.0             # set by main from --cut-corners
SCENE_OFFSET = 0              # set by main from --scene-offset: added to every training scene index
WORKERS = 1                   # set by main from --workers: processes rendering scenes


def to_device(xs, ts):
    """One batch (images, targets) on DEVICE, as lists."""
    return ([x.to(DEVICE) for x in xs], [{k: v.to(DEVICE) for k, v in t.items()} for t in ts])


def batches(first_iter, last_iter, skip=0):
    """Iteration k uses training scenes skip+k*BATCH .. skip+k*BATCH+BATCH-1: a resumed run sees
    the same data as an uninterrupted one.  One worker renders while the main process trains."""
    skip += SCENE_OFFSET
    ds = torch.utils.data.Subset(Scenes(shapes_data.TRAIN_SEED, skip + last_iter * BATCH, HARD_FRACTION,
                                        CUT_CORNERS),
                                 range(skip + first_iter * BATCH, skip + last_iter * BATCH))
    return torch.utils.data.DataLoader(ds, batch_size=BATCH, num_workers=WORKERS, prefetch_factor=4,
                                       collate_fn=lambda b: tuple(zip(*b)))


def lr_at(it, iters):
    if it < WARMUP:
        return LR * (0.001 + 0.999 * it / WARMUP)
    return LR * 0.5 * (1 + math.cos(math.pi * (it - WARMUP) / max(iters - WARMUP, 1)))


@torch.no_grad()
def precise_bn(model, n_batches, start_index):
    """Recompute every BatchNorm's running mean/var as the plain average over n_batches batches
    (momentum None = cumulative average) with the final weights."""
    bns = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    for m in bns:
        m.reset_running_stats()
        m.momentum = None
    model.train()
    for b in range(n_batches):
        xs, ts = zip(*[scene_target(shapes_data.TRAIN_SEED, SCENE_OFFSET + start_index + b * BATCH + j,
                                    HARD_FRACTION, CUT_CORNERS)
                       for j in range(BATCH)])
        model(*to_device(xs, ts))  # losses ignored; the forward updates the statistics
    for m in bns:
        m.momentum = 0.1


def make_optimizer(model, lr):
    params = [p for p in model.parameters() if p.requires_grad]
    # No weight decay on BatchNorm and biases (1-d tensors), as in detectron2's default.
    return params, torch.optim.SGD([{"params": [p for p in params if p.ndim > 1], "weight_decay": WEIGHT_DECAY},
                                   {"params": [p for p in params if p.ndim <= 1], "weight_decay": 0.0}],
                                  lr=lr, momentum=0.9)


def train_phase(model, opt, params, first, last, lr_fn, skip, save, stop):
    """Iterations first..last-1 (global numbering) with lr_fn(it); checkpoints through save(it).
    Returns the next iteration (last, or stop when --stop-after cuts the phase short)."""
    model.train()
    t0 = last_t = time.time()
    smooth = None
    end = min(last, stop)
    for it, (xs, ts) in enumerate(batches(first, last, skip), start=first):
        if it >= end:
            break
        for g in opt.param_groups:
            g["lr"] = lr_fn(it)
        losses = model(*to_device(xs, ts))
        loss = sum(losses.values())
        if not torch.isfinite(loss):
            raise SystemExit(f"iteration {it}: loss is {loss.item()}: {losses}")
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 10.0)
        opt.step()
        v = {k: float(x) for k, x in losses.items()}
        smooth = v if smooth is None else {k: 0.9 * smooth[k] + 0.1 * v[k] for k in v}
        if (it + 1) % 10 == 0 or it == first:
            now = time.time()
            print(f"iter {it + 1}/{last} lr {lr_fn(it):.5f} loss {sum(smooth.values()):.3f} "
                  + " ".join(f"{k[5:]} {x:.3f}" for k, x in smooth.items())
                  + f" | {(now - last_t) / (10 if it > first else 1):.2f} s/it, {now - t0:.0f} s", flush=True)
            last_t = now
        if (it + 1) % CKPT_EVERY == 0 or it + 1 == end:
            save(it + 1)
    return max(first, end)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--iters", type=int, default=4000, help="iterations with trainable BatchNorm")
    ap.add_argument("--freeze-iters", type=int, default=FREEZE_ITERS,
                    help="iterations after that with the precise-BN statistics frozen")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--stop-after", type=int, default=None, help="stop (with a checkpoint) after this iteration")
    ap.add_argument("--device", default="auto", help="auto (a CUDA GPU if PyTorch sees one, else cpu), cpu, cuda, cuda:N")
    ap.add_argument("--init", help="start from this converted model (safetensors, frozen BatchNorm) and run only "
                                   "the frozen phase: --iters is ignored (0)")
    ap.add_argument("--freeze-lr", type=float, default=FREEZE_LR, help="peak lr of the frozen phase")
    ap.add_argument("--freeze-warmup", type=int, default=0, help="linear warm-up iterations of the frozen phase")
    ap.add_argument("--hard-fraction", type=float, default=0.0,
                    help="fraction of training scenes drawn from shapes_data's hard mix (textured backgrounds, >= 5 shapes)")
    ap.add_argument("--cut-corners", type=float, default=0.0,
                    help="in the hard mix, the chance a new shape is placed across a corner of an earlier one "
                         "(shapes_data.make_scene's cut_corners)")
    ap.add_argument("--scene-offset", type=int, default=0, help="added to every training scene index (new scenes)")
    ap.add_argument("--rois", type=int, default=TRAIN_KW["box_batch_size_per_image"],
                    help="RoIs sampled per image for the box head while training")
    ap.add_argument("--workers", type=int, default=1,
                    help="processes rendering scenes (a GPU needs several: one renders about 40 scenes/s here)")
    a = ap.parse_args()
    global DEVICE, HARD_FRACTION, CUT_CORNERS, SCENE_OFFSET, WORKERS
    HARD_FRACTION, CUT_CORNERS, SCENE_OFFSET, WORKERS = a.hard_fraction, a.cut_corners, a.scene_offset, a.workers
    TRAIN_KW["box_batch_size_per_image"] = a.rois
    if a.init:
        a.iters = 0
    DEVICE = torch.device(("cuda" if torch.cuda.is_available() else "cpu") if a.device == "auto" else a.device)
    if DEVICE.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit(f"--device {a.device}: PyTorch sees no CUDA GPU (torch {torch.__version__})")
    print(f"training on {DEVICE}" + (f" ({torch.cuda.get_device_name(DEVICE)})" if DEVICE.type == "cuda" else ""),
          flush=True)
    torch.set_num_threads(a.threads)
    torch.manual_seed(TORCH_SEED)
    os.makedirs(a.out, exist_ok=True)
    total = a.iters + a.freeze_iters
    stop = total if a.stop_after is None else min(total, a.stop_after)
    ckpt = os.path.join(a.out, "checkpoint.pth")
    t0 = time.time()

    def saver(model, opt, frozen):
        def save(it):
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "iter": it, "frozen": frozen,
                        "rng": torch.get_rng_state(),
                        "cuda_rng": torch.cuda.get_rng_state(DEVICE) if DEVICE.type == "cuda" else None},
                       ckpt + ".tmp")
            os.replace(ckpt + ".tmp", ckpt)
        return save

    c = torch.load(ckpt, map_location="cpu") if os.path.exists(ckpt) else None
    start = c["iter"] if c else 0
    if c:
        torch.set_rng_state(c["rng"])
        if DEVICE.type == "cuda" and c.get("cuda_rng") is not None:
            torch.cuda.set_rng_state(c["cuda_rng"], DEVICE)
        print(f"resumed from {ckpt} at iteration {start}", flush=True)
    if a.init and not c:
        # Fine-tuning a converted model: it is already the frozen inference model.
        frozen = shapes_model.load_converted(shapes_model.build_model(frozen_bn=True, **TRAIN_KW), a.init).to(DEVICE)
        params, opt = make_optimizer(frozen, a.freeze_lr)
        print(f"initialised from {a.init}", flush=True)
    elif not (c and c.get("frozen")):
        # Phase 1: trainable BatchNorm.
        model = shapes_model.build_model(**TRAIN_KW).to(DEVICE)
        params, opt = make_optimizer(model, LR)
        if c:
            model.load_state_dict(c["model"])
            opt.load_state_dict(c["opt"])
        start = train_phase(model, opt, params, start, a.iters, lambda it: lr_at(it, a.iters), 0,
                            saver(model, opt, False), stop)
        if start < a.iters:
            print(f"stopped at iteration {start}; rerun to resume", flush=True)
            return
        print("precise BN ...", flush=True)
        precise_bn(model, PRECISE_BN_BATCHES, a.iters * BATCH)
        frozen = shapes_model.frozen_copy(model, **TRAIN_KW).to(DEVICE)
        params, opt = make_optimizer(frozen, a.freeze_lr)
        saver(frozen, opt, True)(a.iters)
    else:
        # Phase 2 resumed: the frozen model and its optimiser.
        frozen = shapes_model.build_model(frozen_bn=True, **TRAIN_KW).to(DEVICE)
        frozen.load_state_dict(c["model"])
        params, opt = make_optimizer(frozen, a.freeze_lr)
        opt.load_state_dict(c["opt"])
    # Phase 2: the inference model's fixed statistics; scenes after those precise BN used.
    def frozen_lr(it):
        k = it - a.iters
        warm = min(1.0, (k + 1) / a.freeze_warmup) if a.freeze_warmup else 1.0
        return a.freeze_lr * warm * 0.5 * (1 + math.cos(math.pi * k / max(a.freeze_iters, 1)))
    start = train_phase(frozen, opt, params, start, total, frozen_lr,
                        PRECISE_BN_BATCHES * BATCH, saver(frozen, opt, True), stop)
    if start < total:
        print(f"stopped at iteration {start}; rerun to resume", flush=True)
        return
    frozen.eval()
    final = os.path.join(a.out, "model_final.pth")
    torch.save(collections.OrderedDict((k, v.cpu()) for k, v in frozen.state_dict().items()), final + ".tmp")
    os.replace(final + ".tmp", final)
    print(f"wrote {final} ({time.time() - t0:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
