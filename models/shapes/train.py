"""Train the shapes demo model (narrow R-101-FPN Mask R-CNN) from scratch on the CPU.

    nice -n 10 /usr/bin/python3 models/shapes/train.py --out build/shapes_train [--iters N] [--threads 1]

The shipped weights: `--iters 4000`, then the same command with `--iters 5000`, which resumes at
iteration 4000 on the longer cosine (lr 0.002 there, down to 0): models/README.md.

Recipe (the defaults; everything is seeded, so a rerun retraces the same steps up to
floating-point thread nondeterminism): scenes shapes_data.make_scene(TRAIN_SEED, i) generated on
the fly, batch BATCH, SGD momentum 0.9, weight decay 1e-4, linear warm-up over WARMUP
iterations to LR, then cosine decay to 0; trainable BatchNorm (zero-initialised residual
gammas); RPN/RoI sampling settings below.  Then "precise BN": the running statistics are
recomputed as a plain average over PRECISE_BN_BATCHES batches with the final weights, the
model is frozen (FrozenBatchNorm2d, eps 1e-5) and written as OUT/model_final.pth
(torch.save(state_dict)).  Convert it with
    /usr/bin/python3 models/convert.py OUT/model_final.pth models/shapes_r101_narrow.safetensors --dtype f16

A checkpoint OUT/checkpoint.pth (model, optimiser, iteration) is written every CKPT_EVERY
iterations; rerunning the same command resumes from it.  Progress goes to stdout.
"""

import argparse
import math
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model as shapes_model  # noqa: E402
import shapes_data  # noqa: E402

BATCH = 4
LR = 0.02
WARMUP = 100
WEIGHT_DECAY = 1e-4
CKPT_EVERY = 50
PRECISE_BN_BATCHES = 50
TORCH_SEED = 0
# Training-time sampling (inference uses the config's values): fewer proposals and RoIs than
# torchvision's defaults (2000/2000/512) keep an iteration cheap; a scene has at most 7 objects.
TRAIN_KW = dict(rpn_pre_nms_top_n_train=500, rpn_post_nms_top_n_train=300,
                rpn_batch_size_per_image=256, box_batch_size_per_image=64)


def scene_target(seed, index):
    img, objs = shapes_data.make_scene(seed, index)
    x = torch.from_numpy(img.copy()).permute(2, 0, 1).float() / 255
    masks = np.stack([m for _, m in objs]) if objs else np.zeros((0,) + img.shape[:2], bool)
    t = {"boxes": torch.tensor([shapes_data.mask_box(m) for _, m in objs], dtype=torch.float32).reshape(-1, 4),
         "labels": torch.tensor([c for c, _ in objs], dtype=torch.int64),
         "masks": torch.from_numpy(masks.astype(np.uint8))}
    return x, t


class Scenes(torch.utils.data.Dataset):
    def __init__(self, seed, n):
        self.seed, self.n = seed, n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return scene_target(self.seed, i)


def batches(first_iter, iters):
    """Iteration k uses training scenes k*BATCH .. k*BATCH+BATCH-1: a resumed run sees the
    same data as an uninterrupted one.  One worker renders while the main process trains."""
    ds = torch.utils.data.Subset(Scenes(shapes_data.TRAIN_SEED, iters * BATCH),
                                 range(first_iter * BATCH, iters * BATCH))
    return torch.utils.data.DataLoader(ds, batch_size=BATCH, num_workers=1, prefetch_factor=4,
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
        xs, ts = zip(*[scene_target(shapes_data.TRAIN_SEED, start_index + b * BATCH + j) for j in range(BATCH)])
        model(list(xs), list(ts))  # losses ignored; the forward updates the statistics
    for m in bns:
        m.momentum = 0.1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--iters", type=int, default=4000)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--stop-after", type=int, default=None, help="stop (with a checkpoint) after this iteration")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(TORCH_SEED)
    os.makedirs(a.out, exist_ok=True)
    model = shapes_model.build_model(**TRAIN_KW)
    params = [p for p in model.parameters() if p.requires_grad]
    # No weight decay on BatchNorm and biases (1-d tensors), as in detectron2's default.
    opt = torch.optim.SGD([{"params": [p for p in params if p.ndim > 1], "weight_decay": WEIGHT_DECAY},
                           {"params": [p for p in params if p.ndim <= 1], "weight_decay": 0.0}],
                          lr=LR, momentum=0.9)
    ckpt = os.path.join(a.out, "checkpoint.pth")
    start = 0
    if os.path.exists(ckpt):
        c = torch.load(ckpt)
        model.load_state_dict(c["model"])
        opt.load_state_dict(c["opt"])
        start = c["iter"]
        torch.set_rng_state(c["rng"])
        print(f"resumed from {ckpt} at iteration {start}", flush=True)
    model.train()
    t0, last = time.time(), time.time()
    smooth = None
    stop = a.iters if a.stop_after is None else min(a.iters, a.stop_after)
    it = start
    for it, (xs, ts) in enumerate(batches(start, a.iters), start=start):
        if it >= stop:
            break
        for g in opt.param_groups:
            g["lr"] = lr_at(it, a.iters)
        losses = model(list(xs), list(ts))
        loss = sum(losses.values())
        if not torch.isfinite(loss):
            raise SystemExit(f"iteration {it}: loss is {loss.item()}: {losses}")
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 10.0)
        opt.step()
        v = {k: float(x) for k, x in losses.items()}
        smooth = v if smooth is None else {k: 0.9 * smooth[k] + 0.1 * v[k] for k in v}
        if (it + 1) % 10 == 0 or it == start:
            now = time.time()
            print(f"iter {it + 1}/{a.iters} lr {lr_at(it, a.iters):.5f} loss {sum(smooth.values()):.3f} "
                  + " ".join(f"{k[5:]} {x:.3f}" for k, x in smooth.items())
                  + f" | {(now - last) / (10 if it > start else 1):.2f} s/it, {now - t0:.0f} s", flush=True)
            last = now
        if (it + 1) % CKPT_EVERY == 0 or it + 1 == stop:
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "iter": it + 1,
                        "rng": torch.get_rng_state()}, ckpt + ".tmp")
            os.replace(ckpt + ".tmp", ckpt)
        it += 1
    else:
        it = a.iters if start < a.iters else start
    if it < a.iters:
        print(f"stopped at iteration {it}; rerun to resume", flush=True)
        return
    print("precise BN ...", flush=True)
    precise_bn(model, PRECISE_BN_BATCHES, a.iters * BATCH)
    frozen = shapes_model.frozen_copy(model)
    final = os.path.join(a.out, "model_final.pth")
    torch.save(frozen.state_dict(), final + ".tmp")
    os.replace(final + ".tmp", final)
    print(f"wrote {final} ({time.time() - t0:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
