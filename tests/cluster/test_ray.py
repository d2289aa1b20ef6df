"""detect.ray_pipeline on a local Ray cluster (2 CPUs, 2 actors of one
thread each): the 40 scenes give the single run's --json document byte for
byte, every image once; an actor that dies mid-run (os._exit after 3
images, through the pipeline's test hook) is restarted, its batch retried,
and the run still gives every image once, the dead actor's finished images
taken over rather than done again. Runs with build/venv-ray's python
(tests/cluster/run.sh): without Ray it fails, it does not skip."""

import json
import os
import subprocess
import sys

import pytest
import ray

from conftest import CONFIG, WEIGHTS, entries
from detect import ray_pipeline


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, object_store_memory=256 * 2**20, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def paths(reference):
    """The inputs in the order detect walked the folder."""
    return list(entries(reference[0]))


def check_outputs(out, paths, reference):
    names = ray_pipeline.output_names(paths)
    assert sorted(f for f in os.listdir(out) if f.endswith(".json") and f != "all.json") == \
        sorted(n + ".json" for n in names)
    assert (out / "all.json").read_text() == reference[0]
    assert not [f for f in os.listdir(out) if ".tmp." in f]


def test_ray_gives_the_single_run(cluster, paths, reference, tmp_path):
    out = tmp_path / "out"
    s = ray_pipeline.run(paths, CONFIG, WEIGHTS, str(out), json_path=str(out / "all.json"), actors=2,
                         cpus_per_actor=1, batch_size=4)
    assert (s["images"], s["done"], s["existing"], s["failed"]) == (40, 40, 0, [])
    check_outputs(out, paths, reference)
    # Per image, the entry detect --json gives (the one-image document detect --output writes).
    name = ray_pipeline.output_names(paths)[0]
    assert json.loads((out / f"{name}.json").read_text())["images"][0] == json.loads(reference[0])["images"][0]
    # Run again: everything is there, nothing is run or written again.
    mtimes = {f: os.stat(out / f).st_mtime_ns for f in os.listdir(out) if f != "all.json"}
    s = ray_pipeline.run(paths, CONFIG, WEIGHTS, str(out), json_path=str(out / "all.json"), actors=2)
    assert (s["done"], s["existing"]) == (0, 40)
    assert mtimes == {f: os.stat(out / f).st_mtime_ns for f in os.listdir(out) if f != "all.json"}
    check_outputs(out, paths, reference)


def test_ray_actor_with_images_in_flight(cluster, paths, reference, tmp_path):
    """One actor whose model runs 2 images at once (in_flight=2: its batch
    through model.run_many, 2 execution contexts of one thread each): the
    single run's bytes."""
    out = tmp_path / "out"
    s = ray_pipeline.run(paths, CONFIG, WEIGHTS, str(out), json_path=str(out / "all.json"), actors=1,
                         cpus_per_actor=2, batch_size=4, in_flight=2)
    assert (s["images"], s["done"], s["existing"], s["failed"]) == (40, 40, 0, [])
    check_outputs(out, paths, reference)


def test_ray_actor_dies_mid_run(cluster, paths, reference, tmp_path):
    out = tmp_path / "out"
    s = ray_pipeline.run(paths, CONFIG, WEIGHTS, str(out), json_path=str(out / "all.json"), actors=2,
                         cpus_per_actor=1, batch_size=4, die_after=3)
    assert (out / ".ray_pipeline_died").exists(), "the test hook did not fire"
    # The dead actor's 3 finished images were taken over, the others done once.
    assert s["existing"] >= 3 and s["done"] + s["existing"] == 40 and s["failed"] == []
    check_outputs(out, paths, reference)


def test_importing_detect_does_not_import_ray():
    code = "import sys, detect; assert 'ray' not in sys.modules, 'ray imported'; print('ok')"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/")
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr
