"""detect for real work (issue: folders, JPEG, outputs, --profile).

A folder of good images, corrupt files, an empty file, a text file and a
sub-folder; the per-image and whole-run outputs; the COCO results read back
by pycocotools; filters; profiling; interruption. Weights are seeded random
R-101-FPN weights (tests/parity/oracle.py) at the small input size."""

import io
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from PIL import Image

from conftest import BUILD, CONFIG_SMALL, REPO
from test_cli import rle_decode

DETECT = os.path.join(BUILD, "detect")
EXAMPLE = os.path.join(REPO, "examples", "astronaut.png")


def detect(*args, **kw):
    return subprocess.run([DETECT, "--config", CONFIG_SMALL, *args], capture_output=True, text=True, **kw)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """good: 3 images (PNG, JPEG, grey PNG in a sub-folder); bad: 4 files."""
    d = tmp_path_factory.mktemp("batch") / "photos"
    (d / "sub").mkdir(parents=True)
    img = Image.open(EXAMPLE).convert("RGB")
    img.resize((320, 240)).save(d / "a_photo.png")
    img.resize((300, 200)).save(d / "b_photo.jpg", quality=90)
    img.convert("L").resize((200, 260)).save(d / "sub" / "c_grey.png")
    raw = (d / "a_photo.png").read_bytes()
    (d / "d_truncated.png").write_bytes(raw[: len(raw) // 3])
    (d / "e_empty.png").write_bytes(b"")
    (d / "f_notes.txt").write_text("not an image\n")
    (d / "g_garbage.jpg").write_bytes(b"\xff\xd8\xff" + os.urandom(500))
    (d / "sub" / "h_annotations.json").write_text("{}\n")
    return d


GOOD = ["a_photo", "b_photo", "sub_c_grey"]
# f_notes.txt and sub/h_annotations.json are not inputs: no image extension
INPUT_ORDER = ["a_photo.png", "b_photo.jpg", "d_truncated.png", "e_empty.png", "g_garbage.jpg", "sub/c_grey.png"]
BAD = ["d_truncated.png", "e_empty.png", "g_garbage.jpg"]
NOT_IMAGES = ["f_notes.txt", "h_annotations.json"]


@pytest.fixture(scope="module")
def batch_run(folder, seeded_weights, tmp_path_factory):
    out = tmp_path_factory.mktemp("out")
    r = detect("-q", "--weights", seeded_weights, "--output", str(out / "vis"), "--json", str(out / "all.json"),
               "--coco-results", str(out / "coco.json"), str(folder))
    return r, out


def test_folder_with_bad_files(batch_run):
    r, out = batch_run
    assert r.returncode == 1, r.stderr
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    for bad in BAD:
        assert sum(bad in l for l in lines) == 1, f"{bad} not named exactly once:\n{r.stderr}"
    assert len(lines) == len(BAD), r.stderr  # -q: no summary, and the files that are not images are no errors
    files = sorted(os.listdir(out / "vis"))
    assert files == sorted([g + ".png" for g in GOOD] + [g + ".json" for g in GOOD]), files
    assert not [f for f in os.listdir(out) if ".tmp." in f]


def test_files_without_image_extension_are_counted_not_failed(folder, seeded_weights):
    """Without -q the summary line counts the files that are not images; they are no errors."""
    r = detect("--weights", seeded_weights, "--decode-threads", "0", str(folder))
    assert r.returncode == 1, r.stderr  # the three bad images
    summary = r.stderr.strip().splitlines()[-1]
    assert summary.endswith(f"3 done, 0 skipped, 3 failed; {len(NOT_IMAGES)} files skipped: not images"), r.stderr
    assert not any(n in r.stderr for n in NOT_IMAGES), r.stderr


def test_shapes_dataset_folder(tmp_path):
    """A folder written by models/shapes/shapes_data.py (scenes and annotations.json) runs clean;
    annotations.json named on the command line is still tried, and is not an image."""
    d = tmp_path / "scenes"
    subprocess.run([sys.executable, os.path.join(REPO, "models", "shapes", "shapes_data.py"), str(d), "--count", "2"],
                   check=True, capture_output=True)
    shapes = ["--config", os.path.join(REPO, "configs", "mask_rcnn_R-101-FPN_shapes.json"),
              "--weights", os.path.join(REPO, "models", "shapes_r101_narrow.safetensors")]
    out = tmp_path / "all.json"
    r = subprocess.run([DETECT, *shapes, "--json", str(out), str(d)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stderr.strip().splitlines()[-1].endswith("2 done, 0 skipped, 0 failed; 1 file skipped: not images")
    assert [os.path.basename(im["file"]) for im in json.loads(out.read_text())["images"]] == [
        "000000000001.png", "000000000002.png"]
    one = subprocess.run([DETECT, *shapes, str(d / "000000000001.png")], capture_output=True, text=True)
    assert one.returncode == 0 and "skipped" not in one.stderr, one.stderr
    r = subprocess.run([DETECT, *shapes, "-q", str(d / "annotations.json"), str(d / "000000000001.png")],
                       capture_output=True, text=True)
    assert r.returncode == 1 and r.stderr.count("\n") == 1, r.stderr
    assert "annotations.json" in r.stderr and "not an image" in r.stderr
    (d / "000000000001.png").unlink()
    (d / "000000000002.png").unlink()
    r = subprocess.run([DETECT, *shapes, str(d)], capture_output=True, text=True)
    assert r.returncode == 2 and "no input images (1 file skipped: not images" in r.stderr, r.stderr


def test_visualisations(batch_run, folder):
    _, out = batch_run
    for name, src in [("a_photo", "a_photo.png"), ("b_photo", "b_photo.jpg"), ("sub_c_grey", "sub/c_grey.png")]:
        vis = np.asarray(Image.open(out / "vis" / (name + ".png")).convert("RGB"))
        orig = np.asarray(Image.open(folder / src).convert("RGB"))
        assert vis.shape == orig.shape
        doc = json.loads((out / "vis" / (name + ".json")).read_text())
        if doc["images"][0]["detections"]:
            assert (vis != orig).any(), f"{name}: detections drawn nowhere"


def test_json_documents_agree(batch_run):
    _, out = batch_run
    doc = json.loads((out / "all.json").read_text())
    assert [os.path.basename(im["file"]) for im in doc["images"]] == ["a_photo.png", "b_photo.jpg", "c_grey.png"]
    for im, name in zip(doc["images"], GOOD):
        single = json.loads((out / "vis" / (name + ".json")).read_text())["images"][0]
        assert single == im


def test_coco_results_load_in_pycocotools(batch_run, folder):
    coco_mod = pytest.importorskip("pycocotools.coco")
    mask_mod = pytest.importorskip("pycocotools.mask")
    _, out = batch_run
    doc = json.loads((out / "all.json").read_text())
    results = json.loads((out / "coco.json").read_text())
    n = sum(len(im["detections"]) for im in doc["images"])
    assert len(results) == n and n > 0
    # a ground-truth skeleton with these images and COCO's category ids
    # non-numeric file names get their position in the sorted input list as image id
    ids = [INPUT_ORDER.index(os.path.relpath(im["file"], str(folder))) for im in doc["images"]]
    gt = coco_mod.COCO()
    gt.dataset = {"images": [{"id": i, "width": im["width"], "height": im["height"]}
                             for i, im in zip(ids, doc["images"])],
                  "categories": [{"id": c} for c in range(1, 91)], "annotations": []}
    gt.createIndex()
    res = gt.loadRes(str(out / "coco.json"))
    assert len(res.getAnnIds()) == n
    coco_ids = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 27, 28, 31,
                32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57,
                58, 59, 60, 61, 62, 63, 64, 65, 67, 70, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 84, 85, 86, 87,
                88, 89, 90]
    k = 0
    for i, im in zip(ids, doc["images"]):
        for d in im["detections"]:
            rr = results[k]
            k += 1
            assert rr["image_id"] == i and rr["category_id"] == coco_ids[d["class_id"] - 1]
            x1, y1, x2, y2 = d["box"]
            assert np.allclose(rr["bbox"], [x1, y1, x2 - x1, y2 - y1], atol=1e-4)
            assert abs(rr["score"] - d["score"]) < 1e-6
            ours = rle_decode(d["mask"]["counts"], *d["mask"]["size"])
            theirs = mask_mod.decode({"size": rr["segmentation"]["size"],
                                      "counts": rr["segmentation"]["counts"].encode()})
            assert np.array_equal(ours, theirs)


def test_decoding_ahead_changes_nothing(batch_run, folder, seeded_weights, tmp_path):
    """--decode-threads 0 decodes each image in turn on the main thread; 3
    decodes up to 4 ahead on 3 threads; the default (batch_run) is what the
    machine's cores give. Same detections, same errors in the same order,
    same exit status. The images are the model's input at their own size:
    a mix-up between them would show."""
    _, out = batch_run
    runs = {}
    for n in ["0", "3"]:
        r = detect("--weights", seeded_weights, "--decode-threads", n, "--json", str(tmp_path / f"all{n}.json"),
                   str(folder))
        runs[n] = r
        assert r.returncode == 1, r.stderr
        assert json.loads((tmp_path / f"all{n}.json").read_text()) == json.loads((out / "all.json").read_text())
    assert runs["0"].stdout == runs["3"].stdout and runs["0"].stdout.count(str(folder)) >= len(GOOD)
    errors = [[l for l in r.stderr.splitlines() if str(folder) in l and not l.startswith("detect: [")]
              for r in runs.values()]  # not the progress lines, which carry times
    assert errors[0] == errors[1] and len(errors[0]) == len(BAD), runs["0"].stderr
    for bad, line in zip(BAD, errors[0]):  # in input order
        assert bad in line, errors[0]
    r = detect("--weights", seeded_weights, "--decode-threads", "65", str(folder))
    assert r.returncode == 2 and "--decode-threads" in r.stderr


def test_skip_existing(batch_run, folder, seeded_weights):
    _, out = batch_run
    r = detect("--weights", seeded_weights, "--output", str(out / "vis"), "--skip-existing", str(folder))
    assert r.returncode == 1
    assert r.stderr.count("skipped (outputs exist)") == len(GOOD), r.stderr
    assert r.stdout == ""


def test_list_classes_thresholds(tmp_path, folder, seeded_weights):
    lst = tmp_path / "list.txt"
    lst.write_text(f"# two images\n{folder / 'a_photo.png'}\n\n{folder / 'b_photo.jpg'}\n")
    base = detect("-q", "--weights", seeded_weights, "--json", str(tmp_path / "base.json"), "--list", str(lst))
    assert base.returncode == 0, base.stderr
    dets = [d for im in json.loads((tmp_path / "base.json").read_text())["images"] for d in im["detections"]]
    assert dets
    top = max(dets, key=lambda d: d["score"])
    r = detect("-q", "--weights", seeded_weights, "--json", str(tmp_path / "f.json"), "--list", str(lst),
               "--classes", top["class"], "--score-thresh", "0.3", "--max-dets", "3")
    assert r.returncode == 0, r.stderr
    for im in json.loads((tmp_path / "f.json").read_text())["images"]:
        assert len(im["detections"]) <= 3
        for d in im["detections"]:
            assert d["class"] == top["class"] and d["score"] > 0.3
    bad = detect("--weights", seeded_weights, "--classes", "unicorn", str(folder / "a_photo.png"))
    assert bad.returncode == 2 and "unicorn" in bad.stderr


def test_profile_adds_up(tmp_path, folder, seeded_weights):
    pj = tmp_path / "profile.json"
    r = detect("-q", "--weights", seeded_weights, "--profile", "--profile-runs", "2", "--profile-json", str(pj),
               str(folder / "a_photo.png"), str(folder / "b_photo.jpg"))
    assert r.returncode == 0, r.stderr
    assert "profile summary" in r.stderr and "images/s" in r.stderr
    doc = json.loads(pj.read_text())
    assert len(doc["runs"]) == 4  # 2 images x 2 measured runs
    stages = ["decode", "preprocess", "backbone", "fpn", "rpn", "box_head", "mask_head", "mask_paste", "output"]
    for run in doc["runs"]:
        s = sum(run[k] for k in stages)
        assert abs(s - run["total"]) <= 0.03 * run["total"], run
    assert set(doc["summary"]) == set(stages) | {"total"}
    assert doc["summary"]["total"]["min"] <= doc["summary"]["total"]["median"] <= doc["summary"]["total"]["max"]
    done = [run["finished"] for run in doc["runs"]]  # seconds from the start, as the runs end
    assert all(a < b for a, b in zip(done, done[1:])) and done[-1] <= doc["wall_seconds"]
    assert doc["steady_images_per_second"] == pytest.approx(3 / (done[-1] - done[0]), rel=1e-3)


def test_help_lists_every_option():
    h = subprocess.run([DETECT, "--help"], capture_output=True, text=True).stdout
    for opt in ["--config", "--weights", "--device", "--threads", "--score-thresh", "--max-dets", "--classes",
                "--list", "--skip-existing", "--decode-threads", "--in-flight", "--agnostic-nms", "--output", "--json", "--coco-results",
                "--quiet", "--verbose",
                "--profile", "--profile-runs", "--profile-json", "--help", "--version"]:
        assert opt in h, opt
    assert "default" in h


@pytest.mark.parametrize("device", ["cuda", "cuda:1"])
def test_cuda_asked_without_gpu_is_an_error(folder, seeded_weights, device):
    """A GPU asked for by name and not there: exit 2 and one line naming the device and the cause,
    no detections on the CPU instead. (With the emulator's or a real GPU this runs on it: skipped.)"""
    r = detect("-v", "--weights", seeded_weights, "--device", device, str(folder / "a_photo.png"))
    if r.returncode == 0 and "device cuda:" in r.stderr:
        pytest.skip("a CUDA device is usable here")
    assert r.returncode == 2, r.stderr
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"detect: device {device}: "), r.stderr
    assert "CUDA" in lines[0] and r.stdout == ""


def test_auto_without_gpu_runs_on_the_cpu(folder, seeded_weights):
    r = detect("-v", "--weights", seeded_weights, "--device", "auto", str(folder / "a_photo.png"))
    assert r.returncode == 0, r.stderr
    if "device cpu" not in r.stderr:
        pytest.skip("a CUDA device is usable here")
    assert "notice" not in r.stderr  # no GPU at all: the CPU is the plain choice, not a fallback


def test_unwritable_output(folder, seeded_weights):
    """An output folder that cannot be created (not even by root: /proc refuses it)."""
    out = "/proc/detect-test-output"
    r = detect("--weights", seeded_weights, "--output", out, str(folder / "a_photo.png"))
    assert r.returncode == 2 and out in r.stderr
    assert len([l for l in r.stderr.splitlines() if l.strip()]) == 1


def test_output_on_a_file_is_an_error(tmp_path, folder, seeded_weights):
    f = tmp_path / "file"
    f.write_text("x")
    r = detect("--weights", seeded_weights, "--output", str(f), str(folder / "a_photo.png"))
    assert r.returncode == 2 and str(f) in r.stderr


@pytest.mark.parametrize("how", [["--decode-threads", "0"], ["--decode-threads", "2"], ["--in-flight", "3"]],
                         ids=["decode-in-turn", "decode-ahead", "3-in-flight"])
def test_interrupt_keeps_finished_outputs(tmp_path, folder, seeded_weights, how):
    """Ctrl-C mid-run: the images being run finish (one, or the 3 in flight),
    no other starts; every finished output is whole, and --json holds those
    images, a prefix of the inputs in their order."""
    many = tmp_path / "many"
    many.mkdir()
    for i in range(12):
        (many / f"img{i:02d}.png").write_bytes((folder / "a_photo.png").read_bytes())
    out = tmp_path / "out"
    p = subprocess.Popen([DETECT, "--config", CONFIG_SMALL, "-q", "--weights", seeded_weights, "--output", str(out),
                          "--json", str(tmp_path / "all.json"), *how, str(many)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and not (out.exists() and any(f.endswith(".json") for f in os.listdir(out))):
        time.sleep(0.02)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 130, err
    assert "interrupted" in err
    done = sorted(f[:-5] for f in os.listdir(out) if f.endswith(".json"))
    assert 1 <= len(done) < 12, err
    assert done == [f"img{i:02d}" for i in range(len(done))]
    assert sorted(f[:-4] for f in os.listdir(out) if f.endswith(".png")) == done
    doc = json.loads((tmp_path / "all.json").read_text())  # complete and valid
    assert sorted(os.path.basename(e["file"])[:-4] for e in doc["images"]) == done
    assert not [f for f in os.listdir(out) if ".tmp." in f]


def test_progress_bar_on_a_terminal(folder, seeded_weights):
    """stderr on a pseudo-terminal: a bar redrawn in place; not a terminal: plain lines."""
    import pty
    master, slave = pty.openpty()
    args = [DETECT, "--config", CONFIG_SMALL, "--weights", seeded_weights, str(folder / "a_photo.png"),
            str(folder / "b_photo.jpg")]
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=slave)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 4096)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    p.wait(timeout=120)
    os.close(master)
    tty = b"".join(chunks).decode(errors="replace")
    assert p.returncode == 0
    assert "\r" in tty and "2/2" in tty and "img/s" in tty and "ETA" in tty, tty
    plain = subprocess.run(args, capture_output=True, text=True)
    assert "\r" not in plain.stderr and "[1/2]" in plain.stderr and "[2/2]" in plain.stderr


def run_folder(tmp_path, name, seeded_weights, folder, *extra):
    out = tmp_path / name
    out.mkdir()
    r = detect("--weights", seeded_weights, "--output", str(out / "vis"), "--json", str(out / "all.json"),
               "--coco-results", str(out / "coco.json"), *extra, str(folder))
    return r, out


@pytest.mark.parametrize("in_flight", ["2", "3"])
def test_in_flight_equals_one_at_a_time(tmp_path, folder, seeded_weights, in_flight):
    """--in-flight N: N execution contexts, results collected in input order
    and every output written by the output threads. The reference is the
    one-at-a-time run (--in-flight 1, the serial loop): the same stdout, the
    same documents and per-image files byte for byte, the same errors for the
    bad files in the same order (a bad image in flight is named and the rest
    complete), the same exit status."""
    one, out1 = run_folder(tmp_path, "one", seeded_weights, folder, "--in-flight", "1", "-v")
    many, outn = run_folder(tmp_path, "many", seeded_weights, folder, "--in-flight", in_flight, "-v")
    assert one.returncode == many.returncode == 1, many.stderr
    assert f"in flight: {in_flight} on cpu" in many.stderr and "in flight: 1 on cpu" in one.stderr
    assert many.stdout == one.stdout and one.stdout.count(str(folder)) >= len(GOOD)
    for doc in ["all.json", "coco.json"]:
        assert (outn / doc).read_bytes() == (out1 / doc).read_bytes(), doc
    files = sorted(os.listdir(out1 / "vis"))
    assert files == sorted(os.listdir(outn / "vis")) and len(files) == 2 * len(GOOD)
    for f in files:
        assert (outn / "vis" / f).read_bytes() == (out1 / "vis" / f).read_bytes(), f
    errors = [[l for l in r.stderr.splitlines()
               if str(folder) in l and not l.startswith(("detect: [", "detect: skipped"))] for r in (one, many)]
    assert errors[0] == errors[1] and len(errors[0]) == len(BAD), many.stderr
    # -v names the files that are not images, the same in both
    skipped = [[l for l in r.stderr.splitlines() if l.startswith("detect: skipped")] for r in (one, many)]
    assert skipped[0] == skipped[1] and len(skipped[0]) == len(NOT_IMAGES), many.stderr


def test_in_flight_skip_existing_keeps_documents_whole(tmp_path, folder, seeded_weights):
    """--skip-existing in flight: the skipped images' entries are read back
    in their places, so the documents equal a full run's."""
    full, out = run_folder(tmp_path, "full", seeded_weights, folder, "--in-flight", "1")
    (out / "vis" / "b_photo.json").unlink()  # b_photo runs again; the others are read back
    again = detect("--weights", seeded_weights, "--output", str(out / "vis"), "--skip-existing", "--in-flight", "2",
                   "--json", str(out / "again.json"), str(folder))
    assert again.returncode == 1, again.stderr
    assert again.stderr.count("skipped (outputs exist)") == len(GOOD) - 1, again.stderr
    assert (out / "again.json").read_bytes() == (out / "all.json").read_bytes()


def test_in_flight_out_of_range(folder, seeded_weights):
    for n in ["0", "17", "x"]:
        r = detect("--weights", seeded_weights, "--in-flight", n, str(folder / "a_photo.png"))
        assert r.returncode == 2 and "--in-flight" in r.stderr, r.stderr
