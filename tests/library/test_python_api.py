"""The Python package as `pip install .` gives it, against detect --json."""

import os
import threading
import time

import numpy as np
import pytest

from conftest import CONFIG, WEIGHTS

detect = pytest.importorskip("detect")


@pytest.fixture(scope="module")
def model():
    with detect.Model(CONFIG, WEIGHTS, device="cpu") as m:
        yield m


def assert_equals_cli(r, entry):
    """Bitwise: boxes and scores are the float32s the CLI printed with 9
    digits, class ids and RLE strings equal."""
    dets = entry["detections"]
    assert (r.width, r.height) == (entry["width"], entry["height"])
    assert len(r) == len(dets)
    np.testing.assert_array_equal(r.boxes, np.array([d["box"] for d in dets], np.float32).reshape(-1, 4))
    np.testing.assert_array_equal(r.scores, np.array([d["score"] for d in dets], np.float32))
    assert list(r.class_ids) == [d["class_id"] for d in dets]
    assert r.class_names == [d["class"] for d in dets]
    assert [m["counts"] for m in r.masks_rle] == [d["mask"]["counts"] for d in dets]
    assert all(m["size"] == d["mask"]["size"] for m, d in zip(r.masks_rle, dets))


def test_paths_equal_cli(model, images, reference):
    ref, _ = reference
    for p in images:
        r = model(p)
        assert_equals_cli(r, ref[p])
        assert r.to_json(p) == ref[p]


def test_arrays_and_bytes_equal_cli(model, images, reference):
    from PIL import Image
    ref, _ = reference
    for p in images[:3] + images[-2:]:
        rgb = np.asarray(Image.open(p).convert("RGB"))
        assert_equals_cli(model(rgb), ref[p])
        # a strided view (every pixel of a wider buffer) and RGBA
        wide = np.zeros((rgb.shape[0], rgb.shape[1] + 7, 3), np.uint8)
        wide[:, :rgb.shape[1]] = rgb
        assert_equals_cli(model(wide[:, :rgb.shape[1]]), ref[p])
        assert_equals_cli(model(np.dstack([rgb, np.full(rgb.shape[:2], 9, np.uint8)])), ref[p])
        with open(p, "rb") as f:
            assert_equals_cli(model(f.read()), ref[p])


def test_masks_agree_with_pycocotools(model, images):
    mask_util = pytest.importorskip("pycocotools.mask")
    r = model(images[0])
    assert len(r) > 0 and r.masks.dtype == bool and r.masks.shape == (len(r), r.height, r.width)
    for rle, m in zip(r.masks_rle, r.masks):
        np.testing.assert_array_equal(mask_util.decode({"size": rle["size"], "counts": rle["counts"].encode()}), m)


def test_four_threads_equal_serial(model, images):
    serial = [model(p) for p in images]
    results = [None] * len(images)
    errors = []

    def worker(k):
        try:
            for i in range(k, len(images), 4):
                results[i] = model(images[i])
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for a, b in zip(serial, results):
        np.testing.assert_array_equal(a.boxes, b.boxes)
        np.testing.assert_array_equal(a.scores, b.scores)
        assert a.masks_rle == b.masks_rle


def test_two_models_in_one_process(images, reference):
    ref, _ = reference
    with detect.Model(CONFIG, WEIGHTS, device="cpu", threads=1) as a, \
            detect.Model(CONFIG, WEIGHTS, device="cpu", threads=1) as b:
        for p in images[:4]:
            assert_equals_cli(a(p), ref[p])
            assert_equals_cli(b(p), ref[p])


def test_gil_released_during_a_run(model, images):
    """Python code runs on another thread while the model computes: the main
    thread ticks inside the interior of a model call (with the GIL held for
    the call it could not run at all there)."""
    spans = []

    def run():
        for _ in range(3):
            t0 = time.perf_counter()
            model(images[0])
            spans.append((t0, time.perf_counter()))

    ticks = []
    t = threading.Thread(target=run)
    t.start()
    while t.is_alive():
        ticks.append(time.perf_counter())
    t.join()
    t0, t1 = max(spans, key=lambda s: s[1] - s[0])
    inside = [x for x in ticks if t0 + 0.01 < x < t1 - 0.01]
    assert t1 - t0 > 0.03 and len(inside) > 100, (spans, len(inside))


def test_options(images, reference):
    ref, _ = reference
    with detect.Model(CONFIG, WEIGHTS, device="cpu", score_threshold=0.8, classes=["star", "circle"],
                      max_detections=3) as m:
        for p in images[:6]:
            r = m(p)
            # the model keeps the best 3 above the threshold; the class filter then applies to those
            best = [d for d in ref[p]["detections"] if d["score"] >= 0.8][:3]
            assert r.to_json(p)["detections"] == [d for d in best if d["class"] in ("star", "circle")]
    # a GPU asked for by name: that GPU, or an exception naming the cause, never the CPU instead
    try:
        m2 = detect.Model(CONFIG, WEIGHTS, device="cuda:0", precision="fp16")
    except detect.DetectError as e:
        assert e.status == "DETECT_ERR_UNSUPPORTED" and "device cuda:0: " in str(e)
    else:
        assert m2.device == "cuda:0"
        m2.close()
    m3 = detect.Model(CONFIG, WEIGHTS, device="auto")
    assert m3.device in ("cpu", "cuda:0")
    m3.close()


def test_pil_images_and_array_interfaces_equal_cli(model, images, reference):
    """A PIL image in any mode (P through its convert("RGB"), as the file's own RGB) and any object that
    exposes __array_interface__ run as the same pixels as a numpy array; run_many takes them too."""
    from PIL import Image
    ref, _ = reference

    class Exposed:  # what a non-numpy container (a tensor, a buffer) gives
        def __init__(self, arr):
            self.arr = arr
            self.__array_interface__ = arr.__array_interface__

    for p in images[:2] + images[-1:]:
        im = Image.open(p)
        assert_equals_cli(model(im), ref[p])
        assert_equals_cli(model(im.convert("RGBA")), ref[p])
        assert_equals_cli(model(Exposed(np.asarray(im.convert("RGB")))), ref[p])
    grey = Image.open(images[0]).convert("L")
    np.testing.assert_array_equal(model(grey).boxes, model(np.asarray(grey)).boxes)
    pal = Image.open(images[0]).convert("P")
    np.testing.assert_array_equal(model(pal).boxes, model(np.asarray(pal.convert("RGB"))).boxes)
    out = list(model.run_many([Image.open(images[0]), images[1]]))
    assert_equals_cli(out[0], ref[images[0]])
    assert_equals_cli(out[1], ref[images[1]])


def test_bad_inputs_raise(model, tmp_path, images):
    with pytest.raises(detect.DetectError, match="nonexistent.png: cannot open") as e:
        model(str(tmp_path / "nonexistent.png"))
    assert e.value.status == "DETECT_ERR_IO"
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(b"\xff\xd8\xff\xe0" + b"\0" * 50)
    with pytest.raises(detect.DetectError, match="bad.jpg: .*JPEG"):
        model(str(bad))
    with pytest.raises(detect.DetectError, match="not an image") as e:
        model(b"hello world")
    assert e.value.status == "DETECT_ERR_FORMAT"
    with pytest.raises(detect.DetectError, match="empty"):
        model(b"")
    with pytest.raises(detect.DetectError, match="uint8"):
        model(np.zeros((10, 10, 3), np.float32))
    with pytest.raises(detect.DetectError, match="shape"):
        model(np.zeros((10, 10, 5), np.uint8))
    with pytest.raises(detect.DetectError, match="expected a path"):
        model(42)
    fifo = tmp_path / "fifo.png"
    os.mkfifo(fifo)  # opened without blocking and refused: a run never waits on it
    with pytest.raises(detect.DetectError, match="fifo.png: not a regular file \\(a FIFO\\)") as e:
        model(str(fifo))
    assert e.value.status == "DETECT_ERR_IO"
    out = list(model.run_many([str(fifo), images[0]], errors="return"))
    assert isinstance(out[0], detect.DetectError) and "not a regular file" in str(out[0]) and len(out[1]) > 0
    with pytest.raises(detect.DetectError, match="max_image_side|larger|side"):
        model(np.zeros((30000, 1, 3), np.uint8))
    with pytest.raises(detect.DetectError, match="nope.json: cannot open"):
        detect.Model(str(tmp_path / "nope.json"), WEIGHTS)
    with pytest.raises(detect.DetectError, match="no class named \"zebra\""):
        detect.Model(CONFIG, WEIGHTS, device="cpu", classes=["zebra"])
    with pytest.raises(detect.DetectError, match="device tpu"):
        detect.Model(CONFIG, WEIGHTS, device="tpu")
    w = tmp_path / "w.safetensors"
    w.write_bytes(b"garbage")
    with pytest.raises(detect.DetectError, match="w.safetensors"):
        detect.Model(CONFIG, str(w), device="cpu")
    # the model still works after all of that
    assert len(model(images[0])) > 0


def test_run_many_in_flight_equals_cli(images, reference, tmp_path):
    """3 images in flight through the library's run queue (3 execution
    contexts): paths decoded on its workers, arrays and bytes decoded here,
    a file that does not decode among them (errors="return": its
    DetectError in its place, the rest complete), against the CLI's
    one-at-a-time run, in input order."""
    from PIL import Image
    ref, _ = reference
    bad = tmp_path / "broken.png"
    bad.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 40)
    with detect.Model(CONFIG, WEIGHTS, device="cpu", in_flight=3) as m:
        assert m.in_flight == 3 and m.device_memory == [0, 0, 0]
        inputs = list(images[:4]) + [str(bad)] + list(images[4:])
        got = list(m.run_many(inputs, errors="return"))
        assert len(got) == len(inputs)
        for p, r in zip(inputs, got):
            if p == str(bad):
                assert isinstance(r, detect.DetectError) and "broken.png" in str(r), r
            else:
                assert_equals_cli(r, ref[p])
        arrays = [np.asarray(Image.open(p).convert("RGB")) for p in images[:3]]
        blobs = [open(p, "rb").read() for p in images[3:6]]
        for p, r in zip(images[:6], m.run_many(arrays + blobs, depth=2)):
            assert_equals_cli(r, ref[p])
        with pytest.raises(detect.DetectError, match="broken.png"):
            list(m.run_many([images[0], str(bad), images[1]]))  # errors="raise", the default
        pending = m.run_many(images)
        next(pending)
    with pytest.raises(detect.DetectError, match="closed"):  # close() stopped its queue
        next(pending)


def test_closed_model_raises_and_results_stay_valid(images):
    m = detect.Model(CONFIG, WEIGHTS, device="cpu")
    r = m(images[0])
    m.close()
    m.close()  # twice is fine
    with pytest.raises(detect.DetectError, match="closed"):
        m(images[0])
    assert r.masks.shape[0] == len(r) and len(r.masks_rle) == len(r)


def test_config_as_json_text(images, reference):
    ref, _ = reference
    with open(CONFIG) as f:
        text = f.read()
    with detect.Model(text, WEIGHTS, device="cpu") as m:
        assert_equals_cli(m(images[0]), ref[images[0]])


def test_bf16_equals_cli_bf16(prefix, images):
    """precision="bf16" on the CPU: the same bytes as detect --precision bf16, or, on a CPU
    without AVX512_BF16 or AMX, DetectError DETECT_ERR_UNSUPPORTED naming the cause."""
    from conftest import cli_json
    try:
        m = detect.Model(CONFIG, WEIGHTS, device="cpu", precision="bf16")
    except detect.DetectError as e:
        assert e.status == "DETECT_ERR_UNSUPPORTED" and "needs a CPU with AVX512_BF16 or AMX" in str(e)
        pytest.skip(f"no bf16 on this CPU: {e}")
    doc, _ = cli_json(prefix, images[:4], "--precision", "bf16")
    with m:
        for entry in doc["images"]:
            r = m(entry["file"])
            assert_equals_cli(r, entry)


def test_int8_equals_cli_int8(prefix, images, tmp_path):
    """precision="int8" on the CPU: the same bytes as detect --precision int8 (the ranges shipped
    beside the demo weights); weights without ranges beside them: DetectError DETECT_ERR_CONFIG
    naming the missing file."""
    from conftest import cli_json
    doc, _ = cli_json(prefix, images[:4], "--precision", "int8")
    with detect.Model(CONFIG, WEIGHTS, device="cpu", precision="int8") as m:
        for entry in doc["images"]:
            assert_equals_cli(m(entry["file"]), entry)
    bare = tmp_path / "bare.safetensors"
    bare.write_bytes(open(WEIGHTS, "rb").read())
    with pytest.raises(detect.DetectError) as e:
        detect.Model(CONFIG, str(bare), device="cpu", precision="int8")
    assert e.value.status == "DETECT_ERR_CONFIG" and f"{tmp_path}/bare.int8.json does not exist" in str(e.value)
