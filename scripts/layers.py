#!/usr/bin/env python3
"""scripts/layers.py: the module graph of src/, from what each file uses.

A file A uses file B when A names a function or table that B defines (not
static) and includes a header that declares it. A header belongs to the
files that define what it declares. The folders of src/ stand in ORDER,
lowest first (the one place it is written down). Checks:
  - no arrow up: a file uses no file of a folder above its own, and
    includes no header that declares something defined only above it; a
    header in include/ includes no header of a folder above its own; a
    folder not in ORDER is a problem (say where it stands);
  - no cycle: no two files use each other, directly or around a circle
    (between folders there can be none: every arrow goes down).
Prints each problem (with the symbols behind each arrow) and exits 1 if
there is one; --graph prints every arrow; --root DIR checks DIR/src and
DIR/include instead of this tree's (the fixtures of tests/layers-fixtures).
Used by `make lint` (and so `make check`).
"""
import os
import re
import sys

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The folders of src/, from the ground floor up: a file may use and include
# what its own folder and the folders below it define, nothing above.
ORDER = ["core", "sink", "codec", "archive", "store", "stage", "guest", "vm", "ops", "job", "cli"]
IDENT = re.compile(r"[A-Za-z_]\w*")


def strip(text):
    """The code without comments, strings and character literals."""
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group().count("\n"), text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r'"(\\.|[^"\\\n])*"', '""', text)
    return re.sub(r"'(\\.|[^'\\\n])*'", "''", text)


# A function definition: its head (not static) ends with ") {" or with ")"
# and "{" alone on the next line, its parameters may span lines.
FUNC = re.compile(r"^(?!static\b)(?:[A-Za-z_][\w \t\*]*?[\s\*])?([A-Za-z_]\w*)\s*\(([^;{}]*?)\)\s*\{", re.M)
TABLE = re.compile(r"^(?!static\b)(?:const\s+)?(?:struct\s+)?\w[\w\s\*]*?\b(cb_\w+)\s*(\[[^\]]*\])?\s*=", re.M)


def definitions(code):
    """Names of the non-static functions and tables a file defines."""
    return {m.group(1) for m in FUNC.finditer(code)} | {m.group(1) for m in TABLE.finditer(code)}


def includes(code):
    return set(re.findall(r'#\s*include\s+"([^"]+)"', code))


def main():
    global TOP
    if "--root" in sys.argv:
        TOP = os.path.abspath(sys.argv[sys.argv.index("--root") + 1])
    files, incs = {}, {}
    for d in sorted(os.listdir(os.path.join(TOP, "src"))):
        p = os.path.join(TOP, "src", d)
        if os.path.isdir(p):
            for f in sorted(os.listdir(p)):
                if f.endswith(".c"):
                    with open(os.path.join(p, f)) as fh:
                        raw = fh.read()
                    files[f"{d}/{f}"] = strip(raw)
                    incs[f"{d}/{f}"] = includes(raw)
    headers = {}
    for root in [os.path.join(TOP, "include")] + [os.path.join(TOP, "src", d) for d in os.listdir(os.path.join(TOP, "src"))]:
        if os.path.isdir(root):
            for f in os.listdir(root):
                if f.endswith(".h"):
                    with open(os.path.join(root, f)) as fh:
                        headers.setdefault(f, set()).update(IDENT.findall(strip(fh.read())))
    owner = {}
    for f, code in files.items():
        for name in definitions(code):
            owner.setdefault(name, f)
    edges = {f: {} for f in files}
    for f, code in files.items():
        declared = set()
        for h in incs[f]:
            declared |= headers.get(h, set())
        for name in set(IDENT.findall(code)) & declared:
            g = owner.get(name)
            if g and g != f:
                edges[f].setdefault(g, set()).add(name)
    problems = []
    rank = {d: i for i, d in enumerate(ORDER)}
    for d in sorted({f.split("/")[0] for f in files} - set(ORDER)):
        problems.append(f"src/{d}/ is not in ORDER (scripts/layers.py): say where it stands")
    def floor(path):
        return rank.get(path.split("/")[0], len(ORDER))
    def where(f):
        d = f.split("/")[0]
        return "ground floor" if d == ORDER[0] else f"{d}/"
    for f in files:
        for g, why in sorted(edges[f].items()):
            if floor(g) > floor(f):
                problems.append(f"src/{f} ({where(f)}) uses src/{g}: {', '.join(sorted(why)[:4])}")
        for h in sorted(incs[f]):
            defs = {owner[n] for n in headers.get(h, set()) if n in owner}
            if defs and min(floor(g) for g in defs) > floor(f):
                above = sorted(defs - set(edges[f]))
                if above:
                    problems.append(f"src/{f} ({where(f)}) includes {h}, a header of src/{', src/'.join(above)}")
    problems += header_problems(headers, owner, floor)
    problems += cycles(edges)
    if "--graph" in sys.argv:
        for f in sorted(edges):
            for g, why in sorted(edges[f].items()):
                print(f"src/{f} -> src/{g}: {', '.join(sorted(why)[:4])}")
    for p in problems:
        print(f"layers: {p}")
    return 1 if problems else 0


def header_problems(headers, owner, floor):
    """A header of include/ that includes a header of a folder above its own."""
    out = []
    inc_dir = os.path.join(TOP, "include")
    if not os.path.isdir(inc_dir):
        return out
    def level(h):
        defs = {owner[n] for n in headers.get(h, set()) if n in owner}
        return min((floor(g) for g in defs), default=None), defs
    for h in sorted(os.listdir(inc_dir)):
        if not h.endswith(".h"):
            continue
        mine, _ = level(h)
        if mine is None:
            continue
        with open(os.path.join(inc_dir, h)) as fh:
            for inc in sorted(includes(fh.read())):
                theirs, defs = level(inc)
                if theirs is not None and theirs > mine:
                    out.append(f"include/{h} includes {inc}, a header of src/{', src/'.join(sorted(defs))}")
    return out


def cycles(edges):
    """Strongly connected components of more than one file (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
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
                comp.sort()
                arrows = [f"src/{a} -> src/{b} ({', '.join(sorted(edges[a][b])[:3])})"
                          for a in comp for b in comp if b in edges[a]]
                out.append("a cycle: " + "; ".join(arrows))

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


if __name__ == "__main__":
    sys.exit(main())
