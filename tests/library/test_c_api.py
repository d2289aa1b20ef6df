"""The C library as a program that embeds it sees it: the installed tree,
pkg-config, examples/embed.c, and its detections against detect --json."""

import os
import subprocess

import pytest

from conftest import CONFIG, REPO, WEIGHTS, cli_json


def pkg_config(prefix, *args):
    env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(prefix, "lib", "pkgconfig"))
    return subprocess.run(["pkg-config", *args, "detect"], env=env, check=True, capture_output=True,
                          text=True).stdout.split()


@pytest.fixture(scope="module")
def embed(prefix, tmp_path_factory):
    exe = str(tmp_path_factory.mktemp("embed") / "embed")
    subprocess.run(["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", os.path.join(REPO, "examples", "embed.c"),
                    *pkg_config(prefix, "--cflags", "--libs"), "-lpthread", "-o", exe], check=True)
    return exe


def test_installed_tree(prefix):
    lib = os.path.join(prefix, "lib")
    real = [f for f in os.listdir(lib) if f.startswith("libdetect.so.") and f.count(".") == 4]
    assert len(real) == 1, os.listdir(lib)
    # soname = libdetect.so.<ABI>, a link to the real file, and libdetect.so to the soname
    soname = subprocess.run(["readelf", "-d", os.path.join(lib, real[0])], capture_output=True, text=True,
                            check=True).stdout
    abi = next(l for l in open(os.path.join(REPO, "include", "detect.h")) if l.startswith("#define DETECT_ABI_VERSION"))
    assert f"[libdetect.so.{abi.split()[2]}]" in soname
    assert os.readlink(os.path.join(lib, "libdetect.so")) == f"libdetect.so.{abi.split()[2]}"
    assert os.path.isfile(os.path.join(prefix, "include", "detect.h"))
    assert os.path.isfile(os.path.join(prefix, "share", "detect", "configs", os.path.basename(CONFIG)))
    assert pkg_config(prefix, "--modversion")[0] in open(os.path.join(REPO, "include", "detect.h")).read()
    # the installed command finds the installed library, not the build tree's
    ldd = subprocess.run(["ldd", os.path.join(prefix, "bin", "detect")], capture_output=True, text=True).stdout
    found = [l.split("=>")[1].split("(")[0].strip() for l in ldd.splitlines() if "libdetect.so" in l]
    assert len(found) == 1 and os.path.dirname(os.path.realpath(found[0])) == os.path.realpath(lib), ldd


def test_exports_only_the_public_api(prefix):
    lib = os.path.join(prefix, "lib", "libdetect.so")
    syms = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True, text=True, check=True).stdout
    names = [l.split()[-1] for l in syms.splitlines() if l.split()[1] in "TDBR"]
    assert names and all(n.startswith("detect_") for n in names), [n for n in names if not n.startswith("detect_")]
    header = open(os.path.join(REPO, "include", "detect.h")).read()
    for n in names:
        assert n.split("@")[0] + "(" in header, n  # every export is declared in the header


@pytest.mark.parametrize("mode", [["--threads", "3"], ["--queue", "3"]], ids=["3-request-threads", "run-queue-3"])
def test_embed_equals_cli_json(prefix, images, reference, embed, mode):
    """Bitwise: the same text, from 3 request threads sharing one model, or
    through a run queue with 3 images in flight (3 execution contexts),
    collected in order."""
    _, text = reference
    out = subprocess.run([embed, CONFIG, WEIGHTS, *mode, "--device", "cpu", *images], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout == text


@pytest.mark.parametrize("mode", [[], ["--queue", "2"]], ids=["one-thread", "run-queue-2"])
def test_embed_bad_image_is_named_and_others_complete(prefix, images, embed, tmp_path, mode):
    """A file that does not decode among good ones (in flight, with the run
    queue): named once, the others' entries those of a run without it."""
    bad = tmp_path / "broken.png"
    bad.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 40)
    good = subprocess.run([embed, CONFIG, WEIGHTS, "--device", "cpu", images[0], images[1], images[2]],
                          capture_output=True, text=True)
    out = subprocess.run([embed, CONFIG, WEIGHTS, *mode, "--device", "cpu", images[0], str(bad), images[1],
                          images[2]], capture_output=True, text=True)
    assert out.returncode == 1
    assert out.stdout == good.stdout and images[1] in out.stdout
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "broken.png" in lines[0] and "PNG" in lines[0], out.stderr


def test_embed_bad_weights(prefix, embed, tmp_path):
    w = tmp_path / "w.safetensors"
    w.write_bytes(b"\x10\0\0\0\0\0\0\0{\"x\": 1}      ")
    out = subprocess.run([embed, CONFIG, str(w), "--device", "cpu", "x.png"], capture_output=True, text=True)
    assert out.returncode == 2 and str(w) in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_classes_and_threshold_options(prefix, images, reference, tmp_path):
    """The options reach the library: --classes and --score-thresh keep exactly the
    unfiltered run's detections of that class above that score."""
    ref, _ = reference
    doc, _ = cli_json(prefix, images[:6], "--classes", "star,circle", "--score-thresh", "0.8")
    for e in doc["images"]:
        want = [d for d in ref[e["file"]]["detections"] if d["class"] in ("star", "circle") and d["score"] >= 0.8]
        assert e["detections"] == want


def test_versions_agree(prefix):
    """One release number everywhere a user reads one: detect --version, the header, pkg-config, the pip
    package's metadata and the loaded library (detect.version())."""
    header = next(l for l in open(os.path.join(REPO, "include", "detect.h"))
                  if l.startswith("#define DETECT_VERSION_STRING")).split('"')[1]
    cli = subprocess.run([os.path.join(prefix, "bin", "detect"), "--version"], capture_output=True, text=True,
                         check=True).stdout.split()
    assert cli == ["detect", header]
    assert pkg_config(prefix, "--modversion") == [header]
    from importlib.metadata import version
    assert version("detect") == header
    detect = pytest.importorskip("detect")
    assert detect.version() == header


def test_installed_detect_finds_its_configs(prefix, images, tmp_path):
    """From a folder without configs/: a config named without a folder, and the default one, are taken
    from PREFIX/share/detect/configs (the default fails on the narrow demo weights, by their shape, which
    shows that it was found and read)."""
    exe = os.path.join(prefix, "bin", "detect")
    r = subprocess.run([exe, "--config", os.path.basename(CONFIG), "--weights", WEIGHTS, "--device", "cpu", "-q",
                        images[0]], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([exe, "--weights", WEIGHTS, "--device", "cpu", "-q", images[0]], cwd=tmp_path,
                       capture_output=True, text=True)
    assert r.returncode == 2 and "the config needs" in r.stderr and "cannot open" not in r.stderr, r.stderr
