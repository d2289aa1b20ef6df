"""The cluster recipes run here as the cluster would run them:
examples/slurm_array.sh's array tasks (SLURM_ARRAY_TASK_ID/COUNT set) and
merge step, and examples/k8s_indexed_job.yaml's two Jobs (parsed, their
shell commands run with JOB_COMPLETION_INDEX set), on 12 scenes; each gives
what one detect run over the folder gives."""

import os
import re
import subprocess

import pytest
import yaml

from conftest import BUILD, CONFIG, DETECT, REPO, WEIGHTS, detect, make_scenes

SLURM = os.path.join(REPO, "examples", "slurm_array.sh")
K8S = os.path.join(REPO, "examples", "k8s_indexed_job.yaml")


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """12 scenes and one run over them (the device the recipes get: the default)."""
    d = tmp_path_factory.mktemp("recipes")
    make_scenes(d / "images", 12)
    detect("--config", CONFIG, "--weights", WEIGHTS, "-q", "--json", str(d / "all.json"), "--coco-results",
           str(d / "coco.json"), str(d / "images"))
    return d


def slurm(*args, **env):
    e = dict(os.environ, DETECT=DETECT, DETECT_CONFIG=CONFIG, DETECT_WEIGHTS=WEIGHTS)
    e.update(env)
    return subprocess.run(["bash", SLURM, *args], capture_output=True, text=True, env=e)


def test_slurm_array(small, tmp_path):
    out = tmp_path / "out"
    for task in range(1, 5):  # an array 1-4: SLURM_ARRAY_TASK_MIN makes it parts 0..3
        r = slurm("run", str(small / "images"), str(out), SLURM_ARRAY_TASK_ID=str(task), SLURM_ARRAY_TASK_COUNT="4",
                  SLURM_ARRAY_TASK_MIN="1")
        assert r.returncode == 0, r.stderr
        assert (out / f"part-{task - 1}.json").exists() and (out / f"coco-{task - 1}.json").exists()
    assert len(os.listdir(out / "images")) == 2 * 12
    # DETECT as several words, as a container runs it ("apptainer exec detect.sif detect"; docs/cluster.md).
    r = slurm("merge", str(out), DETECT=f"env {DETECT}")
    assert r.returncode == 0, r.stderr
    assert (out / "all.json").read_text() == (small / "all.json").read_text()
    assert (out / "all_coco.json").read_text() == (small / "coco.json").read_text()
    # A task run again (a resubmitted failure) skips what it did and rewrites its part the same.
    before = (out / "part-2.json").read_text()
    r = slurm("run", str(small / "images"), str(out), SLURM_ARRAY_TASK_ID="2", SLURM_ARRAY_TASK_COUNT="4",
              DETECT=f"env {DETECT}")
    assert r.returncode == 0, r.stderr
    assert (out / "part-2.json").read_text() == before


def test_slurm_without_array_is_an_error(small, tmp_path):
    r = slurm("run", str(small / "images"), str(tmp_path), SLURM_ARRAY_TASK_ID="0")
    assert r.returncode != 0 and "sbatch --array" in r.stderr


def test_slurm_submit(tmp_path):
    """submit: the array of N tasks, then the merge after all of them (a stand-in sbatch records the calls)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "sbatch.log"
    (bin_dir / "sbatch").write_text(f'#!/bin/sh\necho "$@" >> {log}\necho "$((1000 + $(wc -l < {log})));cluster"\n')
    (bin_dir / "sbatch").chmod(0o755)
    r = slurm("submit", "/data/images", "/data/out", "16", PATH=f"{bin_dir}:{os.environ['PATH']}")
    assert r.returncode == 0, r.stderr
    calls = log.read_text().splitlines()
    assert calls[0] == f"--parsable --array=0-15 {SLURM} run /data/images /data/out"
    assert calls[1] == f"--parsable --dependency=afterany:1001 --job-name=detect-merge {SLURM} merge /data/out"
    assert "array job 1001 (16 tasks), merge job 1002" in r.stdout


def test_k8s_indexed_job(small, tmp_path):
    with open(K8S) as f:
        shards, merge = list(yaml.safe_load_all(f))
    assert shards["kind"] == merge["kind"] == "Job" and shards["apiVersion"] == "batch/v1"
    assert shards["metadata"]["labels"] == {"step": "shards"} and merge["metadata"]["labels"] == {"step": "merge"}
    spec = shards["spec"]
    assert spec["completionMode"] == "Indexed" and spec["template"]["spec"]["restartPolicy"] == "Never"
    container = spec["template"]["spec"]["containers"][0]
    # Both Jobs run the image scripts/build_image.sh names: detect:<include/detect.h's version>.
    with open(os.path.join(REPO, "include", "detect.h")) as f:
        version = re.search(r'#define DETECT_VERSION_STRING "([^"]+)"', f.read()).group(1)
    assert container["image"] == merge["spec"]["template"]["spec"]["containers"][0]["image"] == f"detect:{version}"
    env = {e["name"]: e["value"] for e in container["env"]}
    assert int(env["DETECT_SHARDS"]) == spec["completions"] == spec["parallelism"]
    n = spec["completions"]
    # The pod's command as Kubernetes runs it, with the volume's paths made local and detect on PATH.
    env.update(DETECT_CONFIG=CONFIG, DETECT_WEIGHTS=WEIGHTS, DETECT_IMAGES=str(small / "images"),
               DETECT_OUT=str(tmp_path / "out"), PATH=f"{BUILD}:{os.environ['PATH']}")
    assert container["command"] == ["/bin/sh", "-c"] and "--shard" in container["args"][0]
    for k in range(n):
        r = subprocess.run(["/bin/sh", "-c", container["args"][0]], capture_output=True, text=True,
                           env=dict(os.environ, **env, JOB_COMPLETION_INDEX=str(k)))
        assert r.returncode == 0, r.stderr
    mc = merge["spec"]["template"]["spec"]["containers"][0]
    menv = {e["name"]: e["value"] for e in mc["env"]}
    menv.update(DETECT_OUT=str(tmp_path / "out"), PATH=env["PATH"])
    r = subprocess.run(mc["command"] + mc["args"], capture_output=True, text=True, env=dict(os.environ, **menv))
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out" / "all.json").read_text() == (small / "all.json").read_text()
    assert (tmp_path / "out" / "all_coco.json").read_text() == (small / "coco.json").read_text()
