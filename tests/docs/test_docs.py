"""Every example in the documentation runs: README.md and docs/*.md.

- ```sh blocks run from the repository root in bash -e (each block on its own,
  in file order), after `make all`; they write under build/.
- ```c blocks are compiled against include/ and build/libdetect.so (wrapped in
  main() when they are a fragment) and run from the repository root.
- ```python blocks run with a virtual environment that has the package
  (`pip install .`, as docs/library.md says).
- The README's quick start (a ```text block: it installs packages and its
  second command is this test suite's own) is checked instead: its commands
  are `make demo` and `make check`, .ci/run runs `make check`, and `make demo`
  is run here.
- ```text, ```yaml, ```bash and ```mermaid blocks are shown, not run: they
  need what this machine lacks (a zoo checkpoint from the internet, a
  cluster) or are not commands."""

import os
import re
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOCS = ["README.md"] + sorted(os.path.join("docs", f) for f in os.listdir(os.path.join(REPO, "docs"))
                              if f.endswith(".md"))
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```\s*$", re.S | re.M)


def blocks(lang):
    out = []
    for doc in DOCS:
        with open(os.path.join(REPO, doc)) as f:
            text = f.read()
        for k, m in enumerate(b for b in FENCE.finditer(text) if b.group(1) == lang):
            line = text.count("\n", 0, m.start()) + 1
            out.append(pytest.param(m.group(2), id=f"{doc}:{line}"))
    return out


def run(cmd, **kw):
    r = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=900, **kw)
    assert r.returncode == 0, f"exit {r.returncode}\n--- stdout\n{r.stdout[-3000:]}\n--- stderr\n{r.stderr[-3000:]}"
    return r


@pytest.fixture(scope="session", autouse=True)
def built():
    run(["make", "-s", "all"])


@pytest.fixture(scope="session")
def venv_python(tmp_path_factory):
    venv = tmp_path_factory.mktemp("venv")
    run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", str(venv)])
    run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-build-isolation", "--no-deps",
         "--no-index", "."])
    return str(venv / "bin" / "python")


def test_every_doc_has_runnable_examples():
    assert blocks("sh"), "no sh blocks found"
    with open(os.path.join(REPO, "README.md")) as f:
        assert len(f.read().splitlines()) <= 150, "README.md is meant to stay short: details go to docs/"


@pytest.mark.parametrize("script", blocks("sh"))
def test_sh_block(script):
    run(["bash", "-e", "-o", "pipefail", "-c", script])


@pytest.mark.parametrize("source", blocks("c"))
def test_c_block(source, tmp_path):
    if "int main" not in source:
        head = "#include <stdio.h>\n"
        source = f"{head}int main(void)\n{{\n{source}\nreturn 0;\n}}\n"
    src, exe = tmp_path / "doc.c", tmp_path / "doc"
    src.write_text(source)
    build = os.path.join(REPO, "build")
    run(["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-I", os.path.join(REPO, "include"), str(src),
         "-L", build, "-ldetect", f"-Wl,-rpath,{build}", "-o", str(exe)])
    run([str(exe)])


@pytest.mark.parametrize("source", blocks("python"))
def test_python_block(source, venv_python, tmp_path):
    script = tmp_path / "doc.py"
    script.write_text(source)
    run([venv_python, str(script)])


def test_quick_start():
    with open(os.path.join(REPO, "README.md")) as f:
        readme = f.read()
    section = readme.split("## Quick start", 1)[1]
    block = FENCE.search(section).group(2)
    commands = [l.split("#")[0].strip() for l in block.splitlines() if l.strip()]
    assert commands == ["make demo", "make check"], commands
    with open(os.path.join(REPO, ".ci", "run")) as f:
        ci = [l.strip() for l in f if l.strip() and not l.startswith("#")]
    assert ci[-1] == "make check", ci
    run(["make", "-s", "demo"])
    for k in range(1, 5):
        assert os.path.getsize(os.path.join(REPO, "build", "demo", f"scene_{k}.png")) > 1000
