"""Fixtures of tvmrt rpc-server's end-to-end tests (tests/rpc/run.sh).

Kernels and a Relax model are compiled once per session with apache-tvm 0.27 (the pinned venv
.ci/requirements/rpc.txt). Servers listen on 127.0.0.1 only and are stopped by process id.

RPC_TEST_SERVER=tvm runs the same tests against TVM's own `python -m tvm.exec.rpc_server`
(to check the client side of the tests); the default is target/debug/tvmrt.
"""

import gc
import os
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
SERVER_KIND = os.environ.get("RPC_TEST_SERVER", "tvmrt")
TVMRT = Path(os.environ.get("TVMRT_BIN", ROOT / "target" / "debug" / "tvmrt"))
READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0
# the constants added by the parallel-sessions libraries: lib k computes a + b + k
PARALLEL_CONSTS = (0.0, 1.0, 2.0, 3.0)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Proc:
    """A child process whose merged stdout/stderr is drained by a thread into `lines`."""

    def __init__(self, argv, name, env=None):
        self.name = name
        self.argv = argv
        self.lines = []
        self.cond = threading.Condition()
        self.proc = subprocess.Popen(
            argv,
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            bufsize=1,
        )
        self.reader = threading.Thread(target=self._drain, daemon=True)
        self.reader.start()

    def _drain(self):
        for line in self.proc.stdout:
            with self.cond:
                self.lines.append(line.rstrip("\n"))
                self.cond.notify_all()
        with self.cond:
            self.cond.notify_all()

    def wait_for(self, pattern, timeout):
        """The first match of `pattern` in the output, waiting at most `timeout` seconds."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        seen = 0
        with self.cond:
            while True:
                for line in self.lines[seen:]:
                    m = rx.search(line)
                    if m:
                        return m
                seen = len(self.lines)
                left = deadline - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and not self.reader.is_alive()):
                    raise RuntimeError(
                        f"{self.name}: no line matching {pattern!r} within {timeout}s "
                        f"(exit status {self.proc.poll()}); output:\n" + self.output()
                    )
                self.cond.wait(min(left, 0.2))

    def output(self):
        with self.cond:
            return "\n".join(self.lines[-200:])

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        """Terminate the process (then kill it after a bounded wait), and the processes it
        started (TVM's tracker and server run their loops in child processes), by pid."""
        import psutil

        try:
            children = psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.Error:
            children = []
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(STOP_TIMEOUT_S)
        for child in children:
            try:
                child.terminate()
            except psutil.Error:
                pass
        _, still = psutil.wait_procs(children, timeout=STOP_TIMEOUT_S)
        for child in still:
            try:
                child.kill()
            except psutil.Error:
                pass
        self.reader.join(STOP_TIMEOUT_S)


def wait_port(host, port, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=1.0):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listens on {host}:{port} after {timeout}s")


class Server:
    def __init__(self, proc, host, port):
        self.proc = proc
        self.host = host
        self.port = port

    @property
    def addr(self):
        return self.host, self.port


def start_server(extra=(), key=None, tracker=None, launcher=(), tool=None, env=None):
    """Start an RPC server on 127.0.0.1 and wait until it listens (bounded). `launcher` runs the
    tool (qemu-user for another CPU's build, tests/rpc_board), `tool` replaces
    target/debug/tvmrt, `env` the server's environment."""
    host = "127.0.0.1"
    port = free_port()
    args = ["--host", host, "--port", str(port), "--port-end", str(port + 50)]
    if key is not None:
        args += ["--key", key]
    if tracker is not None:
        args += ["--tracker", f"{tracker[0]}:{tracker[1]}"]
    if SERVER_KIND == "tvm":
        argv = [sys.executable, "-m", "tvm.exec.rpc_server", *args]
        # TVM's server ignores --max-sessions (it serves one session at a time); drop it.
        proc = Proc(argv, "tvm rpc_server")
        m = proc.wait_for(r"bind to (\S+):(\d+)", READY_TIMEOUT_S)
        server = Server(proc, m.group(1), int(m.group(2)))
    else:
        tool = Path(tool or TVMRT)
        if not tool.exists():
            raise RuntimeError(f"{tool} is missing: cargo build -p tvmrt-cli")
        argv = [*launcher, str(tool), "rpc-server", *args, *extra]
        proc = Proc(argv, "tvmrt rpc-server", env=env)
        m = proc.wait_for(r"listening on (\S+):(\d+)", READY_TIMEOUT_S)
        server = Server(proc, m.group(1), int(m.group(2)))
    assert server.host == host
    assert port <= server.port <= port + 50
    if tracker is None and SERVER_KIND == "tvm":
        # a probe connection would be taken for a client by TVM's server; give it a moment
        time.sleep(0.2)
    return server


@pytest.fixture(scope="session")
def server():
    s = start_server()
    yield s
    s.proc.stop()


@pytest.fixture
def own_server():
    """A server of the test's own (the robustness tests may leave a server broken)."""
    s = start_server()
    yield s
    s.proc.stop()


@pytest.fixture(scope="session")
def server4():
    s = start_server(extra=["--max-sessions", "4"])
    yield s
    s.proc.stop()


def start_tracker():
    """TVM's own tracker on 127.0.0.1 (a free port); returns (process, (host, port))."""
    port = free_port()
    argv = [sys.executable, "-m", "tvm.exec.rpc_tracker", "--host", "127.0.0.1", "--port", str(port),
            "--port-end", str(port + 50)]
    proc = Proc(argv, "tvm rpc_tracker")
    m = proc.wait_for(r"bind to (\S+):(\d+)", READY_TIMEOUT_S)
    addr = (m.group(1), int(m.group(2)))
    wait_port(*addr, READY_TIMEOUT_S)
    return proc, addr


@pytest.fixture
def tracker():
    proc, addr = start_tracker()
    yield addr
    proc.stop()


def _add_kernel(const, name="add"):
    import tvm
    from tvm import te

    n = te.var("n")
    a = te.placeholder((n,), name="A", dtype="float32")
    b = te.placeholder((n,), name="B", dtype="float32")
    if const:
        c = te.compute((n,), lambda i: a[i] + b[i] + np.float32(const), name="C")
    else:
        c = te.compute((n,), lambda i: a[i] + b[i], name="C")
    func = te.create_prim_func([a, b, c]).with_attr("global_symbol", name)
    return tvm.compile(func, target="llvm")


CONNECT_TIMEOUT_S = 30.0


def bounded(fn, timeout):
    """fn() in a daemon thread, waiting at most `timeout` seconds (a server that stops answering
    fails the test instead of hanging the suite)."""
    box = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - re-raised below
            box["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout)
    if t.is_alive():
        raise TimeoutError(f"no answer from the server within {timeout}s")
    if "error" in box:
        raise box["error"]
    return box["value"]


class Artifacts:
    pass


@pytest.fixture(scope="session")
def artifacts(tmp_path_factory):
    """Libraries compiled once with TVM 0.27: the add kernel (.so, .tar), the parallel-session
    variants, and a Relax MLP with its inputs."""
    import tvm
    from tvm.relax.frontend import nn

    d = tmp_path_factory.mktemp("rpc_artifacts")
    art = Artifacts()
    art.dir = d
    add = _add_kernel(0.0)
    art.add_so = d / "add.so"
    art.add_tar = d / "add.tar"
    add.export_library(str(art.add_so))
    add.export_library(str(art.add_tar))
    art.add_name = "add"

    art.parallel = []
    for k in PARALLEL_CONSTS:
        p = d / f"add_plus_{int(k)}.so"
        _add_kernel(k).export_library(str(p))
        art.parallel.append((k, p))

    class MLP(nn.Module):
        def __init__(self):
            self.l1 = nn.Linear(16, 32)
            self.l2 = nn.Linear(32, 8)

        def forward(self, x):
            return self.l2(nn.relu(self.l1(x)))

    mod, params = MLP().export_tvm({"forward": {"x": nn.spec.Tensor((4, 16), "float32")}})
    art.mlp_so = d / "mlp.so"
    tvm.compile(mod, target="llvm").export_library(str(art.mlp_so))
    rng = np.random.default_rng(0)
    art.mlp_inputs = [rng.standard_normal((4, 16)).astype("float32")] + [
        rng.standard_normal([int(s) for s in p.shape]).astype("float32") for _, p in params
    ]
    art.mlp_entry = "forward"
    return art


@pytest.fixture
def connect(server):
    """Connect to the shared server; sessions are closed when the test's references go."""
    import tvm.rpc

    def _connect(**kw):
        return bounded(lambda: tvm.rpc.connect(server.host, server.port, **kw), CONNECT_TIMEOUT_S)

    return _connect


@pytest.fixture(autouse=True)
def _close_sessions():
    """A session ends when the client drops its last reference; pytest.raises' tracebacks hold
    the test's frame (and so its session) in a reference cycle, and the server serves one
    session at a time by default: collect after every test so the next one can connect."""
    yield
    gc.collect()
