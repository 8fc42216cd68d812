"""Seeds for the rpc_packets fuzz target: what apache-tvm 0.27's RPC client really sends.

Runs a few client sessions through a recording relay in front of `tvmrt rpc-server` and
writes each session's client-to-server bytes after the key handshake to
fuzz/corpus/rpc_packets/<name> (the venv of .ci/requirements/rpc.txt):

    .venv/rpc/bin/python fuzz/rpc_record.py target/debug/tvmrt
"""

import gc
import multiprocessing
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import tvm
from tvm import rpc

OUT = Path(__file__).resolve().parent / "corpus" / "rpc_packets"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def relay(listen_port, server_port, out):
    """Accepts one client, relays it to the server, writes what the client sent to `out`.
    Runs in a process of its own: TVM's client holds the GIL while it waits on the socket."""
    record = []
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", listen_port))
    ls.listen(1)

    def run():
        c, _ = ls.accept()
        s = socket.create_connection(("127.0.0.1", server_port))

        def pump(src, dst, sink):
            while True:
                b = src.recv(1 << 16)
                if not b:
                    break
                if sink is not None:
                    sink.append(b)
                dst.sendall(b)
            try:
                dst.shutdown(socket.SHUT_WR)
            except OSError:
                pass

        t = threading.Thread(target=pump, args=(s, c, None), daemon=True)
        t.start()
        pump(c, s, record)
        t.join(10)
        ls.close()
        Path(out).write_bytes(b"".join(record))

    run()


def session(server_port, name, body):
    port = free_port()
    raw = OUT / (name + ".raw")
    th = multiprocessing.Process(target=relay, args=(port, server_port, str(raw)))
    th.start()
    time.sleep(0.5)
    sess = rpc.connect("127.0.0.1", port)
    body(sess)
    sess._sess.get_function("CloseRPCConnection")()
    del sess
    gc.collect()
    th.join(30)
    data = raw.read_bytes()
    raw.unlink()
    # Drop the handshake (magic, key length, key): the fuzz target starts after it.
    (klen,) = struct.unpack("<i", data[4:8])
    (OUT / name).write_bytes(data[8 + klen :])
    print(name, len(data) - 8 - klen, "bytes")


def tensors(sess):
    dev = sess.cpu()
    for dtype in ("float32", "int8", "float64"):
        a = tvm.runtime.tensor(np.arange(6, dtype=dtype).reshape(2, 3), dev)
        b = tvm.runtime.empty((2, 3), dtype, dev)
        b.copyfrom(a)
        b.numpy()
    tvm.runtime.tensor(np.zeros((0,), "float32"), dev).numpy()


def calls(sess):
    f = sess.get_function("runtime.RuntimeEnabled")
    f("cpu")
    sess.upload(bytearray(b"hello"), "x.bin")
    sess.download("x.bin")
    sess.remove("x.bin")
    dev = sess.cpu()
    dev.sync()


def main():
    tool = sys.argv[1]
    port = free_port()
    p = subprocess.Popen([tool, "rpc-server", "--host", "127.0.0.1", "--port", str(port)],
                         stdout=subprocess.PIPE, text=True)
    p.stdout.readline()
    try:
        OUT.mkdir(parents=True, exist_ok=True)
        session(port, "tensors", tensors)
        session(port, "calls", calls)
    finally:
        p.kill()
        p.wait()


if __name__ == "__main__":
    main()
