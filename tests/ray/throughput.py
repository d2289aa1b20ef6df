"""Images a second: the Ray pipeline (a local cluster, ACTORS actors of
CPUS/ACTORS threads each) against one `detect --json` process (all cores)
and against ACTORS `detect --shard K/ACTORS` processes side by side (as
many threads each as an actor) and their merge, on the same 40 shapes
scenes (seed 2), in turn, ROUNDS rounds each.
Times are wall clock from start to the merged document, model loading and
(for Ray) actor start included; Ray's own start (ray.init) is not.

    build/venv-ray/bin/python tests/ray/throughput.py [--rounds 2] [--actors 2]
"""

import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time

import ray

from detect import ray_pipeline

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIG = os.path.join(REPO, "configs", "mask_rcnn_R-101-FPN_shapes.json")
WEIGHTS = os.path.join(REPO, "models", "shapes_r101_narrow.safetensors")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--actors", type=int, default=2)
    ap.add_argument("--count", type=int, default=40)
    args = ap.parse_args()
    cpus = os.cpu_count()
    tmp = tempfile.mkdtemp()
    try:
        imgs = os.path.join(tmp, "images")
        subprocess.run([sys.executable, os.path.join(REPO, "models", "shapes", "shapes_data.py"), imgs, "--seed", "2",
                        "--count", str(args.count)], check=True, capture_output=True)
        os.remove(os.path.join(imgs, "annotations.json"))
        paths = sorted(glob.glob(os.path.join(imgs, "*.png")))
        ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False, object_store_memory=256 * 2**20)
        rates = {"cli": [], "shards": [], "ray": []}
        for r in range(args.rounds):
            t0 = time.monotonic()
            subprocess.run([os.path.join(REPO, "build", "detect"), "--config", CONFIG, "--weights", WEIGHTS,
                            "--device", "cpu", "-q", "--json", os.path.join(tmp, f"cli{r}.json"), imgs], check=True)
            rates["cli"].append(len(paths) / (time.monotonic() - t0))
            t0 = time.monotonic()
            n = args.actors
            procs = [subprocess.Popen([os.path.join(REPO, "build", "detect"), "--config", CONFIG, "--weights", WEIGHTS,
                                       "--device", "cpu", "-q", "--threads", str(max(1, cpus // n)), "--shard",
                                       f"{k}/{n}", "--json", os.path.join(tmp, f"part{r}-{k}.json"), imgs])
                     for k in range(n)]
            assert all(p.wait() == 0 for p in procs)
            subprocess.run([os.path.join(REPO, "build", "detect"), "merge", "-q", "--json",
                            os.path.join(tmp, f"merged{r}.json")] +
                           [os.path.join(tmp, f"part{r}-{k}.json") for k in range(n)], check=True)
            rates["shards"].append(len(paths) / (time.monotonic() - t0))
            out = os.path.join(tmp, f"ray{r}")
            t0 = time.monotonic()
            ray_pipeline.run(paths, CONFIG, WEIGHTS, out, json_path=os.path.join(out, "all.json"),
                             actors=args.actors, cpus_per_actor=cpus // args.actors, batch_size=4)
            rates["ray"].append(len(paths) / (time.monotonic() - t0))
            print(f"round {r + 1}: " + ", ".join(f"{k} {v[-1]:.2f}" for k, v in rates.items()) + " img/s", flush=True)
        for k, v in rates.items():
            print(f"{k}: {' '.join(f'{x:.2f}' for x in v)} img/s (mean {sum(v) / len(v):.2f})")
        ray.shutdown()
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
