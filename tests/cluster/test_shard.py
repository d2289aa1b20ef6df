"""detect --shard K/N and detect merge: 40 images in 4 parts, merged, give
exactly the single run's --json and --coco-results (byte for byte); a part
missing, given twice, of another run, incomplete, or an image in two parts
fails the merge with one line naming the file, exit 2, nothing written; a
part resumed with --skip-existing (after losing one image's outputs, or
after an interrupted run) merges to the same result."""

import json
import os
import random
import shutil
import signal
import subprocess
import time

import pytest

from conftest import DETECT, MODEL, N_IMAGES, detect, entries


def fnv1a64(s):
    h = 14695981039346656037
    for b in s.encode():
        h = ((h ^ b) * 1099511628211) % 2**64
    return h


def run_part(images, k, n, out, *extra, name="part"):
    return detect(*MODEL, "-q", "--shard", f"{k}/{n}", "--json", str(out / f"{name}-{k}.json"),
                  "--coco-results", str(out / f"coco-{k}.json"), *extra, images)


@pytest.fixture(scope="module")
def parts(images, tmp_path_factory):
    out = tmp_path_factory.mktemp("parts")
    for k in range(4):
        run_part(images, k, 4, out)
    return out


def part_docs(parts):
    return [str(parts / f"part-{k}.json") for k in range(4)]


def merge(*args, **kw):
    return detect("merge", *args, check=False, **kw)


def error_lines(r):
    return [l for l in r.stderr.splitlines() if l.strip()]


def test_every_image_in_exactly_one_part(parts, reference):
    ref = entries(reference[0])
    assert len(ref) == N_IMAGES
    seen = {}
    fingerprints = set()
    for k in range(4):
        doc = json.loads((parts / f"part-{k}.json").read_text())
        shard = doc["shard"]
        assert (shard["index"], shard["count"], shard["inputs"]) == (k, 4, N_IMAGES)
        assert shard["assigned"] == len(doc["images"]) == len(shard["positions"]) and shard["failed"] == []
        assert shard["coco_results"] == f"coco-{k}.json"
        fingerprints.add(shard["fingerprint"])
        for e in doc["images"]:
            assert e["file"] not in seen, f"{e['file']} in parts {seen[e['file']]} and {k}"
            seen[e["file"]] = k
            # The part is FNV-1a-64 of the path as given, modulo N.
            assert fnv1a64(e["file"]) % 4 == k
            assert e == ref[e["file"]]
    assert sorted(seen) == sorted(ref)
    # The fingerprint is FNV-1a-64 of the sorted paths, each ended by a newline.
    assert fingerprints == {"%016x" % fnv1a64("".join(p + "\n" for p in sorted(ref)))}


def test_merge_gives_the_single_run(parts, reference, tmp_path):
    docs = part_docs(parts)
    random.Random(0).shuffle(docs)  # any order
    r = merge("--json", str(tmp_path / "all.json"), "--coco-results", str(tmp_path / "all_coco.json"), *docs)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "all.json").read_text() == reference[0]
    assert (tmp_path / "all_coco.json").read_text() == reference[1]
    # Names without digits have their position among all inputs as COCO image id, as in one run.
    ids = {a["image_id"] for a in json.loads(reference[1])}
    assert ids & {36, 37, 38, 39}


def expect_merge_error(tmp_path, docs, *needles, coco=False):
    out = tmp_path / "merged.json"
    args = ["--json", str(out)] + (["--coco-results", str(tmp_path / "merged_coco.json")] if coco else [])
    r = merge(*args, *docs)
    assert r.returncode == 2, r.stderr
    lines = error_lines(r)
    assert any(all(n in l for n in needles) for l in lines), f"{needles} not in one of:\n{r.stderr}"
    assert not out.exists() and not (tmp_path / "merged_coco.json").exists()
    assert not [p for p in os.listdir(tmp_path) if ".tmp." in p]
    return lines


def test_missing_part(parts, tmp_path):
    docs = part_docs(parts)
    lines = expect_merge_error(tmp_path, docs[:2] + docs[3:], "shard 2 of 4 is missing")
    assert len(lines) == 1


def test_part_given_twice(parts, tmp_path):
    docs = part_docs(parts)
    again = tmp_path / "again.json"
    shutil.copy(docs[1], again)
    lines = expect_merge_error(tmp_path, docs + [str(again)], str(again), "shard 1 of 4 given twice", docs[1])
    assert len(lines) == 1


def edited(parts, tmp_path, k, edit, name=None):
    doc = json.loads((parts / f"part-{k}.json").read_text())
    edit(doc)
    path = tmp_path / (name or f"edited-{k}.json")
    path.write_text(json.dumps(doc))
    return str(path)


def test_image_in_two_parts(parts, tmp_path):
    other = json.loads((parts / "part-1.json").read_text())

    def steal(doc):
        doc["images"].append(other["images"][0])
        doc["shard"]["positions"].append(other["shard"]["positions"][0])
        doc["shard"]["assigned"] += 1

    docs = part_docs(parts)
    docs[0] = edited(parts, tmp_path, 0, steal)
    expect_merge_error(tmp_path, docs, other["images"][0]["file"], "is also in", "an image in two parts")


def test_part_of_another_run(parts, tmp_path):
    docs = part_docs(parts)
    docs[2] = edited(parts, tmp_path, 2, lambda d: d["shard"].update(fingerprint="0123456789abcdef"))
    expect_merge_error(tmp_path, docs, docs[2], "a part of another run")


def test_incomplete_part(parts, tmp_path):
    def cut(doc):
        doc["images"].pop()
        doc["shard"]["positions"].pop()

    docs = part_docs(parts)
    docs[3] = edited(parts, tmp_path, 3, cut)
    expect_merge_error(tmp_path, docs, docs[3], "shard 3 of 4 is incomplete", "--skip-existing")


def test_not_a_part(parts, reference, tmp_path):
    single = tmp_path / "single.json"
    single.write_text(reference[0])
    expect_merge_error(tmp_path, part_docs(parts)[:3] + [str(single)], str(single), "no \"shard\" record")
    expect_merge_error(tmp_path, [str(parts / "coco-0.json")], "a COCO results array")


def test_coco_of_a_part_missing(parts, tmp_path):
    docs = part_docs(parts)
    docs[1] = edited(parts, tmp_path, 1, lambda d: d["shard"].update(coco_results=None))
    expect_merge_error(tmp_path, docs, docs[1], "written without --coco-results", coco=True)
    docs = part_docs(parts)
    docs[1] = edited(parts, tmp_path, 1, lambda d: d["shard"].update(coco_results="gone.json"))
    expect_merge_error(tmp_path, docs, docs[1], "gone.json", "cannot be read", coco=True)


def test_check_only_and_usage(parts):
    r = merge("--check", *part_docs(parts))
    assert r.returncode == 0 and "4 shards, 40 images: checked" in r.stderr
    assert merge("--help").returncode == 0 and "--coco-results" in merge("--help").stdout
    for args in ([], ["--json", "x.json"], [*part_docs(parts)], ["--bogus", "a.json"]):
        r = merge(*args)
        assert r.returncode == 2 and len(error_lines(r)) == 1, (args, r.stderr)


@pytest.mark.parametrize("bad", ["4/4", "-1/4", "1/0", "x", "1/", "/4", "1/4/2", "1.5/4"])
def test_bad_shard_option(images, bad):
    r = detect(*MODEL, "--shard", bad, images, check=False)
    assert r.returncode == 2 and len(error_lines(r)) == 1 and "--shard" in r.stderr, r.stderr


def test_order_of_listing_does_not_matter(images, parts, reference, tmp_path):
    """The same paths listed in reverse: the same part, the same fingerprint."""
    files = list(entries(reference[0]))
    lst = tmp_path / "list.txt"
    lst.write_text("".join(f + "\n" for f in reversed(files)))
    detect(*MODEL, "-q", "--shard", "3/4", "--json", str(tmp_path / "p3.json"), "--list", str(lst))
    mine = json.loads((tmp_path / "p3.json").read_text())
    theirs = json.loads((parts / "part-3.json").read_text())
    assert {e["file"] for e in mine["images"]} == {e["file"] for e in theirs["images"]}
    assert mine["shard"]["fingerprint"] == theirs["shard"]["fingerprint"]


def test_more_parts_than_images(images, tmp_path):
    """Empty parts still write their documents; -v names the part."""
    few = tmp_path / "few"
    few.mkdir()
    for name in sorted(os.listdir(images))[:2]:
        shutil.copy(os.path.join(images, name), few / name)
    single = tmp_path / "single.json"
    detect(*MODEL, "-q", "--json", str(single), str(few))
    for k in range(8):
        r = detect(*MODEL, "-v", "-q", "--shard", f"{k}/8", "--json", str(tmp_path / f"part-{k}.json"), str(few))
        assert f"shard {k} of 8 (--shard {k}/8)" in r.stderr
    r = merge("--json", str(tmp_path / "all.json"), *[str(tmp_path / f"part-{k}.json") for k in range(8)])
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "all.json").read_text() == single.read_text()


def outputs(d):
    return {p: os.stat(os.path.join(d, p)).st_mtime_ns for p in sorted(os.listdir(d))}


def test_resume_after_losing_outputs(images, parts, reference, tmp_path):
    """--skip-existing: the images whose files exist are not run again, and
    their entries are read back into --json and --coco-results."""
    vis = tmp_path / "vis"
    run_part(images, 1, 4, tmp_path, "--output", str(vis), name="first")
    first = json.loads((tmp_path / "first-1.json").read_text())
    assert len(first["images"]) >= 2
    lost = sorted(p for p in os.listdir(vis) if p.endswith(".json"))[1][:-5]
    os.remove(vis / f"{lost}.json")
    os.remove(vis / f"{lost}.png")
    before = outputs(vis)
    (tmp_path / "coco-1.json").rename(tmp_path / "first-coco-1.json")
    r = run_part(images, 1, 4, tmp_path, "--output", str(vis), "--skip-existing")
    after = outputs(vis)
    assert set(after) == set(before) | {f"{lost}.json", f"{lost}.png"}
    assert all(after[p] == t for p, t in before.items()), "an existing output was written again"
    assert json.loads((tmp_path / "part-1.json").read_text()) == first
    assert (tmp_path / "coco-1.json").read_text() == (tmp_path / "first-coco-1.json").read_text()
    docs = part_docs(parts)
    docs[1] = str(tmp_path / "part-1.json")
    r = merge("--json", str(tmp_path / "all.json"), "--coco-results", str(tmp_path / "all_coco.json"), *docs)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "all.json").read_text() == reference[0]
    assert (tmp_path / "all_coco.json").read_text() == reference[1]


def test_resume_after_interrupt(images, parts, reference, tmp_path):
    vis = tmp_path / "vis"
    args = [DETECT, *MODEL, "-q", "--shard", "2/4", "--output", str(vis), "--json", str(tmp_path / "part-2.json"),
            "--coco-results", str(tmp_path / "coco-2.json"), images]
    p = subprocess.Popen(args, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and p.poll() is None:
        if vis.exists() and len([f for f in os.listdir(vis) if f.endswith(".json")]) >= 2:
            break
        time.sleep(0.05)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 130, err
    docs = part_docs(parts)
    docs[2] = str(tmp_path / "part-2.json")
    expect_merge_error(tmp_path, docs, docs[2], "shard 2 of 4 is incomplete")
    done = len(json.loads((tmp_path / "part-2.json").read_text())["images"])
    r = subprocess.run(args[:-1] + ["--skip-existing", images], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert len(json.loads((tmp_path / "part-2.json").read_text())["images"]) > done
    r = merge("--json", str(tmp_path / "all.json"), "--coco-results", str(tmp_path / "all_coco.json"), *docs)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "all.json").read_text() == reference[0]
    assert (tmp_path / "all_coco.json").read_text() == reference[1]
