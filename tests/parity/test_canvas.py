"""A fixed canvas (config input.canvas_h/canvas_w, `detect --canvas HxW`,
issue 36): every image padded to one size, so that one CUDA graph serves
every input size. The reference is torchvision padding to the same canvas:
its GeneralizedRCNNTransform.batch_images pads a batch to its largest image
(zeros at the bottom and right), here told to pad to the canvas.

Seeded R-101-FPN weights at the small input size (320..512), a landscape and
a portrait image (so the canvas is larger than each one's own padding in a
different direction), canvas 512x512: every torchvision detection matched
by class at box IoU >= 0.99 with its score within 1e-3 (near-ties at the
score threshold or the 100th place excepted), masks IoU >= 0.98, as
test_e2e.py. And the canvas matters: without it ours differ from the
canvas run, and `--canvas 0x0` gives the no-canvas bytes."""

import os
import subprocess

import numpy as np
import pytest

from conftest import BUILD, CONFIG_SMALL
from metrics import mask_iou, match_detections, near_tie
from test_cli import detect_json_images

CANVAS = (512, 512)
SCORE_THRESH = 0.05
IMAGES = {"landscape": (320, 480), "portrait": (400, 260)}


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    torch = pytest.importorskip("torch")
    import oracle
    torch.set_num_threads(2)
    d = tmp_path_factory.mktemp("canvas")
    model = oracle.build_model(4, min_size=320, max_size=512)
    weights = str(d / "seed4.safetensors")
    oracle.export_weights(model, weights)
    images = {}
    for k, (name, (h, w)) in enumerate(IMAGES.items()):
        img = oracle.make_synthetic_image(h, w, seed=10 + k)
        path = str(d / f"{name}.png")
        oracle.save_png(img, path)
        images[path] = img
    return model, weights, images, d


def torchvision_on_canvas(model, img):
    """torchvision's detections with the batch padded to CANVAS."""
    import torch
    import oracle

    def pad_to_canvas(tensors, size_divisible=32):
        batch = tensors[0].new_zeros((len(tensors), tensors[0].shape[0], *CANVAS))
        for b, t in zip(batch, tensors):
            assert t.shape[1] <= CANVAS[0] and t.shape[2] <= CANVAS[1], t.shape
            b[:, :t.shape[1], :t.shape[2]].copy_(t)
        return batch

    # torchvision's MultiScaleRoIAlign infers each level's scale once, at its
    # first call, as feature height / image height rounded to a power of 2:
    # with a canvas much taller than the image that gives 1/2 for P2, not
    # 1/4. A batch padded by its largest image never meets that; set the
    # scales (1/4 .. 1/32) by a first call without the canvas.
    if model.roi_heads.box_roi_pool.scales is None:
        with torch.no_grad():
            model([oracle.image_tensor(img)])
    for pool in (model.roi_heads.box_roi_pool, model.roi_heads.mask_roi_pool):
        assert pool.scales == [0.25, 0.125, 0.0625, 0.03125], pool.scales
    model.transform.batch_images = pad_to_canvas
    try:
        with torch.no_grad():
            out = model([oracle.image_tensor(img)])[0]
    finally:
        del model.transform.batch_images
    masks = out["masks"][:, 0].numpy() > 0.5
    return (out["boxes"].numpy(), out["scores"].numpy(), out["labels"].numpy()), masks


def ours(weights, paths, out, *extra):
    r = subprocess.run([os.path.join(BUILD, "detect"), "--config", CONFIG_SMALL, "--weights", weights, "--device",
                        "cpu", "-q", "--json", str(out), *extra, *paths], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return detect_json_images(out)


def test_canvas_equals_torchvision_padded_alike(setup):
    model, weights, images, d = setup
    got = ours(weights, list(images), d / "canvas.json", "--canvas", f"{CANVAS[0]}x{CANVAS[1]}")
    for (path, (boxes, scores, labels), masks), img in zip(got, images.values()):
        (rb, rs, rl), ref_masks = torchvision_on_canvas(model, img)
        assert len(rb) > 5, "too few torchvision detections to compare"
        pairs, missed, extra = match_detections(rb, rs, rl.astype(int), boxes, scores, labels.astype(int), iou=0.99,
                                                score_tol=1e-3)
        cuts = [SCORE_THRESH] + ([rs.min()] if len(rs) >= 100 else []) + ([scores.min()] if len(scores) >= 100 else [])
        missed = [i for i in missed if not near_tie(rs[i], cuts, 2e-4)]
        extra = [j for j in extra if not near_tie(scores[j], cuts, 2e-4)]
        ious = [mask_iou(masks[j], ref_masks[i]) for i, j in pairs]
        print(f"{os.path.basename(path)}: ours {len(boxes)} torchvision {len(rb)} matched {len(pairs)}, "
              f"mask IoU min {min(ious, default=1):.4f}")
        assert not missed and not extra, (missed, extra)
        assert min(ious) >= 0.98


def test_canvas_changes_results_and_0x0_is_none(setup):
    _, weights, images, d = setup
    paths = list(images)
    own = ours(weights, paths, d / "own.json")
    ours(weights, paths, d / "none.json", "--canvas", "0x0")
    assert (d / "none.json").read_bytes() == (d / "own.json").read_bytes()
    canvas = ours(weights, paths, d / "canvas2.json", "--canvas", f"{CANVAS[0]}x{CANVAS[1]}")
    for (_, (_, s_own, _), _), (_, (_, s_canvas, _), _) in zip(own, canvas):
        assert len(s_own) != len(s_canvas) or not np.array_equal(s_own, s_canvas), \
            "the canvas changed nothing: this test could not tell it from no canvas"
