#!/usr/bin/env python3
"""detect over a Ray cluster: every image in the folders (or list files)
given, one NAME.json per image in OUT, and OUT/all.json, the document
`detect --json` gives for the same images.

    build/venv-ray/bin/python examples/ray_batch.py --out build/ray_out \\
        --config configs/mask_rcnn_R-101-FPN_shapes.json \\
        --weights models/shapes_r101_narrow.safetensors --actors 2 examples/shapes

On a cluster: start Ray on every node (`ray start --head` on one, `ray start
--address=HEAD:6379` on the others), install this package on each, put the
images and OUT on a file system every node sees, and run this on the head
with --address auto. --gpus-per-actor 1 gives each actor a GPU; otherwise
each takes --cpus-per-actor cores. Run it again after a failure: images
whose NAME.json exists are not run again (see docs/cluster.md)."""

import argparse
import json
import os
import sys

import ray

from detect import ray_pipeline


def list_inputs(args):
    """Folders walked in sorted order (as detect walks them), files as given,
    --list files one path a line; only .png/.jpg/.jpeg files from folders."""
    paths = []
    for a in args:
        if os.path.isdir(a):
            for root, dirs, files in os.walk(a):
                dirs.sort()
                paths += [os.path.join(root, f) for f in sorted(files)
                          if f.lower().endswith((".png", ".jpg", ".jpeg")) and not f.startswith(".")]
        else:
            paths.append(a)
    return paths


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("inputs", nargs="*", help="image files and folders")
    ap.add_argument("--list", action="append", default=[], help="a file of image paths, one a line")
    ap.add_argument("--out", required=True, help="folder for NAME.json per image and all.json")
    ap.add_argument("--json", help="the merged document (default OUT/all.json)")
    ap.add_argument("--config", required=True)
    ap.add_argument("--weights", required=True)
    ap.add_argument("--address", help="a running Ray cluster (auto: the one this node is in); default: a local one")
    ap.add_argument("--num-cpus", type=int, help="CPUs of the local Ray cluster (without --address)")
    ap.add_argument("--actors", type=int, default=1)
    ap.add_argument("--cpus-per-actor", type=float, default=1)
    ap.add_argument("--gpus-per-actor", type=float, default=0)
    ap.add_argument("--batch-size", type=int, default=4)
    args = ap.parse_args()
    paths = list_inputs(args.inputs)
    for lst in args.list:
        with open(lst) as f:
            paths += [l.strip() for l in f if l.strip() and not l.startswith("#")]
    if not paths:
        sys.exit("ray_batch.py: no input images")
    if args.address:
        ray.init(address=args.address)
    else:
        ray.init(num_cpus=args.num_cpus)
    summary = ray_pipeline.run(paths, args.config, args.weights, args.out,
                               json_path=args.json or os.path.join(args.out, "all.json"), actors=args.actors,
                               cpus_per_actor=args.cpus_per_actor, gpus_per_actor=args.gpus_per_actor,
                               batch_size=args.batch_size)
    for path, msg in summary["failed"]:
        print(f"ray_batch.py: {msg}", file=sys.stderr)
    print(json.dumps({k: v for k, v in summary.items() if k != "failed"} | {"failed": len(summary["failed"])}))
    sys.exit(1 if summary["failed"] else 0)


if __name__ == "__main__":
    main()
