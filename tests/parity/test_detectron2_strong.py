"""detectron2's strong R-101-FPN models under detectron2's conventions: our engine against the
detectron2-conventions oracle (oracle_d2.py) built with each architecture from torchvision's
public classes (oracle.build_arch_model), seeded, with random batchnorm statistics.

| case | detectron2 model (shared/reference/zoo_variants.md §1)        | architecture                     |
|------|----------------------------------------------------------------|----------------------------------|
| lsj  | new_baselines/mask_rcnn_R_101_FPN_{100,200,400}ep_LSJ          | SyncBN (eval: batchnorm) in the  |
|      | (48.9 box AP at 400ep)                                         | trunk, FPN, box and mask heads;  |
|      |                                                                | 2 RPN convs; 4conv1fc; stride in |
|      |                                                                | the 1x1 conv                     |
| gn   | Misc/mask_rcnn_R_50_FPN_3x_gn (here with an R-101 trunk)       | GroupNorm(32) in the trunk, FPN, |
|      |                                                                | box and mask heads; 4conv1fc;    |
|      |                                                                | stride in the 3x3 conv           |

Each: the detectron2 small config (test_detectron2_e2e.py's, 320x480 identity resize) with the
architecture keys, the whole pipeline from the PNG, every stage compared with
test_detectron2_e2e.py's tolerances (features normalised L2 <= 1e-4, proposals, every
detection matched by class, IoU and score, the masks). The batchnorm variant of the same
comparisons against torchvision's own conventions is tests/parity/test_e2e.py's
v2bn-chelsea-800 case (a full-size photo)."""

import json
import os

import numpy as np
import pytest

import test_detectron2_e2e as d2e
from conftest import BUILD, drop_unless_failed

# oracle's architecture per case, and what the detectron2 config must change beyond
# oracle.config_keys(): GroupNorm models keep the stride in the 3x3 conv (STRIDE_IN_1X1 False)
ARCH_KEYS = {
    "lsj": ("ARCH_V2", {}),
    "gn": ("ARCH_GN", {"backbone": {"stride_in_1x1": False}}),
}


@pytest.fixture(scope="module", params=sorted(ARCH_KEYS))
def strong(request, tmp_path_factory):
    import torch
    import oracle
    import oracle_d2
    if not os.path.exists(os.path.join(BUILD, "stage_runner")):
        pytest.fail(f"{BUILD}/stage_runner is missing: run `make` first")
    torch.set_num_threads(2)
    name = request.param
    arch_name, extra = ARCH_KEYS[name]
    keys = oracle.config_keys(getattr(oracle, arch_name))
    for section, kv in extra.items():
        keys[section].update(kv)
    c = d2e.D2Case(str(tmp_path_factory.mktemp("d2_" + name)))
    d2e.write_configs(c)
    with open(c.config) as f:
        cfg = json.load(f)
    for section, kv in keys.items():
        cfg[section].update(kv)
    with open(c.config, "w") as f:
        json.dump(cfg, f, indent=1)
    # GroupNorm models keep the stride in the 3x3 conv (STRIDE_IN_1X1 False): no stride patch
    patches = [p for p in oracle_d2.PATCHES if not (name == "gn" and p == "stride_in_1x1")]
    model = oracle_d2.build_model(d2e.SEED + 6, min_size=d2e.H, max_size=512, patches=patches,
                                  arch=getattr(oracle, arch_name))
    img = oracle.make_synthetic_image(d2e.H, d2e.W, d2e.SEED + 6)
    oracle.save_png(img, c.png)
    oracle_d2.export_weights_bgr(model, c.weights)
    c.name = name
    c.ref = oracle.run_staged(model, img, check=True)
    c.e2e = d2e.engine(c, os.path.join(c.root, "e2e"))
    print(f"\n[detectron2 {name}] " + oracle.summary(c.ref))
    yield c
    drop_unless_failed(request, c.root)


def test_strong_e2e(strong):
    """Input, C2..C5, P2..P6, proposals, final detections and masks, from the PNG."""
    assert len(strong.ref["12_final_boxes"]) > 0, "the reference found nothing: the case tests nothing"
    rows = d2e.compare_e2e(strong.ref, strong.e2e, f"{strong.name} e2e")
    for r in rows:
        print(f"[detectron2 {strong.name}] {r['stage']}: {r['metric']} = {r['value']}{'' if r['ok'] else ' (FAIL)'}")
    bad = [r for r in rows if not r["ok"]]
    assert not bad, bad


def test_norm_mismatch_refused(strong, tmp_path):
    """The config's norm not the file's: refused naming the key, not quietly wrong."""
    import subprocess
    with open(strong.config) as f:
        cfg = json.load(f)
    cfg["fpn"]["norm"] = "none"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(cfg))
    r = subprocess.run([os.path.join(BUILD, "detect"), "-q", "--device", "cpu", "--config", str(bad), "--weights",
                        strong.weights, strong.png], capture_output=True, text=True)
    assert r.returncode != 0
    assert "fpn.norm" in r.stderr and "fpn.lateral" in r.stderr, r.stderr


def test_reduced_precision_covers_the_new_layers(strong, tmp_path):
    """bf16 and int8 on the strong models: `detect calibrate` measures a range for every conv the
    int8 run quantizes, the new ones included (rpn.conv2, box_head.conv1..4; the GN models' convs
    before their GroupNorm), and both precisions run and agree with fp32 on this image. Seeded
    weights give near-tied scores (all between 0.05 and 0.3 here), so agreement is a smoke check:
    fp32's top 20 found by class at box IoU >= 0.5 (bf16: 80%, int8: 50%); accuracy is measured on
    the trained demo model (test_precision.py)."""
    import subprocess
    import oracle
    from metrics import precision_drift
    from test_cli import detect_json_images
    detect = os.path.join(BUILD, "detect")
    probe = subprocess.run([detect, "-q", "--precision", "bf16", "--config", strong.config, "--weights",
                            strong.weights, strong.png], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"no bf16 on this CPU: {probe.stderr.strip()}")
    cal = tmp_path / "calibration"
    cal.mkdir()
    for k in range(3):
        oracle.save_png(oracle.make_synthetic_image(d2e.H, d2e.W, 40 + k), str(cal / f"{k}.png"))
    weights = tmp_path / "w.safetensors"
    weights.write_bytes(open(strong.weights, "rb").read())
    subprocess.run([detect, "calibrate", "-q", "--config", strong.config, "--weights", str(weights), str(cal)],
                   check=True)
    with open(tmp_path / "w.int8.json") as f:
        ranges = f.read()
    new = ["box_head.conv1", "box_head.conv2", "box_head.conv3", "box_head.conv4"] + \
        (["rpn.conv2"] if strong.name == "lsj" else [])
    assert all(f'"{n}"' in ranges for n in new), [n for n in new if f'"{n}"' not in ranges]
    runs = {}
    for p in ("fp32", "bf16", "int8"):
        out = tmp_path / f"{p}.json"
        subprocess.run([detect, "-q", "--device", "cpu", "--precision", p, "--config", strong.config, "--weights",
                        str(weights), "--json", str(out), strong.png], check=True)
        (_, (b, s, l), m), = detect_json_images(str(out))
        runs[p] = dict(boxes=b, scores=s, labels=l, masks=m)
    for p, need in (("bf16", 0.8), ("int8", 0.5)):
        r = precision_drift(runs["fp32"], runs[p], 20)
        print(f"[detectron2 {strong.name}] {p} vs fp32: {r['text']}")
        assert len(runs[p]["boxes"]) > 0 and r["found_top"] >= need, r["text"]


def test_unrun_layers_refused(strong, tmp_path):
    """A config that would skip layers the file has (a fourth mask conv under num_convs 3, the second
    RPN conv under rpn.num_convs 1): refused naming the tensor, not run without them."""
    import subprocess
    cases = [("mask_head", "num_convs", 3, "mask_head.fcn4")]
    if strong.name == "lsj":
        cases.append(("rpn", "num_convs", 1, "rpn.conv2"))
    for section, key, value, named in cases:
        with open(strong.config) as f:
            cfg = json.load(f)
        cfg[section][key] = value
        bad = tmp_path / f"{section}.json"
        bad.write_text(json.dumps(cfg))
        r = subprocess.run([os.path.join(BUILD, "detect"), "-q", "--device", "cpu", "--config", str(bad),
                            "--weights", strong.weights, strong.png], capture_output=True, text=True)
        assert r.returncode == 2 and named in r.stderr and "does not run" in r.stderr, r.stderr
