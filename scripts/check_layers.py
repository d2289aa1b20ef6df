#!/usr/bin/env python3
"""The folder-level include graph against the one docs/architecture.md declares.

    scripts/check_layers.py                 the includes of engine/, cuda/ and cmd/
    scripts/check_layers.py --calls build   and, from the objects in build/, that no two
                                            files of one folder call each other (a hub file)
    scripts/check_layers.py --root DIR      another checkout (the tests plant includes in a copy)

The rules are the fenced block tagged `layers` in docs/architecture.md, one
line per folder: `folder: the folders it may include`. They are written once,
there, beside the diagram; this script only reads them. Every `#include "..."`
of a C, CUDA or header file under engine/, cuda/ and cmd/ is resolved to a
folder (`core/status.h` -> core, `cuda_internal.h` beside the file -> the
file's own folder, `detect.h` -> include); an include of a folder that its
rule does not name, or one that resolves nowhere, is reported as
`FILE:LINE: FOLDER includes TARGET ("...")`, and the script exits 1.
Includes inside one folder are always allowed. System headers (`<...>`) are
not checked. tests/ and bench/ are clients that test internals and may
include any floor.

--calls reads each object's defined and undefined symbols (nm) and fails on a
cycle between two or more files of one folder: a file that drives its
siblings (a stage driver, a function table) and also holds helpers they call
back. Those helpers belong one floor down, in a file of their own.
"""
import argparse
import collections
import os
import re
import subprocess
import sys

CHECKED_TREES = ("engine", "cuda", "cmd")
SOURCE = re.compile(r"\.(c|h|cu|cuh|inc|cc)$")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def folder_of(path):
    """engine/<f>/x.c -> f; cuda/x.cu -> cuda; cmd/x.c -> cmd; include/detect.h -> include."""
    parts = path.split("/")
    return parts[1] if parts[0] == "engine" else parts[0]


def read_rules(root):
    """{folder: set of folders it may include} from docs/architecture.md's `layers` block."""
    doc = os.path.join(root, "docs", "architecture.md")
    text = open(doc, encoding="utf-8").read()
    m = re.search(r"^```text layers\n(.*?)^```", text, re.S | re.M)
    if not m:
        sys.exit(f"check_layers: {doc}: no ```text layers block (the declared include rules)")
    rules = {}
    for n, line in enumerate(m.group(1).splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, sep, allowed = line.partition(":")
        if not sep:
            sys.exit(f"check_layers: {doc}: layers line {n}: expected 'folder: folders...', got {line!r}")
        rules[name.strip()] = set(allowed.split())
    unknown = {t for allowed in rules.values() for t in allowed} - set(rules) - {"include"}
    if unknown:
        sys.exit(f"check_layers: {doc}: the layers block names folders without a rule: {sorted(unknown)}")
    return rules


def resolve(root, path, inc):
    """The folder an include of `inc` from `path` reaches, or None."""
    here = os.path.dirname(path)
    if os.path.exists(os.path.join(root, here, inc)):
        return folder_of(os.path.normpath(os.path.join(here, inc)))
    for base in ("engine", ".", "include"):  # the -I paths: -Iengine -Icuda -Iinclude
        if os.path.exists(os.path.join(root, base, inc)):
            return folder_of(os.path.normpath(os.path.join(base, inc)))
    if os.path.exists(os.path.join(root, "cuda", inc)):
        return "cuda"
    return None


def check_includes(root, rules):
    problems, count = [], 0
    for tree in CHECKED_TREES:
        for dirpath, _, files in os.walk(os.path.join(root, tree)):
            for name in sorted(files):
                if not SOURCE.search(name):
                    continue
                path = os.path.relpath(os.path.join(dirpath, name), root)
                src = folder_of(path)
                if src not in rules:
                    problems.append(f"{path}: folder {src} has no rule in docs/architecture.md's layers block")
                    continue
                with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
                    for lineno, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        count += 1
                        target = resolve(root, path, m.group(1))
                        if target is None:
                            problems.append(f'{path}:{lineno}: includes "{m.group(1)}", which is in no folder')
                        elif target != src and target not in rules[src]:
                            problems.append(f'{path}:{lineno}: {src} includes {target} ("{m.group(1)}"): '
                                            f"not allowed ({src} may include: {' '.join(sorted(rules[src])) or 'nothing'})")
    return problems, count


def symbols(obj):
    out = subprocess.run(["nm", obj], capture_output=True, text=True, check=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "U":
            undefined.add(parts[1])
        elif len(parts) == 3 and parts[1] in "TDBRV":
            defined.add(parts[2])
    return defined, undefined


def cycles(graph):
    """Strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def check_calls(root, build):
    problems, folders = [], collections.defaultdict(list)
    for dirpath, _, files in os.walk(build):
        rel = os.path.relpath(dirpath, build)
        if rel.split("/")[0] not in ("engine", "cuda"):
            continue
        for f in sorted(files):
            # An object whose source is gone (a file moved since the last build) is stale: skipped.
            source = os.path.join(root, rel, f[:-len(".cu.o")] + ".cu" if f.endswith(".cu.o") else f[:-2] + ".c")
            if f.endswith(".o") and os.path.exists(source):
                folders[rel].append(os.path.join(dirpath, f))
    if not any(folders.values()):
        return [f"{build}: no engine or cuda objects (build first)"], 0
    for rel, objs in sorted(folders.items()):
        owner, needs = {}, {}
        for o in objs:
            defined, undefined = symbols(o)
            needs[o] = undefined
            for s in defined:
                owner[s] = o
        graph = {o: {owner[s] for s in needs[o] if s in owner and owner[s] != o} for o in objs}
        for comp in cycles(graph):
            names = [os.path.basename(c) for c in comp]
            detail = "; ".join(f"{os.path.basename(a)} calls {os.path.basename(b)} "
                               f"({', '.join(sorted(s for s in needs[a] if owner.get(s) == b)[:3])})"
                               for a in comp for b in comp if b in graph[a])
            problems.append(f"{build}/{rel}: files call each other: {' <-> '.join(names)}: {detail}")
    return problems, sum(len(v) for v in folders.values())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap.add_argument("--calls", metavar="BUILD", help="also check file-level call cycles in BUILD's objects")
    args = ap.parse_args()
    rules = read_rules(args.root)
    problems, count = check_includes(args.root, rules)
    summary = f"check_layers: {count} includes in {', '.join(CHECKED_TREES)} against {len(rules)} folder rules"
    if args.calls:
        calls, objects = check_calls(args.root, os.path.join(args.root, args.calls) if not os.path.isabs(args.calls)
                                     else args.calls)
        problems += calls
        summary += f"; calls between {objects} objects"
    for p in problems:
        print(p)
    print(f"{summary}: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
