#!/usr/bin/python3
"""A benchmark folder of photo-like JPEGs whose sizes follow COCO val2017's.

    /usr/bin/python3 bench/make_photo_folder.py OUT [--count 2000] [--seed 1] [--same-size WxH]

COCO val2017 itself cannot be fetched here, so its sizes are drawn from a table of what
dominates it: the long side is 640 for nearly every image, the short side mostly 480 or
427 and otherwise spread from about 240 to 640, a quarter of the images portrait, a few
smaller than 640 on the long side (500x375 and the like). The content is real photographs
bundled with scikit-image (astronaut, coffee, chelsea, rocket, the Hubble deep field, a
retina, an IHC stain, and greyscale textures), each image a random crop of one, scaled to
its size, flipped, colour-jittered, often with a patch of another pasted in, and saved at
JPEG quality 85 to 95: photographs' statistics, for the decoder and for the network, not
flat synthetic colour. Deterministic: the same seed writes the same bytes.

--same-size WxH writes the same count at one size (the comparison folder of GPU throughput:
a mixed folder should run at least 0.9x as fast as a same-size one). OUT/sizes.tsv lists
every file with its size; the last lines printed say how many distinct image sizes and
network input sizes (torchvision's resize to 800/1333, padded to a multiple of 32) there are.
"""

import argparse
import os
import sys

import numpy as np

# (long side, short side, weight): the sizes that dominate COCO val2017, then a spread.
SIZE_TABLE = [
    (640, 480, 0.40), (640, 427, 0.24), (640, 426, 0.03), (640, 428, 0.02), (640, 360, 0.04),
    (640, 640, 0.03), (640, 512, 0.02), (640, 425, 0.02), (640, 429, 0.01), (640, 424, 0.01),
    (500, 375, 0.02), (500, 333, 0.01), (612, 612, 0.01),
]
SPREAD = 0.14          # the rest: long side 640, short side uniform in [240, 640]
PORTRAIT = 0.25        # share of images taller than wide


def sample_sizes(count, rng):
    """`count` (h, w) pairs: the table's sizes by weight, the rest spread, a quarter portrait."""
    weights = np.array([w for _, _, w in SIZE_TABLE] + [SPREAD])
    weights /= weights.sum()
    sizes = []
    for k in rng.choice(len(weights), size=count, p=weights):
        if k == len(SIZE_TABLE):
            long_side, short_side = 640, int(rng.randint(240, 641))
        else:
            long_side, short_side = SIZE_TABLE[k][:2]
        portrait = rng.uniform() < PORTRAIT
        sizes.append((long_side, short_side) if portrait else (short_side, long_side))
    return sizes


def network_size(h, w, min_size=800, max_size=1333, divisibility=32):
    """The padded network input of torchvision's resize ("floor" rounding, float32 scale)."""
    scale = np.float32(min(min_size / min(h, w), max_size / max(h, w)))
    rh, rw = int(np.floor(np.float32(h) * scale)), int(np.floor(np.float32(w) * scale))
    pad = lambda x: (x + divisibility - 1) // divisibility * divisibility  # noqa: E731
    return pad(rh), pad(rw)


def sources():
    """The bundled photographs as uint8 RGB arrays."""
    import skimage.data
    out = []
    for name in ("astronaut", "coffee", "chelsea", "rocket", "immunohistochemistry", "hubble_deep_field",
                 "retina", "coins", "camera", "moon", "brick", "grass", "gravel"):
        a = getattr(skimage.data, name)()
        if a.ndim == 2:
            a = np.stack([a] * 3, axis=-1)
        out.append(np.ascontiguousarray(a[..., :3].astype(np.uint8)))
    return out


def crop_to(src, h, w, rng):
    """A random crop of src with the aspect of h x w, scaled to h x w."""
    from PIL import Image
    sh, sw = src.shape[:2]
    aspect = w / h
    ch = int(rng.uniform(0.35, 1.0) * min(sh, sw / aspect))
    ch = max(ch, 8)
    cw = max(int(ch * aspect), 8)
    cw, ch = min(cw, sw), min(ch, sh)
    y0, x0 = rng.randint(0, sh - ch + 1), rng.randint(0, sw - cw + 1)
    img = Image.fromarray(src[y0:y0 + ch, x0:x0 + cw]).resize((w, h), Image.BICUBIC)
    a = np.asarray(img)
    return a[:, ::-1] if rng.uniform() < 0.5 else a


def make_image(h, w, photos, rng):
    img = crop_to(photos[rng.randint(len(photos))], h, w, rng).astype(np.float32)
    if rng.uniform() < 0.6:  # a patch of another photograph: edges and objects at several places
        ph, pw = int(h * rng.uniform(0.2, 0.6)), int(w * rng.uniform(0.2, 0.6))
        if ph >= 8 and pw >= 8:
            y0, x0 = rng.randint(0, h - ph + 1), rng.randint(0, w - pw + 1)
            img[y0:y0 + ph, x0:x0 + pw] = crop_to(photos[rng.randint(len(photos))], ph, pw, rng)
    gain = rng.uniform(0.8, 1.2, size=3).astype(np.float32)
    img = img * gain + np.float32(rng.uniform(-20, 20))
    return np.clip(np.round(img), 0, 255).astype(np.uint8)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--same-size", metavar="WxH", help="every image at this size (the comparison folder)")
    a = ap.parse_args(argv)
    from PIL import Image
    rng = np.random.RandomState(a.seed)
    if a.same_size:
        try:
            w, h = (int(v) for v in a.same_size.lower().split("x"))
        except ValueError:
            ap.error(f"--same-size {a.same_size}: expected WxH, e.g. 640x480")
        sizes = [(h, w)] * a.count
    else:
        sizes = sample_sizes(a.count, rng)
    os.makedirs(a.out, exist_ok=True)
    photos = sources()
    lines = []
    for i, (h, w) in enumerate(sizes):
        name = f"photo_{i:05d}.jpg"
        Image.fromarray(make_image(h, w, photos, rng)).save(os.path.join(a.out, name), quality=int(rng.randint(85, 96)))
        lines.append(f"{name}\t{w}\t{h}")
    with open(os.path.join(a.out, "sizes.tsv"), "w") as f:
        f.write("file\twidth\theight\n" + "\n".join(lines) + "\n")
    nets = {network_size(h, w) for h, w in sizes}
    portrait = sum(h > w for h, w in sizes)
    print(f"make_photo_folder: {len(sizes)} JPEGs in {a.out}: {len(set(sizes))} image sizes, "
          f"{len(nets)} network input sizes (800/1333, /32), {portrait} portrait, "
          f"{sum(max(s) == 640 for s in sizes)} with a long side of 640")
    return 0


if __name__ == "__main__":
    sys.exit(main())
