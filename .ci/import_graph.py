#!/usr/bin/env python3
"""The import graph of the runtime library's modules, and its circles.

Every file under src/ (except src/bin/) is a node named by its module path. An edge a -> b is a
path a file names: `crate::x::y` anywhere in it (in `use` items, `use` groups `{..}` and inline
paths) and `super::`/`self::` paths, resolved to the deepest module that is a file. A parent
declaring `mod child;` is not an edge. Reports the largest strongly connected component (the
largest import circle); with --only MODULE=PREFIX,..., fails when MODULE names a module outside
those prefixes (CI: the registry names no subsystem).

    .ci/import_graph.py [--src src] [--list] [--only function::registry=function,value,error]
"""
import argparse
import os
import re
import sys

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def module_of(path, src):
    rel = os.path.relpath(path, src)[:-3].split(os.sep)
    if rel[-1] in ("mod", "lib"):
        rel = rel[:-1]
    return tuple(rel)


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    # String literals may hold `crate::` in messages; drop their contents.
    return re.sub(r'"(?:\\.|[^"\\])*"', '""', text)


def expand(text, i, prefix, out):
    """Expands the path tree that starts at text[i] (after `prefix::`) into `out`."""
    while i < len(text) and text[i].isspace():
        i += 1
    if i < len(text) and text[i] == "{":
        depth, j, start = 0, i, i + 1
        items = []
        while j < len(text):
            c = text[j]
            if c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    items.append(text[start:j])
                    break
            elif c == "," and depth == 1:
                items.append(text[start:j])
                start = j + 1
            j += 1
        for item in items:
            item = item.strip()
            if item:
                expand(item, 0, prefix, out)
        return
    m = re.match(rf"({IDENT})(\s*::\s*)?", text[i:])
    if not m:
        out.append(prefix)
        return
    name = m.group(1)
    if name == "self":
        out.append(prefix)
        return
    if m.group(2):
        expand(text, i + m.end(), prefix + (name,), out)
    else:
        out.append(prefix + (name,))


def paths_in(text, here, is_dir_module, children):
    out = []
    for m in re.finditer(r"\b(crate|super|self)\s*::", text):
        kind = m.group(1)
        if kind == "crate":
            base = ()
        elif kind == "self":
            base = here
        else:
            base = here[:-1]
        # `super::super::x`
        rest = text[m.end():]
        while True:
            s = re.match(r"\s*super\s*::", rest)
            if not s:
                break
            base = base[:-1]
            rest = rest[s.end():]
        expand(rest, 0, base, out)
    # Relative paths to a child module (`use interp::Frame;`, `interp::run(..)` in vm/mod.rs).
    for m in re.finditer(rf"(?<![:\w])({IDENT})\s*::", text):
        if m.group(1) not in ("crate", "super", "self") and here + (m.group(1),) in children:
            expand(text, m.start(), here, out)
    return out


def build(src):
    nodes = {}
    for root, dirs, files in os.walk(src):
        dirs[:] = [d for d in dirs if not (root == src and d == "bin")]
        for f in files:
            if f.endswith(".rs"):
                p = os.path.join(root, f)
                nodes[module_of(p, src)] = p
    edges = {n: set() for n in nodes}
    for n, p in nodes.items():
        with open(p, encoding="utf-8") as fh:
            text = strip_comments(fh.read())
        is_dir = os.path.basename(p) in ("mod.rs", "lib.rs")
        for path in paths_in(text, n, is_dir, nodes):
            # The deepest file module the path names.
            for k in range(len(path), -1, -1):
                if path[:k] in nodes:
                    target = path[:k]
                    break
            if target != n and target != ():
                edges[n].add(target)
    return nodes, edges


def sccs(edges):
    """Tarjan's algorithm, iterative."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]
    for v0 in edges:
        if v0 in index:
            continue
        work = [(v0, iter(sorted(edges[v0])))]
        index[v0] = low[v0] = counter[0]
        counter[0] += 1
        stack.append(v0)
        on.add(v0)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                out.append(comp)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", default=os.path.join(os.path.dirname(__file__), "..", "src"))
    ap.add_argument("--list", action="store_true", help="print the largest circle's modules")
    ap.add_argument("--only", action="append", default=[],
                    help="MODULE=PREFIX,...: the modules MODULE may name (repeatable)")
    args = ap.parse_args()
    nodes, edges = build(os.path.normpath(args.src))
    comps = sorted(sccs(edges), key=len, reverse=True)
    name = lambda m: "::".join(m) or "crate"
    big = comps[0]
    circles = [c for c in comps if len(c) > 1]
    print(f"{len(nodes)} files, {sum(len(e) for e in edges.values())} import edges, "
          f"{len(circles)} circles; largest circle: {len(big)} files")
    if args.list:
        for m in sorted(big):
            print("  " + name(m))
    status = 0
    for rule in args.only:
        module, _, allowed = rule.partition("=")
        module = tuple(module.split("::"))
        if module not in nodes:
            print(f"--only: no module {name(module)}")
            status = 1
            continue
        prefixes = [tuple(p.split("::")) for p in allowed.split(",") if p]
        bad = sorted(t for t in edges[module] if not any(t[:len(p)] == p for p in prefixes))
        if bad:
            print(f"{name(module)} may name only {allowed} but names "
                  + ", ".join(name(t) for t in bad))
            status = 1
        else:
            print(f"{name(module)} names only {allowed}")
    return status

if __name__ == "__main__":
    sys.exit(main())
