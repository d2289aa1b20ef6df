"""engine/io/coco_results.c against pycocotools, through ctypes.

A results file built by coco_results_add / coco_results_write must be
accepted by pycocotools' COCO.loadRes; every mask must come back exactly
from pycocotools.mask.decode (and its counts string equal
pycocotools.mask.encode's); boxes, scores and ids must be what we put in;
and COCOeval, given ground truth made of the same masks, must score
segm AP 1.0.

Run with /usr/bin/python3 -m pytest tests/parity/test_coco_results.py."""

import contextlib
import ctypes as C
import io
import json

import numpy as np
import pytest

from conftest import engine_library_path

pycocotools = pytest.importorskip("pycocotools")
from pycocotools import mask as mask_utils  # noqa: E402
from pycocotools.coco import COCO  # noqa: E402
from pycocotools.cocoeval import COCOeval  # noqa: E402

MR_OK = 0
COCO_IDS = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 27, 28,
            31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55,
            56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 67, 70, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 84,
            85, 86, 87, 88, 89, 90]
# mr_config is opaque here: config_parse fills it, coco_results_add reads
# it. sizeof(mr_config) is about 70 KB (64 KB of class names); 1 MiB is
# ample.
CONFIG_BYTES = 1 << 20


class Error(C.Structure):  # engine/core/status.h: mr_error
    _fields_ = [("status", C.c_int), ("msg", C.c_char * 1024)]


class MaskWindow(C.Structure):  # engine/ops/mask_paste.h: mr_mask_window
    _fields_ = [(n, C.c_int) for n in ("x0", "y0", "w", "h")]


class Detection(C.Structure):  # engine/model/model.h: mr_detection
    _fields_ = [("box", C.c_float * 4), ("score", C.c_float), ("class_id", C.c_int),
                ("mask", C.POINTER(C.c_uint8)), ("mask_win", MaskWindow)]


class Result(C.Structure):  # engine/model/model.h: mr_result
    _fields_ = [("width", C.c_int), ("height", C.c_int), ("count", C.c_int),
                ("dets", C.POINTER(Detection)), ("mask_storage", C.POINTER(C.c_uint8))]


def mask_window(m, margin):
    """The mask as the engine holds it (model.h): only a window, here its set
    pixels' bounding box grown by `margin` and clipped (empty when none is
    set). Returns (x0, y0, w, h) and the window's bytes."""
    ys, xs = np.nonzero(m)
    if len(ys) == 0:
        return (0, 0, 0, 0), np.zeros(1, np.uint8)
    h, w = m.shape
    y0, y1 = max(int(ys.min()) - margin, 0), min(int(ys.max()) + margin, h - 1)
    x0, x1 = max(int(xs.min()) - margin, 0), min(int(xs.max()) + margin, w - 1)
    return (x0, y0, x1 - x0 + 1, y1 - y0 + 1), np.ascontiguousarray(m[y0:y1 + 1, x0:x1 + 1])


@pytest.fixture(scope="module")
def lib():
    L = C.CDLL(engine_library_path())
    L.config_parse.argtypes = [C.c_void_p, C.c_char_p, C.c_char_p, C.POINTER(Error)]
    L.coco_results_create.argtypes = [C.POINTER(C.c_void_p), C.POINTER(Error)]
    L.coco_results_add.argtypes = [C.c_void_p, C.c_int, C.POINTER(Result), C.c_void_p, C.POINTER(Error)]
    L.coco_results_write.argtypes = [C.c_void_p, C.c_char_p, C.POINTER(Error)]
    L.coco_results_free.argtypes = [C.c_void_p]
    L.coco_image_id.argtypes = [C.c_char_p, C.c_int]
    L.coco_category_id.argtypes = [C.c_void_p, C.c_int]
    return L


@pytest.fixture(scope="module")
def coco_cfg(lib):
    cfg = C.create_string_buffer(CONFIG_BYTES)
    err = Error()
    assert lib.config_parse(cfg, b"{}", b"test", C.byref(err)) == MR_OK, err.msg.decode()
    return cfg


def random_masks(rng, h, w, n):
    """Blobs, plus the edge cases: empty, full, first pixel set, one pixel."""
    y, x = np.mgrid[0:h, 0:w]
    masks = []
    for i in range(n):
        cy, cx, r = rng.uniform(0, h), rng.uniform(0, w), rng.uniform(2, max(3, min(h, w) / 2))
        m = ((y - cy) ** 2 + (x - cx) ** 2 < r * r) ^ (rng.random((h, w)) < 0.05)
        masks.append(m.astype(np.uint8))
    masks[0] = np.zeros((h, w), np.uint8)
    masks[1] = np.ones((h, w), np.uint8)
    masks[2][0, 0] = 1
    masks[3] = np.zeros((h, w), np.uint8)
    masks[3][h // 2, w // 3] = 1
    return masks


def make_images(rng):
    """(file name, h, w, masks, boxes, scores, class ids) for three images."""
    images = []
    for name, h, w in [("val2017/000000000139.jpg", 47, 63), ("000000397133.jpg", 80, 31), ("photo.png", 5, 9)]:
        n = 6
        masks = random_masks(rng, h, w, n)
        x1 = rng.uniform(0, w / 2, n).astype(np.float32)
        y1 = rng.uniform(0, h / 2, n).astype(np.float32)
        boxes = np.stack([x1, y1, x1 + rng.uniform(0.5, w / 2, n).astype(np.float32),
                          y1 + rng.uniform(0.5, h / 2, n).astype(np.float32)], 1).astype(np.float32)
        scores = np.sort(rng.random(n).astype(np.float32))[::-1].copy()
        classes = rng.integers(1, 81, n)
        classes[0], classes[1] = 12, 80
        images.append((name, h, w, masks, boxes, scores, classes))
    return images


def write_results(lib, cfg, images, path):
    doc, err = C.c_void_p(), Error()
    assert lib.coco_results_create(C.byref(doc), C.byref(err)) == MR_OK
    ids = []
    try:
        for index, (name, h, w, masks, boxes, scores, classes) in enumerate(images):
            # windows tight (margin 0), loose, and the whole image (margin h + w)
            keep = [mask_window(m, (0, 2, h + w)[i % 3]) for i, m in enumerate(masks)]
            dets = (Detection * len(masks))()
            for i, (win, m) in enumerate(keep):
                dets[i].box[:] = [float(v) for v in boxes[i]]
                dets[i].score = float(scores[i])
                dets[i].class_id = int(classes[i])
                dets[i].mask = m.ctypes.data_as(C.POINTER(C.c_uint8))
                dets[i].mask_win = MaskWindow(*win)
            res = Result(width=w, height=h, count=len(masks), dets=dets)
            image_id = lib.coco_image_id(name.encode(), 1000 + index)
            ids.append(image_id)
            assert lib.coco_results_add(doc, image_id, C.byref(res), cfg, C.byref(err)) == MR_OK, err.msg.decode()
        assert lib.coco_results_write(doc, str(path).encode(), C.byref(err)) == MR_OK, err.msg.decode()
    finally:
        lib.coco_results_free(doc)
    return ids


def ground_truth(images, ids):
    gt = COCO()
    anns = []
    for image_id, (_, h, w, masks, _, _, classes) in zip(ids, images):
        for m, c in zip(masks, classes):
            if not m.any():
                continue
            rle = mask_utils.encode(np.asfortranarray(m))
            rle["counts"] = rle["counts"].decode()
            anns.append({"id": len(anns) + 1, "image_id": image_id, "category_id": COCO_IDS[c - 1],
                         "segmentation": rle, "area": float(mask_utils.area(rle)),
                         "bbox": [float(v) for v in mask_utils.toBbox(rle)], "iscrowd": 0})
    gt.dataset = {"images": [{"id": i, "height": im[1], "width": im[2]} for i, im in zip(ids, images)],
                  "categories": [{"id": c, "name": str(c)} for c in COCO_IDS], "annotations": anns}
    with contextlib.redirect_stdout(io.StringIO()):
        gt.createIndex()
    return gt


def test_category_table(lib, coco_cfg):
    assert [lib.coco_category_id(coco_cfg, c) for c in range(1, 81)] == COCO_IDS


def test_results_load_in_pycocotools(lib, coco_cfg, tmp_path):
    rng = np.random.default_rng(2024)
    images = make_images(rng)
    path = tmp_path / "results.json"
    ids = write_results(lib, coco_cfg, images, path)
    assert ids == [139, 397133, 1002]

    raw = json.loads(path.read_text())
    assert len(raw) == sum(len(im[3]) for im in images)
    gt = ground_truth(images, ids)
    with contextlib.redirect_stdout(io.StringIO()):
        dt = gt.loadRes(str(path))
    k = 0
    for image_id, (_, h, w, masks, boxes, scores, classes) in zip(ids, images):
        for i, m in enumerate(masks):
            e = raw[k]
            ann = dt.anns[k + 1]  # loadRes numbers annotations from 1 in file order
            k += 1
            assert e["image_id"] == ann["image_id"] == image_id
            assert e["category_id"] == COCO_IDS[classes[i] - 1]
            assert np.float32(e["score"]) == scores[i]
            x1, y1, x2, y2 = boxes[i]
            assert np.array(e["bbox"], np.float32).tolist() == [x1, y1, x2 - x1, y2 - y1]
            assert e["segmentation"]["size"] == [h, w]
            np.testing.assert_array_equal(mask_utils.decode(ann["segmentation"]), m)
            assert e["segmentation"]["counts"].encode() == mask_utils.encode(np.asfortranarray(m))["counts"]

    # Ground truth of the same masks: every non-empty detection matches
    # its own annotation at IoU 1, so segm AP is 1. (Empty masks have no
    # annotation and would count as false positives; they are left out.)
    nonempty = [e for e in raw if mask_utils.area(e["segmentation"]) > 0]
    path2 = tmp_path / "nonempty.json"
    path2.write_text(json.dumps(nonempty))
    with contextlib.redirect_stdout(io.StringIO()):
        ev = COCOeval(gt, gt.loadRes(str(path2)), "segm")
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    assert ev.stats[0] == pytest.approx(1.0)
