#!/usr/bin/env python3
"""Checks the guide (docs/*.md) and the README as a reader would follow them.

  .ci/docs_check.py [--book target/book] [--run-python] [--run-servers] [PAGE.md ...]

- Links: every relative link of README.md and docs/**/*.md names a file that exists, and its
  `#anchor` a heading of that page (GitHub's anchors: the heading lowercased, punctuation
  dropped, spaces as hyphens, `-1`, `-2` for repeats).
- Code fences: every opening fence names its language (an unnamed block would be read as a
  trycmd example; `console` blocks are the checked `tvmrt` examples, run by
  crates/cli/tests/docs_examples.rs).
- A `tvmrt` command on the shipped files (`tests/fixtures/`, `examples/`) in a shell block is
  an error: it belongs in a ```console block, where it is checked (`tvmrt serve`, whose examples
  run against it below, aside).
- Quotes: a block after `<!-- quote: PATH -->` must be a run of consecutive lines of PATH.
- With --book DIR (mdBook's output): every link between the book's pages, and its anchor,
  resolves in the HTML. Links out of docs/ are to repository files (checked above as Markdown).
- With --run-python: each ```python block after `<!-- run: python [VENV] -->` runs from the
  repository root with .venv/VENV (default `python`: the package's test venv) and `python/` on
  the path, and must exit 0 within 120 s.
- With --run-servers: a ```sh or ```python block after
  `<!-- run: sh with tvmrt serve ARGS -->` (or `run: python [VENV] with tvmrt serve ARGS`) runs
  against that server: target/debug/tvmrt (or $TVMRT_BIN) started from the repository root
  with ARGS and `--port 0`, on 127.0.0.1, once for all the blocks that name the same ARGS,
  stopped by its process id at the end. The block's `127.0.0.1:8000` becomes the server's
  address; shell blocks run under `set -euo pipefail`, `curl` failing on an HTTP error unless
  the block's output is shown (next item).
- With --run-servers, a ```python block after
  `<!-- run: python [VENV] with tvmrt rpc-server ARGS and a tracker -->` runs against TVM's
  tracker (`python -m tvm.exec.rpc_tracker` of .venv/rpc) and `tvmrt rpc-server ARGS`
  registered to it, both on 127.0.0.1 on free ports, started once per ARGS and stopped by
  their process ids (process groups: the tracker's loop is a child process) at the end. The
  block gets the tracker's address in TVM's variables TVM_TRACKER_HOST and TVM_TRACKER_PORT
  (which MetaSchedule's RPCConfig reads too), and ARGS' `--key` in TVM_TRACKER_KEY.
- With --run-python, `<!-- run: python [VENV] with the CUDA driver's test double -->` runs the
  block with TVMRT_CUDA_LIBRARY naming tests/cuda_double/fake_cuda.c built with `cc` (one
  device, sm_80; it runs the CUDA fixtures' kernels on the host, so values are checked): a
  CUDA example runs in CI on a machine without a GPU.
- `run: python [VENV] continued ...` runs the page's previous run block first, in the same
  process (an example that goes on from the one before it: `client` made there).
- A run block followed by a block after `<!-- output -->` must print that (`[..]` stands for
  any part of a line, a `...` line for any lines, as in trycmd).

Prints each problem as FILE:LINE: what, and exits 1 if there was any.
"""
import argparse
import html
import os
import re
import select
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})(.*)$")
LINK = re.compile(r"(?<!!)\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^()\s]*(?:\([^()]*\))?[^()\s]*)\)")
MARKER = re.compile(r"^<!--\s*(quote|run|output)(?::\s*(.*?))?\s*-->\s*$")
problems = []
servers = {}  # ARGS -> (process, "127.0.0.1:PORT", log)
rpc_servers = {}  # ARGS -> ([tracker, server], {TVM_TRACKER_*: ...}, [logs])
RPC = re.compile(r"(tvmrt rpc-server\b.*?) and a tracker")
CUDA_DOUBLE = "the CUDA driver's test double"
built = {}  # what the examples need, built once: "fake_cuda" -> its path, "dir" -> where
# Without a shown output, an HTTP error fails the block; with one, the output decides.
CURL = 'curl() { command curl -sS %s--max-time 120 "$@"; }\n'


def problem(path, line, what):
    problems.append(f"{path.relative_to(ROOT)}:{line}: {what}")


def pages():
    yield ROOT / "README.md"
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


def check_blocks(path, lines, run_python, run_servers):
    found = blocks(lines)
    previous = ""  # the text of the page's last run block
    for n, (start, info, body, marker) in enumerate(found):
        if not info:
            problem(path, start + 1, "a code block without a language (```text, ```sh, ...)")
        if info in ("sh", "bash", "shell"):
            for k, line in enumerate(body):
                if re.search(r"(^|[\s/])tvmrt (?!serve)\S.*(tests/fixtures/|examples/)", line) and not line.lstrip().startswith("#"):
                    problem(path, start + 2 + k, "a `tvmrt` example on shipped files: make it a ```console block (checked)")
        if not marker:
            continue
        kind, arg = marker.groups()
        if kind == "quote":
            source = (ROOT / arg).read_text(encoding="utf-8").split("\n") if (ROOT / arg).exists() else None
            if source is None:
                problem(path, start, f"quoted file {arg} does not exist")
            elif not any(source[i : i + len(body)] == body for i in range(len(source))):
                problem(path, start + 1, f"the quoted block is not (or no longer) in {arg}: copy it again")
        elif kind == "run":
            after = found[n + 1] if n + 1 < len(found) else None
            expected = after[2] if after and after[3] and after[3].group(1) == "output" else None
            words = (arg or "").partition(" with ")[0].split()
            if "continued" in words:
                body = previous.split("\n") + body
                arg = arg.replace(" continued", "", 1)
            previous = "\n".join(body)
            run_block(path, start, info, body, arg or "", run_python, run_servers, expected)


def matches(expected, actual):
    """trycmd's elisions: `[..]` within a line, `...` for whole lines."""
    parts = []
    for line in expected:
        if line.strip() == "...":
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append(".*?".join(map(re.escape, line.split("[..]"))) + r"\n")
    return re.fullmatch("".join(parts), actual.rstrip("\n") + "\n") is not None


def run_block(path, start, info, body, arg, run_python, run_servers, expected=None):
    how, _, server = arg.partition(" with ")
    words = how.split()
    where = f"{path.relative_to(ROOT)}:{start + 1}"
    rpc = RPC.fullmatch(server)
    cuda = server == CUDA_DOUBLE
    if cuda:
        server = ""  # runs with the Python examples
    if not words or words[0] != info or info not in ("python", "sh") or (
        server and not server.startswith("tvmrt serve ") and not (rpc and info == "python")
    ):
        problem(path, start, f"cannot run a `{info}` block with `{arg}`")
        return
    if (server and not run_servers) or (not server and not run_python):
        return
    text = "\n".join(body)
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
    if cuda:
        double = fake_cuda()
        if double is None:
            problem(path, start + 1, "the CUDA driver's test double did not build")
            return
        env.update(TVMRT_CUDA_LIBRARY=double, FAKE_CUDA_DEVICES="1", FAKE_CUDA_SM="80")
    if rpc:
        tracker = start_rpc(rpc.group(1))
        if tracker is None:
            problem(path, start + 1, f"the tracker and `{rpc.group(1)}` did not start")
            return
        env.update(tracker)
    elif server:
        addr = start_server(server)
        if addr is None:
            problem(path, start + 1, f"the server `{server}` did not start")
            return
        text = text.replace("127.0.0.1:8000", addr)
    if info == "python":
        venv = words[1] if len(words) > 1 else "python"
        cmd = [str(ROOT / ".venv" / venv / "bin" / "python"), "-c", text]
    else:
        venv = None
        fail = "" if expected is not None else "--fail-with-body "
        cmd = ["bash", "-c", "set -euo pipefail\n" + CURL % fail + text]
    t0 = time.monotonic()
    try:
        r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    except (OSError, subprocess.TimeoutExpired) as e:
        problem(path, start + 1, f"the example did not run ({cmd[0]}): {e}")
        return
    if r.returncode != 0:
        problem(path, start + 1, f"the example failed ({cmd[0]}):\n{r.stdout}{r.stderr}")
    elif expected is not None and not matches(expected, r.stdout):
        problem(path, start + 1, "the example printed something else than shown:\n" + r.stdout)
    else:
        print(f"ran {where}" + (f" with .venv/{venv}" if venv else "") + (f" against `{server}`" if server else "")
              + (f" on {CUDA_DOUBLE}" if cuda else "") + f" ({time.monotonic() - t0:.1f} s)")


def start_server(command, timeout=120):
    """The address of a running `tvmrt serve` with these arguments, started when needed."""
    if command in servers:
        return servers[command][1]
    exe = os.environ.get("TVMRT_BIN", str(ROOT / "target" / "debug" / "tvmrt"))
    log = tempfile.TemporaryFile()
    args = [exe] + shlex.split(command)[1:] + ["--host", "127.0.0.1", "--port", "0"]
    proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=log, text=True)
    servers[command] = (proc, None, log)
    deadline = time.monotonic() + timeout
    addr = None
    while addr is None and time.monotonic() < deadline and proc.poll() is None:
        ready, _, _ = select.select([proc.stdout], [], [], 1.0)
        if ready:
            m = re.search(r"listening on http://(\S+)", proc.stdout.readline())
            addr = m.group(1) if m else None
    while addr and time.monotonic() < deadline and proc.poll() is None:
        for probe in ("/health", "/v2/health/ready"):
            try:
                with urllib.request.urlopen(f"http://{addr}{probe}", timeout=5) as r:
                    if r.status == 200:
                        servers[command] = (proc, addr, log)
                        return addr
            except OSError:
                pass
        time.sleep(0.5)
    log.seek(0)
    print(f"`{command}` did not get ready; its log:\n{log.read().decode(errors='replace')}")
    return None


def fake_cuda():
    """The path of the CUDA driver's test double, built once (None if it does not build)."""
    if "fake_cuda" not in built:
        built["dir"] = tempfile.mkdtemp(prefix="docs_fake_cuda_")
        out = Path(built["dir"]) / "libfake_cuda.so"
        cc = os.environ.get("CC", "cc")
        r = subprocess.run([cc, "-shared", "-fPIC", "-O2", "-o", str(out),
                            str(ROOT / "tests" / "cuda_double" / "fake_cuda.c"), "-lm", "-lpthread"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            print(f"{cc} fake_cuda.c:\n{r.stdout}{r.stderr}")
        built["fake_cuda"] = str(out) if r.returncode == 0 else None
    return built["fake_cuda"]


def wait_log(proc, log, pattern, deadline):
    """The first match of `pattern` in the process's output file, or None if it exits or the
    deadline passes first."""
    rx = re.compile(pattern)
    while time.monotonic() < deadline:
        log.seek(0)
        m = rx.search(log.read().decode(errors="replace"))
        if m or proc.poll() is not None:
            return m
        time.sleep(0.2)
    return None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_rpc(command, timeout=60):
    """TVM's tracker and `tvmrt rpc-server ARGS` registered to it, started when needed: the
    TVM_TRACKER_* variables naming them, or None."""
    if command in rpc_servers:
        return rpc_servers[command][1]
    procs, logs = [], []
    rpc_servers[command] = (procs, None, logs)
    deadline = time.monotonic() + timeout

    def spawn(argv, ready):
        log = tempfile.TemporaryFile()
        logs.append(log)
        # A group of its own, stopped as one: TVM's tracker serves from a child process.
        procs.append(subprocess.Popen(argv, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=log,
                                      stderr=subprocess.STDOUT, start_new_session=True))
        m = wait_log(procs[-1], log, ready, deadline)
        if m is None:
            log.seek(0)
            print(f"`{shlex.join(argv)}` did not get ready; its log:\n"
                  + log.read().decode(errors="replace"))
        return m

    port = free_port()
    python = str(ROOT / ".venv" / "rpc" / "bin" / "python")
    m = spawn([python, "-m", "tvm.exec.rpc_tracker", "--host", "127.0.0.1", "--port", str(port),
               "--port-end", str(port + 50)], r"bind to 127\.0\.0\.1:(\d+)")
    if m is None:
        return None
    tracker = m.group(1)
    exe = os.environ.get("TVMRT_BIN", str(ROOT / "target" / "debug" / "tvmrt"))
    args = shlex.split(command)[1:]
    port = free_port()
    if spawn([exe, *args, "--host", "127.0.0.1", "--port", str(port), "--port-end",
              str(port + 50), "--tracker", f"127.0.0.1:{tracker}"], r"listening on \S+") is None:
        return None
    env = {"TVM_TRACKER_HOST": "127.0.0.1", "TVM_TRACKER_PORT": tracker}
    if "--key" in args[:-1]:
        env["TVM_TRACKER_KEY"] = args[args.index("--key") + 1]
    rpc_servers[command] = (procs, env, logs)
    return env


def stop_servers():
    if "dir" in built:
        shutil.rmtree(built["dir"], ignore_errors=True)
    for proc, _, log in servers.values():
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
    for procs, _, logs in rpc_servers.values():
        for proc in reversed(procs):
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(proc.pid, sig)
                    proc.wait(timeout=20)
                    break
                except ProcessLookupError:
                    break
                except subprocess.TimeoutExpired:
                    continue
            proc.wait()
        for log in logs:
            log.close()


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
    ap.add_argument("--run-servers", action="store_true", help="run the examples that need a server")
    ap.add_argument("pages", nargs="*", type=Path, help="only these pages (default: all)")
    args = ap.parse_args()
    count = 0
    try:
        for path in [p.resolve() for p in args.pages] or pages():
            lines = path.read_text(encoding="utf-8").split("\n")
            check_links(path, lines)
            check_blocks(path, lines, args.run_python, args.run_servers)
            count += 1
    finally:
        stop_servers()
    if args.book:
        check_book(args.book)
    for p in problems:
        print(p)
    print(f"docs: {count} pages, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
