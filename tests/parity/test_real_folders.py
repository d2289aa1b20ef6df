"""Real folders and first use (issue 47): nothing in a folder stops a run, an unusual input is named
with its reason, the option at fault is the one named, and the first commands a user types work.

Each odd entry (a FIFO, a socket, a folder named x.png, a symbolic link loop, a dangling link) is
tried alone and in a folder with two good scenes: alone it fails at once by name (exit 1; an empty
folder: "no input images", exit 2), in the folder it is skipped by name and the good scenes complete
(exit 0). Every run has a timeout, so a FIFO that blocks is a failure, not a hang. The demo model
on the shipped scenes; its outputs are compared with a run on the good scenes alone."""

import json
import os
import socket
import subprocess
import sys

import pytest

from conftest import BUILD, REPO

DETECT = os.path.join(BUILD, "detect")
CONFIG = os.path.join(REPO, "configs", "mask_rcnn_R-101-FPN_shapes.json")
WEIGHTS = os.path.join(REPO, "models", "shapes_r101_narrow.safetensors")
MODEL = ["--config", CONFIG, "--weights", WEIGHTS]
SCENES = [os.path.join(REPO, "examples", "shapes", f"scene_{k}.png") for k in (1, 2)]


def detect(*args, cwd=None):
    return subprocess.run([DETECT, *args], capture_output=True, text=True, timeout=120, cwd=cwd)


@pytest.fixture(scope="module")
def good_detections(tmp_path_factory):
    out = tmp_path_factory.mktemp("good") / "good.json"
    r = detect(*MODEL, "-q", "--json", str(out), *SCENES)
    assert r.returncode == 0, r.stderr
    return [e["detections"] for e in json.loads(out.read_text())["images"]]


def folder_with(tmp_path, make):
    """tmp_path/f holding the two scenes and the odd entry `make(folder)` creates; returns (folder, entry)."""
    f = tmp_path / "f"
    f.mkdir()
    for k, s in enumerate(SCENES):
        os.symlink(s, f / f"good_{k}.png")
    return f, make(f)


def fifo(f):
    os.mkfifo(f / "x.png")
    return f / "x.png"


def unix_socket(f):
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(f / "s.png"))  # stays a socket file after the close
    s.close()
    return f / "s.png"


def dir_named_png(f):
    (f / "x.png").mkdir()
    return f / "x.png"


def link_loop(f):
    os.symlink("loop.png", f / "loop.png")
    return f / "loop.png"


def dangling(f):
    os.symlink("nowhere.png", f / "dangling.png")
    return f / "dangling.png"


ODD = {"FIFO": (fifo, "not a regular file (a FIFO)"), "socket": (unix_socket, "not a regular file (a socket"),
       "symlink loop": (link_loop, "a symbolic link loop"), "dangling link": (dangling, "a dangling symbolic link")}


@pytest.mark.parametrize("kind", sorted(ODD))
def test_odd_entry_alone_fails_at_once_by_name(tmp_path, kind):
    make, reason = ODD[kind]
    _, entry = folder_with(tmp_path, make)
    r = detect(*MODEL, "-q", str(entry))
    assert r.returncode == 1, r.stderr
    assert r.stderr.startswith(f"detect: {entry}: ") and reason in r.stderr, r.stderr
    assert r.stderr.count("\n") == 1, r.stderr


@pytest.mark.parametrize("kind", sorted(ODD) + ["folder named x.png"])
def test_odd_entry_in_a_folder_is_skipped_and_the_rest_runs(tmp_path, kind, good_detections):
    make, reason = ODD.get(kind, (dir_named_png, None))
    f, entry = folder_with(tmp_path, make)
    out = tmp_path / "all.json"
    r = detect(*MODEL, "--json", str(out), str(f))
    assert r.returncode == 0, r.stderr
    if reason:  # named once, with its reason, and counted in the summary
        assert r.stderr.count(str(entry)) == 1 and f"detect: skipped {entry}: {reason}" in r.stderr, r.stderr
        assert "1 skipped: not regular files, broken links or folders met again" in r.stderr, r.stderr
    assert [e["detections"] for e in json.loads(out.read_text())["images"]] == good_detections


def test_folder_named_png_alone_is_a_folder(tmp_path):
    d = tmp_path / "x.png"
    d.mkdir()
    r = detect(*MODEL, str(d))
    assert r.returncode == 2 and "no input images" in r.stderr, r.stderr


def test_directory_cycle_is_named_once_and_the_rest_runs(tmp_path, good_detections):
    """B/sub/back -> ../../B: the folder is walked once; the link back is named once; no depth error."""
    f, _ = folder_with(tmp_path, lambda f: None)
    (f / "sub").mkdir()
    os.symlink("../../f", f / "sub" / "back")
    out = tmp_path / "all.json"
    r = detect(*MODEL, "--json", str(out), str(f))
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("back") == 1 and f"skipped {f}/sub/back: the folder {f} again" in r.stderr, r.stderr
    assert "deeper" not in r.stderr
    assert [e["detections"] for e in json.loads(out.read_text())["images"]] == good_detections


def test_unsupported_formats_named_with_what_to_do(tmp_path, good_detections):
    f, _ = folder_with(tmp_path, lambda f: None)
    heic = b"\0\0\0\x18ftypheic\0\0\0\0mif1heic" + bytes(64)
    avif = b"\0\0\0\x1cftypavif\0\0\0\0avifmif1miaf" + bytes(64)
    (f / "h.heic").write_bytes(heic)
    (f / "a.avif").write_bytes(avif)
    (f / "renamed.jpg").write_bytes(heic)  # told by content, not name
    out = tmp_path / "all.json"
    r = detect(*MODEL, "-q", "--json", str(out), str(f))
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert sorted(lines) == sorted([f"detect: {f}/a.avif: AVIF image: not supported; convert it to JPEG or PNG",
                                    f"detect: {f}/h.heic: HEIC image: not supported; convert it to JPEG or PNG",
                                    f"detect: {f}/renamed.jpg: HEIC image: not supported; convert it to JPEG or PNG"])
    assert [e["detections"] for e in json.loads(out.read_text())["images"]] == good_detections


def test_verbose_names_every_skipped_file(tmp_path):
    f, _ = folder_with(tmp_path, lambda f: None)
    (f / "notes.txt").write_text("x")
    (f / "annotations.json").write_text("{}")
    quiet = detect(*MODEL, str(f))
    assert "notes.txt" not in quiet.stderr and "2 files skipped: not images" in quiet.stderr, quiet.stderr
    r = detect(*MODEL, "-v", str(f))
    assert r.returncode == 0, r.stderr
    for name in ("notes.txt", "annotations.json"):
        assert f"detect: skipped {f}/{name}: not an image (no image extension)" in r.stderr, r.stderr


@pytest.mark.parametrize("command", [[], ["calibrate"]], ids=["detect", "calibrate"])
def test_option_error_names_the_bad_word(tmp_path, command):
    prog = "detect calibrate" if command else "detect"
    r = detect(*command, *MODEL, "-leading-dash.png")
    assert r.returncode == 2
    assert r.stderr.startswith(f'{prog}: unknown option "-l" in "-leading-dash.png"'), r.stderr
    assert "./-leading-dash.png" in r.stderr and WEIGHTS not in r.stderr, r.stderr
    r = detect(*command, *MODEL, "--no-such-option", SCENES[0])
    assert r.returncode == 2 and '"--no-such-option"' in r.stderr and WEIGHTS not in r.stderr, r.stderr


def test_json_into_a_missing_folder(tmp_path):
    out = tmp_path / "a" / "b" / "all.json"
    coco = tmp_path / "c" / "coco.json"
    r = detect(*MODEL, "-q", "--json", str(out), "--coco-results", str(coco), "--output", str(tmp_path / "v" / "w"),
               SCENES[0])
    assert r.returncode == 0, r.stderr
    assert json.loads(out.read_text())["images"] and json.loads(coco.read_text())
    assert (tmp_path / "v" / "w" / "scene_1.png").is_file()


def test_calibrate_names_the_file_it_wrote(tmp_path):
    w = tmp_path / "model.safetensors"
    os.symlink(WEIGHTS, w)
    r = detect("calibrate", "--config", CONFIG, "--weights", str(w), "--count", "1", SCENES[0])
    assert r.returncode == 0, r.stderr
    assert r.stderr.strip().endswith(f"written to {tmp_path}/model.int8.json"), r.stderr
    assert (tmp_path / "model.int8.json").is_file()


def test_list_paths_are_relative_to_the_current_folder(tmp_path):
    """docs/usage.md: as on the command line, not to the list's folder."""
    (tmp_path / "lists").mkdir()
    lst = tmp_path / "lists" / "l.txt"
    lst.write_text("examples/shapes/scene_1.png\n")
    r = detect(*MODEL, "-q", "--list", str(lst), cwd=REPO)
    assert r.returncode == 0, r.stderr


def test_version_is_the_library_release():
    header = next(l for l in open(os.path.join(REPO, "include", "detect.h"))
                  if l.startswith("#define DETECT_VERSION_STRING")).split('"')[1]
    assert detect("--version").stdout.split() == ["detect", header]
    toml = open(os.path.join(REPO, "pyproject.toml")).read()
    assert f'version = "{header}"' in toml


def test_demo_model_suggests_a_config_that_loads_it():
    """The shipped weights' metadata names the config to use with them (models/README.md): it runs."""
    sys.path.insert(0, os.path.join(REPO, "models"))
    import safetensors_io
    meta = safetensors_io.load(WEIGHTS)[1]
    assert meta["suggested_config"] == "configs/mask_rcnn_R-101-FPN_shapes.json"
    r = detect("--config", meta["suggested_config"], "--weights", WEIGHTS, "-q", SCENES[0], cwd=REPO)
    assert r.returncode == 0, r.stderr
