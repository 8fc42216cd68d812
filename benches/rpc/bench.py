"""tvmrt rpc-server against TVM's own Python RPC server, same client, same run (issue 48).

Both servers run on 127.0.0.1 on this machine; the client is apache-tvm 0.27's (the pinned venv
.ci/requirements/rpc.txt) and, for the copies, also a raw-socket client (raw_client.py, so the
server's share is the whole of the time). Figures are medians of ROUNDS rounds, servers
alternated within each round. The tiny calls also go to a server that does no work
(floor.c: canned replies), the least any server over the same socket can take, and to the
client's own CPU time, which no server can take away.

    benches/rpc/run.sh            (builds the tool, makes the venv, runs this)
"""

import gc
import os
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import psutil
import tvm
from tvm import rpc

import raw_client
from raw_client import packet, raw_string, read_packet

ROOT = Path(__file__).resolve().parents[2]
ROUNDS = int(os.environ.get("ROUNDS", "5"))
# Runs of 100 tiny calls per round and server, their median taken.
BATCHES = int(os.environ.get("BATCHES", "20"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"no server on port {port}")


def start(kind):
    port = free_port()
    if kind == "floor":
        p = subprocess.Popen([str(ROOT / "target/rpc_floor"), str(port)])
        wait_port(port)
        return p, port
    if kind == "tvmrt":
        argv = [os.environ.get("TVMRT_BIN", str(ROOT / "target/release/tvmrt")), "rpc-server"]
    else:
        argv = [sys.executable, "-m", "tvm.exec.rpc_server"]
    argv += ["--host", "127.0.0.1", "--port", str(port), "--port-end", str(port + 1)]
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(port)
    # The port probe above was a connection that said nothing: let the server drop it.
    time.sleep(0.3)
    return p, port


def close(sess):
    sess._sess.get_function("CloseRPCConnection")()
    del sess
    gc.collect()


def connect(port):
    for _ in range(200):
        try:
            return rpc.connect("127.0.0.1", port)
        except Exception:  # the previous session is still being torn down
            time.sleep(0.01)
    raise RuntimeError("cannot connect")


def tiny_calls(port, calls=100, batches=BATCHES):
    """Wall time of `calls` remote calls with TVM's client (the median of `batches` runs of
    them in one session, so that a moment's load on the shared machine does not decide), and
    the client's own CPU time over all of them (no server can take that away)."""
    sess = connect(port)
    f = sess.get_function("runtime.RuntimeEnabled")
    f("cpu")
    times = []
    cpu = time.process_time()
    for _ in range(batches):
        t = time.perf_counter()
        for _ in range(calls):
            f("cpu")
        times.append(time.perf_counter() - t)
    cpu = time.process_time() - cpu
    close(sess)
    return median(times), cpu / batches


def copies(port, data):
    sess = connect(port)
    dev = sess.cpu()
    t0 = time.perf_counter()
    a = tvm.runtime.tensor(data, dev)
    t1 = time.perf_counter()
    back = a.numpy()
    t2 = time.perf_counter()
    assert np.array_equal(back, data)
    del a
    close(sess)
    return t1 - t0, t2 - t1


def connect_time(port):
    t = time.perf_counter()
    sess = connect(port)
    dt = time.perf_counter() - t
    close(sess)
    return dt


def raw_session(port):
    """A connected, initialized raw session's socket (benches/rpc/raw_client.py)."""
    return raw_client.Session("127.0.0.1", port).sock


def session_cpu(server_pid):
    """CPU seconds used so far by the server's session processes (its descendants)."""
    total = 0.0
    for c in psutil.Process(server_pid).children(recursive=True):
        t = c.cpu_times()
        total += t.user + t.system
    return total


def raw_tiny_calls(port, server_pid=None, calls=100, batches=BATCHES):
    s = raw_session(port)
    s.sendall(packet(9, struct.pack("<i", 1) + raw_string("runtime.RuntimeEnabled")))
    code, body = read_packet(s)
    assert code == 4, body
    (handle,) = struct.unpack("<Q", body[8:16])
    call = packet(3, struct.pack("<Qi", handle, 1) + raw_string("cpu"))
    cpu = session_cpu(server_pid) if server_pid else 0.0
    times = []
    for _ in range(batches):
        t = time.perf_counter()
        for _ in range(calls):
            s.sendall(call)
            code, body = read_packet(s)
            assert code == 4, body
        times.append(time.perf_counter() - t)
    cpu = session_cpu(server_pid) - cpu if server_pid else 0.0
    s.sendall(packet(1, b""))
    s.close()
    return median(times), cpu


def raw_copies(port, data):
    sess = raw_client.Session("127.0.0.1", port)
    t = sess.empty(data.shape, str(data.dtype), (raw_client.CPU, 0))
    raw = data.tobytes()
    t0 = time.perf_counter()
    sess.copy_to(t, raw)
    t1 = time.perf_counter()
    back = sess.copy_from(t)
    t2 = time.perf_counter()
    assert back == raw
    sess.close()
    return t1 - t0, t2 - t1


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def main():
    data = np.random.default_rng(0).random(16 << 20, dtype=np.float32)  # 64 MiB
    servers = {k: start(k) for k in ("tvmrt", "tvm", "floor")}
    results = {k: {} for k in servers}
    try:
        for _ in range(ROUNDS):
            for kind, (proc, port) in servers.items():
                r = results[kind]
                if kind == "floor":
                    # A server that does nothing (floor.c): the least any server can take.
                    r.setdefault("100 tiny calls (TVM client)", []).append(tiny_calls(port)[0])
                    r.setdefault("100 tiny calls (raw client)", []).append(
                        raw_tiny_calls(port)[0]
                    )
                    continue
                dt, cpu = tiny_calls(port)
                r.setdefault("100 tiny calls (TVM client)", []).append(dt)
                r.setdefault("TVM client's own CPU for 100 tiny calls", []).append(cpu)
                dt, _ = raw_tiny_calls(port)
                r.setdefault("100 tiny calls (raw client)", []).append(dt)
                # The server's own share: the session process's CPU time over 20000 calls.
                _, cpu = raw_tiny_calls(port, proc.pid, calls=20000, batches=1)
                r.setdefault("server CPU for 100 tiny calls (20000 timed)", []).append(cpu / 200)
                up, down = copies(port, data)
                r.setdefault("64 MiB to the board (TVM client)", []).append(up)
                r.setdefault("64 MiB from the board (TVM client)", []).append(down)
                up, down = raw_copies(port, data)
                r.setdefault("64 MiB to the board (raw client)", []).append(up)
                r.setdefault("64 MiB from the board (raw client)", []).append(down)
                r.setdefault("connect (handshake + InitServer)", []).append(connect_time(port))
    finally:
        for p, _ in servers.values():
            p.kill()
            p.wait()
    print("| what | tvmrt (ms) | TVM's server (ms) | ratio | no-work floor (ms) | floor / TVM |")
    print("|---|---|---|---|---|---|")
    for what in results["tvmrt"]:
        a = median(results["tvmrt"][what]) * 1e3
        b = median(results["tvm"][what]) * 1e3
        floor = results["floor"].get(what)
        f = f"| {median(floor) * 1e3:.2f} | {median(floor) * 1e3 / b:.2f}x |" if floor else "| | |"
        print(f"| {what} | {a:.2f} | {b:.2f} | {a / b:.2f}x {f}")


if __name__ == "__main__":
    main()
