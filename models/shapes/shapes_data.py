"""Seeded synthetic scenes for the shapes demo model: circles, squares, triangles and stars of
varied sizes, colours and rotations on textured backgrounds, overlapping and occluding each
other, with COCO instance annotations (visible-part masks as compressed RLE).

Every scene is a pure function of (seed, index): `make_scene(seed, i)`.  Training uses seed
TRAIN_SEED, the held-out evaluation set seed HELDOUT_SEED, so the two never share a scene;
VALIDATION_SEED's scenes choose the demo's settings (its drawing threshold), so that the
held-out numbers stay unbiased.

    /usr/bin/python3 models/shapes/shapes_data.py OUT_DIR [--seed 2] [--count 200] [--start 0]
writes OUT_DIR/000000000001.png ... and OUT_DIR/annotations.json (COCO instances); the file
name is the COCO image id (`detect --coco-results` takes it from the name). Needs numpy and Pillow
(Debian: python3-numpy python3-pil); without pycocotools it writes the scenes and says that the
annotations need it.
"""

import argparse
import json
import math
import os
import sys

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

CLASSES = ["circle", "square", "triangle", "star"]  # category ids 1..4 = model class ids
TRAIN_SEED, HELDOUT_SEED, DEMO_SEED, VALIDATION_SEED = 1, 2, 3, 7
MIN_SIDE, MAX_SIDE = 208, 272        # image sides, uniform
MIN_OBJ, MAX_OBJ = 2, 7              # objects per scene
MIN_R, MAX_R = 12, 50                # shape "radius" (half its extent), px
MIN_VISIBLE = 0.7                    # an object keeps at least this fraction of its area visible


def _rng(seed, index):
    return np.random.default_rng([int(seed), int(index)])


def _colour(rng, avoid):
    """A random RGB colour at least some distance from every colour in `avoid` (the background's
    two colours and their mean), so a shape never melts into any part of its background."""
    avoid = np.asarray(avoid, np.float64).reshape(-1, 3)
    for _ in range(50):
        c = rng.integers(0, 256, 3)
        if all(np.abs(c - a).sum() > 120 for a in avoid):
            return c
    return (255 - avoid.mean(0)).round()


def _background(rng, h, w, hard=False):
    """(uint8 HxWx3: one of gradient, stripes, checkerboard or blotches, plus noise; its two colours).
    hard: stripes, checkerboard (twice as likely) or blotches, never the plain gradient."""
    kind = rng.integers(0, 4)
    if hard:
        kind = (1, 2, 2, 3)[kind]
    c1, c2 = rng.integers(0, 256, 3).astype(np.float64), rng.integers(0, 256, 3).astype(np.float64)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    if kind == 0:
        a = rng.uniform(0, 2 * math.pi)
        t = (xx * math.cos(a) + yy * math.sin(a))
        t = (t - t.min()) / max(np.ptp(t), 1)
    elif kind == 1:
        a, period = rng.uniform(0, math.pi), rng.uniform(6, 30)
        t = 0.5 + 0.5 * np.sin(2 * math.pi * (xx * math.cos(a) + yy * math.sin(a)) / period)
    elif kind == 2:
        cell = int(rng.integers(8, 40))
        t = ((xx // cell + yy // cell) % 2).astype(np.float64)
    else:
        small = rng.random((int(rng.integers(3, 10)), int(rng.integers(3, 10))))
        t = np.asarray(Image.fromarray((small * 255).astype(np.uint8)).resize((w, h), Image.BICUBIC),
                       np.float64) / 255
    img = c1 + (c2 - c1) * t[..., None]
    img += rng.normal(0, rng.uniform(2, 12), img.shape)
    return np.clip(img, 0, 255).astype(np.uint8), (c1, c2)


def _polygon(cls, cx, cy, r, rot, rng):
    if cls == "square":
        k, radii = 4, [r] * 4
    elif cls == "triangle":
        k, radii = 3, [r] * 3
    else:  # star
        inner = rng.uniform(0.38, 0.55)
        k, radii = 10, [r if i % 2 == 0 else r * inner for i in range(10)]
    return [(cx + rr * math.cos(rot + 2 * math.pi * i / k), cy + rr * math.sin(rot + 2 * math.pi * i / k))
            for i, rr in enumerate(radii)]


def _shape_mask(cls, h, w, cx, cy, r, rot, rng):
    im = Image.new("L", (w, h), 0)
    d = ImageDraw.Draw(im)
    if cls == "circle":
        d.ellipse([cx - r, cy - r, cx + r, cy + r], fill=255)
    else:
        d.polygon(_polygon(cls, cx, cy, r, rot, rng), fill=255)
    return np.asarray(im) > 127


def _across_a_corner(rng, vis, r, h, w):
    """A centre for a new shape of radius r that covers the neck of one of `vis`'s corners (a
    point of its visible part among the 3% farthest from its centroid) and leaves the tip."""
    ys, xs = np.nonzero(vis)
    my, mx = ys.mean(), xs.mean()
    d = np.hypot(xs - mx, ys - my)
    far = np.nonzero(d >= np.quantile(d, 0.97))[0]
    k = int(far[int(rng.integers(0, len(far)))])
    back = r / rng.uniform(0.55, 0.9)  # from the tip towards the centroid: past the shape's own radius
    ux, uy = (xs[k] - mx) / max(d[k], 1e-6), (ys[k] - my) / max(d[k], 1e-6)
    return (float(np.clip(xs[k] - ux * back, r * 0.6, w - r * 0.6)),
            float(np.clip(ys[k] - uy * back, r * 0.6, h - r * 0.6)))


def make_scene(seed, index, hard=False, cut_corners=0.0):
    """(image uint8 HxWx3 RGB, [(class id 1..4, visible mask bool HxW)]), a function of (seed, index).

    hard=True is a training-only mix (train.py --hard-fraction): textured backgrounds only and
    at least 5 shapes, so more of them overlap.  cut_corners (training-only, train.py
    --cut-corners) is the chance that a new shape is placed across a corner of an earlier one,
    which can leave that corner's tip as a separate visible piece of the same object: in about
    a third of the scenes at 0.8, against 3% otherwise, where a model otherwise sees too few to
    learn that such a piece is no object of its own.  The evaluation and demo scenes use
    neither; with both off the scene is the same as before the options existed."""
    rng = _rng(seed, index)
    h, w = (int(v) for v in rng.integers(MIN_SIDE, MAX_SIDE + 1, 2))
    img, bg_colours = _background(rng, h, w, hard)
    img = img.astype(np.float64)
    avoid = [*bg_colours, img.reshape(-1, 3).mean(0)]
    objects = []  # [class, visible mask]
    n = int(rng.integers(MIN_OBJ, MAX_OBJ + 1))
    if hard:
        n = max(n, 5)
    for _ in range(n * 4):  # attempts
        if len(objects) == n:
            break
        cls = CLASSES[int(rng.integers(0, len(CLASSES)))]
        r = float(np.exp(rng.uniform(math.log(MIN_R), math.log(MAX_R))))
        cx, cy = rng.uniform(r * 0.6, w - r * 0.6), rng.uniform(r * 0.6, h - r * 0.6)
        if cut_corners and objects and rng.random() < cut_corners:
            cx, cy = _across_a_corner(rng, objects[int(rng.integers(0, len(objects)))][1], r, h, w)
        mask = _shape_mask(cls, h, w, cx, cy, r, rng.uniform(0, 2 * math.pi), rng)
        if mask.sum() < 100:
            continue
        # Occlusion: the new shape lies on top; every earlier object must stay mostly visible.
        if any((vis & ~mask).sum() < MIN_VISIBLE * full for _, vis, full in objects):
            continue
        colour = _colour(rng, avoid).astype(np.float64)
        fill = np.broadcast_to(colour, img.shape).copy()
        if rng.random() < 0.4:  # textured fill: a second colour in stripes or noise
            c2 = _colour(rng, avoid).astype(np.float64)
            yy, xx = np.mgrid[0:h, 0:w]
            t = ((xx + yy) // int(rng.integers(3, 10)) % 2) if rng.random() < 0.5 else rng.random((h, w)) < 0.3
            fill = np.where(t[..., None].astype(bool), c2 * 0.5 + colour * 0.5, colour)
        img[mask] = fill[mask]
        objects = [(c, vis & ~mask, full) for c, vis, full in objects]
        objects.append((cls, mask, int(mask.sum())))
    img += rng.normal(0, rng.uniform(1, 6), img.shape)
    out = np.clip(img, 0, 255).astype(np.uint8)
    if rng.random() < 0.3:
        out = np.asarray(Image.fromarray(out).filter(ImageFilter.GaussianBlur(rng.uniform(0.3, 1.0))))
    return out, [(CLASSES.index(c) + 1, vis) for c, vis, _ in objects if vis.any()]


def mask_box(mask):
    """[x1, y1, x2, y2] in pixel-edge coordinates (x2 = last column + 1)."""
    ys, xs = np.nonzero(mask)
    return [float(xs.min()), float(ys.min()), float(xs.max() + 1), float(ys.max() + 1)]


def file_name(index):
    return f"{index + 1:012d}.png"  # COCO style: the image id is index + 1


def write_images(out_dir, seed, count, start=0):
    """Writes the PNG files of scenes start..start+count-1, one at a time, yielding for each
    (index, file name, image, objects) as make_scene returns them."""
    os.makedirs(out_dir, exist_ok=True)
    for i in range(start, start + count):
        img, objs = make_scene(seed, i)
        name = file_name(i)
        Image.fromarray(img).save(os.path.join(out_dir, name))
        yield i, name, img, objs


def write_dataset(out_dir, seed, count, start=0):
    """PNG files and a COCO instances file for scenes start..start+count-1; returns its path."""
    from pycocotools import mask as mask_util
    images, anns = [], []
    for i, name, img, objs in write_images(out_dir, seed, count, start):
        images.append({"id": i + 1, "file_name": name, "height": img.shape[0], "width": img.shape[1]})
        for cls, m in objs:
            rle = mask_util.encode(np.asfortranarray(m.astype(np.uint8)))
            x1, y1, x2, y2 = mask_box(m)
            anns.append({"id": len(anns) + 1, "image_id": i + 1, "category_id": cls, "iscrowd": 0,
                         "area": float(m.sum()), "bbox": [x1, y1, x2 - x1, y2 - y1],
                         "segmentation": {"size": list(rle["size"]), "counts": rle["counts"].decode()}})
    doc = {"info": {"description": f"detect shapes, seed {seed}, scenes {start}..{start + count - 1}"},
           "images": images, "annotations": anns,
           "categories": [{"id": k + 1, "name": c, "supercategory": "shape"} for k, c in enumerate(CLASSES)]}
    path = os.path.join(out_dir, "annotations.json")
    with open(path, "w") as f:
        json.dump(doc, f)
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--seed", type=int, default=HELDOUT_SEED)
    ap.add_argument("--count", type=int, default=200)
    ap.add_argument("--start", type=int, default=0)
    a = ap.parse_args()
    try:
        import pycocotools  # noqa: F401  (the annotations' RLE encoder)
    except ImportError:
        # The scenes alone are enough to run detect on (docs/zoos.md); the annotations need
        # pycocotools, which scripts/install_deps.sh test puts in build/venv-test.
        for _ in write_images(a.out_dir, a.seed, a.count, a.start):
            pass
        print(f"{a.out_dir}: {a.count} scenes written; annotations.json not written: pycocotools is missing "
              "(scripts/install_deps.sh test installs it into build/venv-test; run this with "
              "build/venv-test/bin/python)", file=sys.stderr)
        return
    print(write_dataset(a.out_dir, a.seed, a.count, a.start))


if __name__ == "__main__":
    main()
