#!/usr/bin/python3
"""whole_pass.py --work DIR: the CUDA backend's forward pass, from the
uploaded image to the pasted masks, as one graph (backend.h,
counts_on_device and paste_on_device; cuda/backend_cuda_graph.c), checked on
the emulator (tests/emu/run.sh runs it; it needs the emulator's statistics,
MR_EMU_STATS, so it runs nowhere else).

For the shipped shapes model and for seeded R-101-FPN weights (torchvision's
layout, oracle.py's recipe, at a 320-pixel input so that the emulator runs
it in seconds), three copies of one image go through detect --device cuda
(strict fp32): the first runs op by op, the second is captured and launched,
the third is a replay. Checked:
  - exactly one capture, and it ended well: nothing inside synchronised,
    allocated or copied to or from pageable memory (the emulator refuses
    each and invalidates the capture, as CUDA does);
  - that graph holds the whole pass: the image's upload and preprocessing,
    the backbone's convolutions, both RoIAligns, the RPN's and the box
    head's NMS, the box head's GEMMs, the mask head, the mask probabilities,
    the paste into the host's result block, and six stage marks;
  - what the replayed image runs outside the graph (a third image's work,
    less a second image's): nothing but the first and last stage marks; and
    that the host waits for it twice (the result, the last mark);
  - images of other sizes with the same padded size replay the same graph
    (three sizes padded alike), each with its own sizes;
  - the detections, boxes, scores and masks are byte for byte those of the
    op-by-op run (MR_CUDA_GRAPHS=0), of the counts-on-the-host run
    (MR_CUDA_DEVICE_COUNTS=0), and of a run whose result block holds 64
    bytes of masks (MR_CUDA_PASTE_BLOCK=64: every image overflows it and
    is pasted in chunks after the graph);
  - with MR_CUDA_CONV_FIND=1 the convolutions are measured (cuDNN's Find)
    at the first image only, the capture still holds, and the results are
    unchanged (the emulator's algorithms all compute alike).
And on a device whose memory the model's allocations fill but for 512
bytes (MR_EMU_DEVICE_MEMORY; an instantiated graph holds 1 KiB a node,
README.md), every graph's instantiation is refused with
cudaErrorMemoryAllocation: the backend gives each up after its tries and
runs the pass op by op, with the same results and no error.
Exit 1 on any failure."""

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "parity"))
BUILD = os.environ.get("DETECT_BUILD", os.path.join(REPO, "build"))

# Work that must run inside the graph once the span is captured (names as the emulator records them).
IN_GRAPH = ["cuDNN convolution", "cuBLAS GEMM", "roi_align_kernel", "candidate_kernel", "mask_kernel",
            "reduce_kernel", "mask_probs_kernel", "depth_to_space_kernel", "max_pool_kernel",
            "upsample_nearest_kernel", "cub::DeviceRadixSort", "plan_kernel", "pad_kernel", "paste_all_kernel",
            "copy_out_kernel",
            "preprocess_kernel", "cudaMemcpyAsync", "event record"]
# What a replayed image may still run outside it: the marks before and after the graph.
OUTSIDE_ALLOWED = {"event record"}
# Its host waits: the result block (paste_block), the last stage mark (stage_seconds).
WAITS = 2

failures = []


def check(ok, what):
    print(f"  {'OK  ' if ok else 'FAIL'} {what}", flush=True)
    if not ok:
        failures.append(what)


def read_stats(path):
    stats = {"eager": {}, "captures": []}
    for line in open(path):
        key, _, rest = line.rstrip("\n").partition(" ")
        if key == "eager":
            count, _, name = rest.partition(" ")
            stats["eager"][name] = int(count)
        elif key == "capture":
            stats["captures"].append(rest)
        else:
            stats[key] = int(rest)
    return stats


def detect(config, weights, images, out, env_extra, stats=None):
    env = dict(os.environ, **env_extra)
    if stats:
        env["MR_EMU_STATS"] = stats
    # one context: its graphs are what is checked (several in flight: in_flight.py)
    cmd = [os.path.join(BUILD, "detect"), "--device", "cuda", "--precision", "fp32", "-q", "--in-flight", "1",
           "--config", config, "--weights", weights, "--json", out] + images
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0 or "emu:" in r.stderr:
        check(False, f"{' '.join(cmd)} ({env_extra}): exit {r.returncode}: {r.stderr[-2000:]}")
        return None
    return open(out, "rb").read()


def capture_nodes(summary):
    """'229 nodes: a x1; b x2;' -> {'a': 1, 'b': 2}"""
    nodes = {}
    for part in summary.partition(":")[2].split(";"):
        name, _, count = part.strip().rpartition(" x")
        if name:
            nodes[name] = int(count)
    return nodes


def check_model(label, config, weights, image, work):
    print(f"{label}:", flush=True)
    copies = []
    for k in range(3):
        p = os.path.join(work, f"{label}_{k}.png")
        with open(image, "rb") as src, open(p, "wb") as dst:
            dst.write(src.read())
        copies.append(p)
    base = os.path.join(work, label)
    two = read_stats_of(detect(config, weights, copies[:2], base + "_two.json", {}, base + "_two.stats"),
                        base + "_two.stats")
    graph = detect(config, weights, copies, base + "_graph.json", {}, base + "_three.stats")
    three = read_stats_of(graph, base + "_three.stats")
    op_by_op = detect(config, weights, copies, base + "_ops.json", {"MR_CUDA_GRAPHS": "0"})
    host_counts = detect(config, weights, copies, base + "_host.json", {"MR_CUDA_DEVICE_COUNTS": "0"})
    overflow = detect(config, weights, copies, base + "_overflow.json", {"MR_CUDA_PASTE_BLOCK": "64"})
    found = detect(config, weights, copies, base + "_find.json", {"MR_CUDA_CONV_FIND": "1"}, base + "_find.stats")
    find = read_stats_of(found, base + "_find.stats")
    if None in (two, three, graph, op_by_op, host_counts, overflow, found):
        return
    check(three["captures_failed"] == 0, f"no capture failed ({three['captures_failed']})")
    check(three["captures_ok"] == 1 and three["graph_launches"] == 2,
          f"one capture ({three['captures_ok']}), launched for the second and third image "
          f"({three['graph_launches']} launches)")
    if three["captures"]:
        nodes = capture_nodes(three["captures"][0])
        missing = [n for n in IN_GRAPH if n not in nodes]
        check(not missing, f"the graph ({three['captures'][0].split(':')[0]}) holds the whole span"
              + (f"; missing: {missing}" if missing else ""))
        check(nodes.get("event record") == 6, f"the six stage marks inside it ({nodes.get('event record')})")
    outside = {n: c - two["eager"].get(n, 0) for n, c in three["eager"].items() if c != two["eager"].get(n, 0)}
    syncs = three["syncs"] - two["syncs"]
    print(f"  the replayed image outside its graph: {dict(sorted(outside.items()))}; {syncs} host waits", flush=True)
    stray = sorted(n for n in outside if n not in OUTSIDE_ALLOWED)
    check(not stray, "nothing of the pass runs outside the graph" + (f": {stray}" if stray else ""))
    check(syncs == WAITS, f"the host waits {WAITS} times for a replayed image ({syncs})")
    dets = sum(len(im["detections"]) for im in json.loads(graph)["images"])
    check(graph == op_by_op, f"results identical to the op-by-op run ({dets} detections, {len(graph)} bytes of JSON)")
    check(graph == host_counts, "results identical to the counts-on-the-host run")
    check(graph == overflow, "results identical when the windows overflow the result block (pasted in chunks)")
    # MR_CUDA_CONV_FIND=1 (bench/NOTES.md section 27): algorithms measured at the first, op-by-op image; the
    # capture and the replay measure nothing (Find waits for the device, which would break the capture).
    # The emulator's algorithms compute alike, so the results must not change.
    # Measured only outside a graph (the first image's convolutions, less those with no choice: a fused
    # call without ReLU has IMPLICIT_PRECOMP_GEMM only); a measurement inside the capture would fail it.
    finds, eager_convs = find["eager"].get("cuDNN find", 0), find["eager"].get("cuDNN convolution", 0)
    check(0 < finds <= eager_convs,
          f"MR_CUDA_CONV_FIND=1: {finds} convolutions measured, of the {eager_convs} run op by op")
    check(find["captures_failed"] == 0 and find["captures_ok"] == 1 and find["graph_launches"] == 2,
          f"MR_CUDA_CONV_FIND=1: one capture, none failed, two launches ({find['captures_ok']}, "
          f"{find['captures_failed']}, {find['graph_launches']})")
    check(found == graph, "MR_CUDA_CONV_FIND=1: results identical")


def run_sizes(work, tag, sides):
    """The shapes model's scene_2 resized to each side (square), through
    detect with graphs (statistics kept) and op by op."""
    from PIL import Image
    config = os.path.join(REPO, "configs", "mask_rcnn_R-101-FPN_shapes.json")
    weights = os.path.join(REPO, "models", "shapes_r101_narrow.safetensors")
    scene = Image.open(os.path.join(REPO, "examples", "shapes", "scene_2.png")).convert("RGB")
    paths = []
    for k, side in enumerate(sides):
        p = os.path.join(work, f"{tag}_{k}_{side}.png")
        scene.resize((side, side), Image.BILINEAR).save(p)
        paths.append(p)
    stats_path = os.path.join(work, f"{tag}.stats")
    graph = detect(config, weights, paths, os.path.join(work, f"{tag}_graph.json"), {}, stats_path)
    op_by_op = detect(config, weights, paths, os.path.join(work, f"{tag}_ops.json"), {"MR_CUDA_GRAPHS": "0"})
    return graph, op_by_op, read_stats(stats_path) if graph is not None else None


def check_new_sizes(work):
    """Three image sizes with one padded size (the shapes model pads to
    multiples of 32 after resizing the short side to 224): one graph serves
    them all, each image's own sizes read from device memory."""
    print("new sizes, one padded size (shapes model):", flush=True)
    graph, op_by_op, st = run_sizes(work, "sizes", (200, 200, 210, 220))
    if graph is None or op_by_op is None:
        return
    check(st["captures_failed"] == 0 and st["captures_ok"] == 1,
          f"200x200 twice, then 210x210 and 220x220: one capture for their 224x224 padding "
          f"({st['captures_ok']} captures, {st['captures_failed']} failed)")
    check(st["graph_launches"] == 3, f"the second 200x200, the 210x210 and the 220x220 replay it "
          f"({st['graph_launches']} launches)")
    check(graph == op_by_op, "results identical to the op-by-op run (each image's own sizes, not the captured one's)")

    # 4160x4160 (17.3 MP) is larger than the preprocessing's staging (16.7 MP at least) and pads to 224x224
    # as well: it cannot be captured (twice: those captures are given up and the pass runs op by op), and a
    # replay keeps the input it uploads on the host path
    graph, op_by_op, st = run_sizes(work, "large", (200, 4160, 4160, 210, 4160, 220))
    if graph is None or op_by_op is None:
        return
    # the two given-up captures run the pass op by op, whose feature-map stages capture and replay their own
    # graphs (3 + 3 launches); the 210x210 image captures the pass, and the next large one and the 220x220
    # replay it (3 launches)
    check(st["instantiated"] == 4 and st["graph_launches"] == 9,
          f"images larger than the staging: two captures given up, the pass captured with the next image that "
          f"fits and replayed by the large one ({st['captures_ok']} captures ended, {st['instantiated']} graphs: "
          f"the pass and its 3 stages; {st['graph_launches']} launches)")
    check(graph == op_by_op, "results identical to the op-by-op run")


def check_graph_memory(work):
    """No device memory left for graphs: every instantiation is refused, the
    images run op by op, byte for byte as with graphs."""
    print("graphs refused for want of device memory (shapes model):", flush=True)
    config = os.path.join(REPO, "configs", "mask_rcnn_R-101-FPN_shapes.json")
    weights = os.path.join(REPO, "models", "shapes_r101_narrow.safetensors")
    copies = []
    for k in range(4):
        p = os.path.join(work, f"graph_memory_{k}.png")
        with open(os.path.join(REPO, "examples", "shapes", "scene_2.png"), "rb") as src, open(p, "wb") as dst:
            dst.write(src.read())
        copies.append(p)
    base = os.path.join(work, "graph_memory")
    graph = detect(config, weights, copies, base + "_graph.json", {}, base + "_graph.stats")
    if graph is None:
        return
    peak = read_stats(base + "_graph.stats")["device_bytes_peak"]
    short = detect(config, weights, copies, base + "_short.json", {"MR_EMU_DEVICE_MEMORY": str(peak + 512)},
                   base + "_short.stats")
    if short is None:
        return
    st = read_stats(base + "_short.stats")
    check(st["instantiate_failed"] > 0 and st["instantiated"] == 0 and st["graph_launches"] == 0,
          f"{peak + 512} bytes of device memory: every instantiation refused ({st['instantiate_failed']} refused, "
          f"{st['instantiated']} instantiated, {st['graph_launches']} launches)")
    check(short == graph, "results identical to the run with graphs")


def read_stats_of(result, path):
    return read_stats(path) if result is not None else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    check_model("shapes", os.path.join(REPO, "configs", "mask_rcnn_R-101-FPN_shapes.json"),
                os.path.join(REPO, "models", "shapes_r101_narrow.safetensors"),
                os.path.join(REPO, "examples", "shapes", "scene_2.png"), a.work)

    import oracle
    weights = os.path.join(a.work, "r101_seed0.safetensors")
    if not os.path.exists(weights):
        oracle.export_weights(oracle.build_model(0), weights)
    config = json.load(open(os.path.join(REPO, "configs", "mask_rcnn_R-101-FPN_torchvision.json")))
    config["input"]["min_size"], config["input"]["max_size"] = 320, 512
    config_path = os.path.join(a.work, "r101_320.json")
    json.dump(config, open(config_path, "w"), indent=1)
    image = os.path.join(a.work, "synthetic_320x480.png")
    oracle.save_png(oracle.make_synthetic_image(320, 480, 0), image)
    check_model("r101_seeded", config_path, weights, image, a.work)
    check_new_sizes(a.work)
    check_graph_memory(a.work)

    print(f"whole pass: {'all passed' if not failures else f'{len(failures)} FAILED'}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
