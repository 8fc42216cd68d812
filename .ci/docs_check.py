#!/usr/bin/env python3
"""Checks the guide (docs/*.md) and the README as a reader would follow them.

  .ci/docs_check.py [--book target/book] [--run-python]

- Links: every relative link of docs/**/*.md names a file that exists, and its
  `#anchor` a heading of that page (GitHub's anchors: the heading lowercased, punctuation
  dropped, spaces as hyphens, `-1`, `-2` for repeats).
- Code fences: every opening fence names its language (an unnamed block would be read as a
  trycmd example; `console` blocks are the checked `tvmrt` examples, run by
  crates/cli/tests/docs_examples.rs).
- Quotes: a block after `<!-- quote: PATH -->` must be a run of consecutive lines of PATH.
- With --book DIR (mdBook's output): every link between the book's pages, and its anchor,
  resolves in the HTML. Links out of docs/ are to repository files (checked above as Markdown).
- With --run-python: each ```python block after `<!-- run: python [VENV] -->` runs from the
  repository root with .venv/VENV (default `python`: the package's test venv) and `python/` on
  the path, and must exit 0 within 120 s.

Prints each problem as FILE:LINE: what, and exits 1 if there was any.
"""
import argparse
import html
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})(.*)$")
LINK = re.compile(r"(?<!!)\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^()\s]*(?:\([^()]*\))?[^()\s]*)\)")
MARKER = re.compile(r"^<!--\s*(quote|run):\s*(.*?)\s*-->\s*$")
problems = []


def problem(path, line, what):
    problems.append(f"{path.relative_to(ROOT)}:{line}: {what}")


def pages():
    yield from sorted((ROOT / "docs").rglob("*.md"))


def blocks(lines):
    """(start line index, info string, body lines, marker) of each fenced block."""
    out, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, info = m.groups()
        j = i + 1
        while j < len(lines) and not (
            lines[j].strip().startswith(fence) and lines[j].strip().strip(fence[0]) == ""
        ):
            j += 1
        k = i - 1
        while k >= 0 and lines[k].strip() == "":
            k -= 1
        marker = MARKER.match(lines[k].strip()) if k >= 0 else None
        body = [l[len(indent):] if l.startswith(indent) else l for l in lines[i + 1 : j]]
        out.append((i, info.strip(), body, marker))
        i = j + 1
    return out


def slug(heading):
    text = re.sub(r"`|\*\*|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip()).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        seen, found, inside = {}, set(), False
        for line in path.read_text(encoding="utf-8").split("\n"):
            if FENCE.match(line):
                inside = not inside
            m = None if inside else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
            if m:
                s = slug(m.group(1))
                n = seen.get(s, 0)
                seen[s] = n + 1
                found.add(s if n == 0 else f"{s}-{n}")
        cache[path] = found
    return cache[path]


def prose_lines(lines):
    """Line numbers and text outside fenced blocks, with inline code removed."""
    inside = None
    for n, line in enumerate(lines, 1):
        m = FENCE.match(line)
        if m and inside is None:
            inside = m.group(2)
            continue
        if inside is not None:
            if line.strip().startswith(inside) and line.strip().strip(inside[0]) == "":
                inside = None
            continue
        if line.startswith("    ") and not line.lstrip().startswith(("-", "*")):
            continue  # an indented code block (or a continuation: no links there in our pages)
        yield n, re.sub(r"(`+).*?\1", "", line)


def check_links(path, lines):
    for n, line in prose_lines(lines):
        for target in LINK.findall(line):
            if re.match(r"^[a-z]+:", target) or not target:
                continue
            file_part, _, anchor = target.partition("#")
            dest = (path.parent / file_part).resolve() if file_part else path
            if not dest.exists():
                problem(path, n, f"link to a missing file: {target}")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                problem(path, n, f"link to a missing anchor: {target}")


def check_blocks(path, lines, run_python):
    for start, info, body, marker in blocks(lines):
        if not info:
            problem(path, start + 1, "a code block without a language (```text, ```sh, ...)")
        if not marker:
            continue
        kind, arg = marker.groups()
        if kind == "quote":
            source = (ROOT / arg).read_text(encoding="utf-8").split("\n") if (ROOT / arg).exists() else None
            if source is None:
                problem(path, start, f"quoted file {arg} does not exist")
            elif not any(source[i : i + len(body)] == body for i in range(len(source))):
                problem(path, start + 1, f"the quoted block is not (or no longer) in {arg}: copy it again")
        elif kind == "run" and run_python:
            words = arg.split()
            if not words or words[0] != "python" or info != "python":
                problem(path, start, f"cannot run a `{info}` block with `{arg}`")
                continue
            venv = words[1] if len(words) > 1 else "python"
            python = ROOT / ".venv" / venv / "bin" / "python"
            env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
            try:
                r = subprocess.run([str(python), "-c", "\n".join(body)], cwd=ROOT, env=env,
                                   capture_output=True, text=True, timeout=120)
                if r.returncode != 0:
                    problem(path, start + 1, f"the Python example failed ({python}):\n{r.stdout}{r.stderr}")
                else:
                    print(f"ran {path.relative_to(ROOT)}:{start + 1} with .venv/{venv}")
            except (OSError, subprocess.TimeoutExpired) as e:
                problem(path, start + 1, f"the Python example did not run ({python}): {e}")


def check_book(book):
    for page in sorted(book.glob("*.html")):
        text = page.read_text(encoding="utf-8")
        for href in re.findall(r'href="([^"]+)"', text):
            href = html.unescape(href)
            if re.match(r"^[a-z]+:|^//", href) or href.startswith("../"):
                continue
            file_part, _, anchor = href.partition("#")
            dest = (page.parent / file_part) if file_part else page
            if not dest.exists():
                problems.append(f"{page}: link to a missing page: {href}")
            elif anchor and dest.suffix == ".html" and f'id="{anchor}"' not in dest.read_text(encoding="utf-8"):
                problems.append(f"{page}: link to a missing anchor: {href}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--book", type=Path, help="mdBook's output directory to check")
    ap.add_argument("--run-python", action="store_true", help="run the marked Python examples")
    args = ap.parse_args()
    count = 0
    for path in pages():
        lines = path.read_text(encoding="utf-8").split("\n")
        check_links(path, lines)
        check_blocks(path, lines, args.run_python)
        count += 1
    if args.book:
        check_book(args.book)
    for p in problems:
        print(p)
    print(f"docs: {count} pages, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
