#!/usr/bin/python3
"""Our CPU time per stage at each precision, on one full-size image, in the same run.

    /usr/bin/python3 bench/bench_precision.py [--precisions fp32,bf16,int8] [--rounds 3] [--threads 2]
                                              [--archs classic,v2] [--reduced-precision "none;mask_head"]

The seeded R-101-FPN weights and the 800x1216 synthetic scene of `make bench`
(bench_cpu.py, tests/parity/oracle.py). Each round runs one detect process per
precision, in turn (fp32, bf16, fp32, ...), each a warm-up run and two
measured runs (--profile-runs 2); the table gives each stage's median over
the rounds and its ratio to the first precision. Then agreement of each
precision's detections with the first's on this image (seeded weights give
near-tied scores, so this is a smoke check: matched by class at box IoU >= 0.9 and
at >= 0.5, with the pairs' mask IoU; accuracy is measured on the demo
model, models/shapes/evaluate.py --precision). A precision the CPU lacks
(bf16 without AVX512_BF16 or AMX) is reported and skipped. int8 first
calibrates (detect calibrate) on 8 other synthetic scenes of the same size
(seeds 1-8; the timed one is seed 0); calibration is not timed.

--archs: the architectures, each with its own seeded weights (oracle.py's
ARCH_*: classic = the zoos' FrozenBN trunk, 2fc head; v2 = the strong baselines,
detectron2's LSJ and torchvision's v2: batchnorm in the FPN and heads, two RPN
convs, 4conv1fc; gn = GroupNorm throughout), alternating in each round with
the precisions; the table adds each architecture's ratio to the first at the
same precision.

--reduced-precision: variants of the config's reduced_precision keys (which parts leave fp32 at
bf16 and int8), each a column at every reduced precision, with its ratio to the first variant.
Their accuracy is bench/reduced_parts_ap.py's (the demo model's AP).

--peaks: the chip's peak multiply-adds per second at each precision (bench/NOTES.md section 33,
bench/onednn_peak.c: "fp32=0.18,bf16=1.2,int8=2.8" T/s on this AMX Xeon at 2 threads); with it the
table gets each stage's multiply-adds (counted from the config's layer shapes at 800x1216, 1000
RoIs, 100 detections) and its achieved rate as a fraction of its precision's peak. fp32's 3x3 convs
run as Winograd, so their effective rate can pass the direct-convolution peak.

--baseline DIR: another checkout, built (`git worktree add DIR COMMIT && make -C DIR build/detect`),
as one more variant: its build/detect with its own copy of the config (so keys it does not know
are not given), at every precision, in the same alternating rounds. "Today's int8" of a
performance issue is measured so, beside the change, on the same machine at the same time.

--keep DIR: work in DIR and keep it: the image (image.png), seeded weights, configs and int8 ranges,
to profile a precision by hand (ONEDNN_VERBOSE=1 build/detect --precision int8 --config
DIR/config_classic_0.json --weights DIR/weights_classic.safetensors DIR/image.png)."""

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "parity"))

import bench_cpu  # noqa: E402  (STAGES, OUR_NAME, run_detect)
from metrics import iou_matrix  # noqa: E402


def box_iou(a, b):
    return float(iou_matrix([a], [b])[0, 0])


def detections(args, weights, png, precision, out):
    cmd = [os.path.join(REPO, "build", "detect"), "-q", "--precision", precision, "--threads", str(args.threads),
           "--config", args.config, "--weights", weights, "--json", out, png]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"bench_precision: detect --precision {precision} failed:\n{r.stderr}")
    with open(out) as f:
        return json.load(f)["images"][0]["detections"]


def mask_iou_rle(a, b):
    from pycocotools import mask as mask_util
    return float(mask_util.iou([a], [b], [0])[0][0])


def matched(ref, got, iou=0.9, ious=None):
    """Detections of `ref` with one of `got` of the same class at box IoU >= iou (greedy, best score
    first); the pairs' mask IoUs are appended to `ious`."""
    used, n = set(), 0
    for d in ref:
        best, bi = 0.0, -1
        for i, g in enumerate(got):
            if i in used or g["class"] != d["class"]:
                continue
            v = box_iou(d["box"], g["box"])
            if v > best:
                best, bi = v, i
        if best >= iou:
            used.add(bi)
            n += 1
            if ious is not None:
                ious.append(mask_iou_rle(d["mask"], got[bi]["mask"]))
    return n


def stage_macs(config, h=800, w=1216, rois=1000, dets=100):
    """Multiply-adds per stage of the network a config describes (its convs and GEMMs only: pooling,
    RoIAlign, decoding and the paste are not counted), for an h x w network input."""
    c = json.load(open(config))
    bb, fpn, rpn, bh, mh = c["backbone"], c["fpn"], c["rpn"], c["box_head"], c["mask_head"]
    blocks = {50: [3, 4, 6, 3], 101: [3, 4, 23, 3]}[bb["depth"]]
    ceil = lambda v, s: -(-v // s)  # noqa: E731
    macs = {k: 0.0 for k in bench_cpu.STAGES}
    hh, ww = ceil(h, 2), ceil(w, 2)
    macs["backbone"] += hh * ww * 7 * 7 * 3 * bb["stem_out_channels"]
    hh, ww = ceil(hh, 2), ceil(ww, 2)
    cin, outs = bb["stem_out_channels"], []
    for s, n in enumerate(blocks):
        width, cout = bb["width_per_group"] * bb["num_groups"] << s, bb["res2_out_channels"] << s
        for b in range(n):
            stride = 2 if s > 0 and b == 0 else 1
            oh, ow = ceil(hh, stride), ceil(ww, stride)
            conv1_pixels = oh * ow if bb.get("stride_in_1x1") else hh * ww  # where the stride sits
            macs["backbone"] += conv1_pixels * cin * width + oh * ow * width * width * 9 + oh * ow * width * cout \
                + (oh * ow * cin * cout if b == 0 else 0)
            hh, ww, cin = oh, ow, cout
        outs.append((hh, ww, cout))
    F = fpn["out_channels"]
    levels = [(oh, ow) for oh, ow, _ in outs] + [(ceil(outs[-1][0], 2), ceil(outs[-1][1], 2))]
    for oh, ow, cc in outs:
        macs["fpn"] += oh * ow * (cc * F + F * F * 9)
    A = len(c["anchors"]["aspect_ratios"]) * len(c["anchors"]["sizes"][0])
    for oh, ow in levels:
        macs["rpn"] += oh * ow * (F * F * 9 * rpn.get("num_convs", 1) + F * 5 * A)
    R = bh["pooler"]["resolution"]
    cin = F
    for _ in range(bh["num_convs"]):
        macs["box"] += rois * R * R * cin * bh["conv_dim"] * 9
        cin = bh["conv_dim"]
    fin = cin * R * R
    for _ in range(bh["num_fcs"]):
        macs["box"] += rois * fin * bh["fc_dim"]
        fin = bh["fc_dim"]
    K = c["classes"]["num_classes"]
    macs["box"] += rois * fin * K * 5
    M, cin = mh["pooler"]["resolution"], F
    for _ in range(mh["num_convs"]):
        macs["mask"] += dets * M * M * cin * mh["conv_dim"] * 9
        cin = mh["conv_dim"]
    macs["mask"] += dets * M * M * cin * mh["conv_dim"] * 4 + dets * 4 * M * M * mh["conv_dim"] * K
    return macs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--precisions", default="fp32,bf16,int8")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--config", default=os.path.join(REPO, "configs", "mask_rcnn_R-101-FPN_torchvision.json"))
    ap.add_argument("--archs", default="classic")
    ap.add_argument("--reduced-precision", default="",
                    help="variants of the config's reduced_precision keys, ';'-separated, each 'none' or a "
                         "'+'-joined set of stem, rpn_predictors, box_head, mask_head: each a column at every "
                         "reduced precision (fp32 ignores the keys), in the same alternating rounds")
    ap.add_argument("--baseline", default="", help="another checkout, built: its detect and config as a variant")
    ap.add_argument("--peaks", default="", help="precision=T multiply-adds/s,...: a fraction-of-peak table")
    ap.add_argument("--keep", default="", help="a folder to work in and keep (the image, seeded weights, configs "
                                               "and int8 ranges, for profiling by hand); default: a temporary one")
    args = ap.parse_args()
    import oracle
    from conftest import write_config
    sys.path.insert(0, os.path.join(REPO, "tests", "gpu"))
    from gpu_parity import ARCHES

    precisions = args.precisions.split(",")
    archs = args.archs.split(",")
    variants = args.reduced_precision.split(";") if args.reduced_precision else [""]
    parts = ("stem", "rpn_predictors", "box_head", "mask_head")
    for v in variants:
        for part in v.split("+"):
            if part not in parts + ("none", ""):
                sys.exit(f"bench_precision: --reduced-precision: unknown part {part!r} (one of {', '.join(parts)})")
    base_config = args.config
    if args.keep:
        os.makedirs(args.keep, exist_ok=True)
    with (contextlib.nullcontext(args.keep) if args.keep else tempfile.TemporaryDirectory(prefix="bench_precision_")) \
            as tmp:
        img = oracle.make_synthetic_image(800, 1216, 0)
        png = os.path.join(tmp, "image.png")
        oracle.save_png(img, png)
        setup = {}  # (arch, variant) -> (config, weights)
        for arch in archs:
            name = ARCHES[arch]
            model = oracle.build_model(0, arch=getattr(oracle, name) if name else None)
            arch_keys = oracle.config_keys(getattr(oracle, name)) if name else {}
            weights = os.path.join(tmp, f"weights_{arch}.safetensors")
            for k, v in enumerate(variants):
                overrides = dict(arch_keys, reduced_precision={p: p in v.split("+") for p in parts}) if v else arch_keys
                setup[arch, v] = (write_config(base_config, overrides, os.path.join(tmp, f"config_{arch}_{k}.json")),
                                  weights)
            if args.baseline:
                own = os.path.join(args.baseline, "configs", os.path.basename(base_config))
                setup[arch, "baseline"] = (write_config(own, arch_keys, os.path.join(tmp, f"config_{arch}_base.json")),
                                           weights)
            oracle.export_weights(model, weights)
            del model
            config = setup[arch, variants[0]][0]
            if "int8" in precisions:
                cal = os.path.join(tmp, "calibration")
                if not os.path.isdir(cal):
                    os.makedirs(cal)
                    for k in range(1, 9):
                        oracle.save_png(oracle.make_synthetic_image(800, 1216, k), os.path.join(cal, f"{k}.png"))
                subprocess.run([os.path.join(REPO, "build", "detect"), "calibrate", "-q", "--threads",
                                str(args.threads), "--config", config, "--weights", weights, cal], check=True)

        usable = []
        config, weights = setup[archs[0], variants[0]]
        for p in precisions:
            probe = subprocess.run([os.path.join(REPO, "build", "detect"), "-q", "--precision", p, "--config",
                                    config, "--weights", weights, png], capture_output=True, text=True)
            if probe.returncode != 0:
                print(f"{p}: skipped: {probe.stderr.strip()}")
            else:
                usable.append(p)
        # columns (arch, variant, precision); fp32 once per arch (the variants change nothing there),
        # and once more for the baseline build
        cols = [(a, v, p) for a in archs for v in variants for p in usable if p != "fp32" or v == variants[0]]
        if args.baseline:
            cols += [(a, "baseline", p) for a in archs for p in usable]
            baseline_detect = os.path.join(args.baseline, "build", "detect")
        label = {c: " ".join(([c[0]] if len(archs) > 1 else []) + [c[2]] +
                             ([c[1] or "default"] if (len(variants) > 1 and c[2] != "fp32") or c[1] == "baseline"
                              else [])) for c in cols}
        runs = {c: [] for c in cols}
        rss = {}
        for _ in range(args.rounds):
            for c in cols:
                args.config, weights = setup[c[0], c[1]]
                bench_cpu.peak_rss_kb["full"] = 0
                doc = bench_cpu.run_detect(args, weights, [png], ["--profile-runs", "2", "--precision", c[2]], "full",
                                           detect=baseline_detect if c[1] == "baseline" else None)
                runs[c] += [{s: r[bench_cpu.OUR_NAME.get(s, s)] for s in bench_cpu.STAGES} for r in doc]
                rss[c] = max(rss.get(c, 0), bench_cpu.peak_rss_kb["full"])

        # ratios: each precision to the first at the same architecture, each architecture to the first
        ratios = [(c, (c[0], variants[0], usable[0])) for c in cols if c[2] != usable[0] and c[1] != "baseline"]
        ratios += [(c, (archs[0], c[1], c[2])) for c in cols if c[0] != archs[0] and c[1] != "baseline"]
        ratios += [(c, (c[0], variants[0], c[2])) for c in cols if c[1] not in (variants[0], "baseline")]
        # against the baseline build: each precision to the same, and each reduced one to its int8
        ratios += [((c[0], variants[0], c[2]), c) for c in cols if c[1] == "baseline"]
        ratios += [((a, variants[0], p), (a, "baseline", "int8")) for a in archs for p in usable
                   if args.baseline and "int8" in usable and p not in ("fp32", "int8")]
        print(f"\nCPU, {args.threads} threads, 800x1216, seeded R-101-FPN, median of {args.rounds} alternating "
              f"rounds x 2 runs (seconds)")
        w = max(12, max(len(label[c]) for c in cols) + 2)
        print(f"{'stage':<12}" + "".join(f"{label[c]:>{w}}" for c in cols) +
              "".join(f"{label[a] + ' / ' + label[b]:>{2 * w}}" for a, b in ratios))
        for s in bench_cpu.STAGES + ["total"]:
            med = {}
            for c in cols:
                vals = [sum(r.values()) if s == "total" else r[s] for r in runs[c]]
                med[c] = statistics.median(vals)
            print(f"{s:<12}" + "".join(f"{med[c]:>{w}.3f}" for c in cols) +
                  "".join(f"{med[a] / med[b] if med[b] else float('nan'):>{2 * w}.2f}" for a, b in ratios))
        print(f"{'peak RSS MiB':<12}" + "".join(f"{rss[c] / 1024:>{w}.0f}" for c in cols))
        if args.peaks:
            peaks = {k: float(v) for k, v in (kv.split("=") for kv in args.peaks.split(","))}
            print(f"\nG multiply-adds per stage, achieved T/s and fraction of the precision's peak ({args.peaks} T/s)")
            print(f"{'stage':<12}{'G MAC':>8}" + "".join(f"{label[c]:>{w + 8}}" for c in cols if c[2] in peaks))
            macs = {a: stage_macs(setup[a, variants[0]][0]) for a in archs}
            for s in bench_cpu.STAGES + ["total"]:
                line = f"{s:<12}"
                for k, c in enumerate([c for c in cols if c[2] in peaks]):
                    g = sum(macs[c[0]].values()) if s == "total" else macs[c[0]][s]
                    if k == 0:
                        line += f"{g / 1e9:>8.1f}"
                    vals = [sum(r.values()) if s == "total" else r[s] for r in runs[c]]
                    t = statistics.median(vals)
                    rate = g / t / 1e12 if t and g else 0.0
                    line += f"{rate:>{w}.2f} {rate / peaks[c[2]]:>6.0%} " if g else f"{'-':>{w + 8}}"
                print(line)

        for arch in archs:
          args.config, weights = setup[arch, variants[0]]
          base = usable[0]
          ref = detections(args, weights, png, base, os.path.join(tmp, f"{arch}_{base}.json"))
          for p in usable[1:]:
            got = detections(args, weights, png, p, os.path.join(tmp, f"{arch}_{p}.json"))
            for at in (0.9, 0.5):  # 0.5: as bench_peers.py matches the peers
                ious = []
                print(f"{arch}: {p} vs {base}: {matched(ref, got, iou=at, ious=ious)} of {len(ref)} detections matched "
                      f"(class, box IoU >= {at}), their mask IoU mean {statistics.mean(ious) if ious else 0:.3f}, "
                      f"min {min(ious) if ious else 0:.3f}; {len(got)} detections")


if __name__ == "__main__":
    main()
