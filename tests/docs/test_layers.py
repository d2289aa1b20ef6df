"""scripts/check_layers.py: the include rules of docs/architecture.md hold on
this tree, and the check fails, naming the file and line, on an include
planted upward, sideways, or nowhere, and on two files of a folder that call
each other. The planted cases run on a copy of the tree, never on it."""

import os
import shutil
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO, "scripts", "check_layers.py")


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)


@pytest.fixture
def tree(tmp_path):
    """A copy of what the check reads: the sources and the declared rules."""
    for d in ("engine", "cuda", "cmd", "include"):
        shutil.copytree(os.path.join(REPO, d), tmp_path / d)
    (tmp_path / "docs").mkdir()
    shutil.copy(os.path.join(REPO, "docs", "architecture.md"), tmp_path / "docs")
    return tmp_path


def plant(path, line):
    """Adds `line` after the file's first #include, returning its line number."""
    lines = path.read_text().splitlines(keepends=True)
    at = next(i for i, l in enumerate(lines) if l.startswith("#include")) + 1
    lines.insert(at, line + "\n")
    path.write_text("".join(lines))
    return at + 1


def test_this_tree_follows_the_rules():
    r = run()
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 problem(s)" in r.stdout


def test_the_copy_passes_before_planting(tree):
    assert run("--root", str(tree)).returncode == 0


@pytest.mark.parametrize("where, include, words", [
    ("engine/io/rle.c", '#include "model/model.h"', "io includes model"),         # up
    ("engine/ops/nms.c", '#include "io/image.h"', "ops includes io"),             # sideways
    ("engine/cpu/backend_cpu.c", '#include "cuda_internal.h"', "cpu includes cuda"),  # backend to backend
    ("engine/core/status.c", '#include "backend/backend.h"', "core includes backend"),
    ("cmd/options.c", '#include "core/status.h"', "cmd includes core"),          # a client into the engine
])
def test_a_planted_include_fails_naming_file_and_line(tree, where, include, words):
    lineno = plant(tree / where, include)
    r = run("--root", str(tree))
    assert r.returncode == 1
    assert f"{where}:{lineno}: {words}" in r.stdout, r.stdout
    assert "1 problem(s)" in r.stdout


def test_an_include_of_nothing_fails(tree):
    lineno = plant(tree / "engine/model/rpn.c", '#include "model/no_such_header.h"')
    r = run("--root", str(tree))
    assert r.returncode == 1
    assert f"engine/model/rpn.c:{lineno}: includes \"model/no_such_header.h\", which is in no folder" in r.stdout


def test_a_folder_without_a_rule_fails(tree):
    (tree / "engine" / "extra").mkdir()
    (tree / "engine" / "extra" / "x.c").write_text('#include "core/status.h"\n')
    r = run("--root", str(tree))
    assert r.returncode == 1
    assert "folder extra has no rule" in r.stdout


@pytest.mark.skipif(shutil.which("cc") is None or shutil.which("nm") is None, reason="needs cc and nm")
def test_two_files_calling_each_other_fail_the_call_check(tree, tmp_path_factory):
    build = tmp_path_factory.mktemp("build")
    objs = build / "engine" / "model"
    objs.mkdir(parents=True)
    sources = {"driver.c": "int helper(void);\nint moved(void);\nint drive(void) { return helper() + moved(); }\n",
               "stage.c": "int drive(void);\nint helper(void) { return 1; }\nint stage(void) { return drive(); }\n",
               "leaf.c": "int leaf(void) { return 2; }\n"}
    for name, text in sources.items():
        (tree / "engine" / "model" / name).write_text(text)
        subprocess.run(["cc", "-c", str(tree / "engine" / "model" / name), "-o", str(objs / name.replace(".c", ".o"))],
                       check=True)
    # an object whose source is gone is stale, and not read: it would close a cycle with driver.o
    subprocess.run(["cc", "-c", "-x", "c", "-", "-o", str(objs / "moved_away.o")],
                   input="int drive(void);\nint moved(void) { return drive(); }\n", text=True, check=True)
    r = run("--root", str(tree), "--calls", str(build))
    assert r.returncode == 1
    assert "files call each other: driver.o <-> stage.o" in r.stdout, r.stdout
    (tree / "engine" / "model" / "stage.c").write_text("int helper(void) { return 1; }\n")
    subprocess.run(["cc", "-c", str(tree / "engine" / "model" / "stage.c"), "-o", str(objs / "stage.o")], check=True)
    assert run("--root", str(tree), "--calls", str(build)).returncode == 0


def test_the_diagram_draws_the_rules():
    """docs/architecture.md's Mermaid graph of the folders has exactly the edges of the layers
    block (so the picture cannot drift from what the check enforces), and no cycle."""
    import re
    sys.path.insert(0, os.path.join(REPO, "scripts"))
    import check_layers
    rules = check_layers.read_rules(REPO)
    text = open(os.path.join(REPO, "docs", "architecture.md"), encoding="utf-8").read()
    section = text[text.index("## Layers"):]
    graph = re.search(r"```mermaid\n(.*?)```", section, re.S).group(1)
    node = {"inc": "include"}
    edges = set()
    for line in graph.splitlines():
        for a, b in re.findall(r"(\w+)(?:\[[^\]]*\])?\s*-->\s*(\w+)", line):
            edges.add((node.get(a, a), node.get(b, b)))
    declared = {(src, dst) for src, dsts in rules.items() for dst in dsts}
    assert edges == declared, f"drawn, not declared: {edges - declared}; declared, not drawn: {declared - edges}"
    order, seen = [], set()

    def visit(v, path):
        assert v not in path, f"cycle through {v}"
        if v in seen:
            return
        for a, b in edges:
            if a == v:
                visit(b, path | {v})
        seen.add(v)

    for v in rules:
        visit(v, frozenset())
