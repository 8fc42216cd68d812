"""`tvmrt serve` built for another CPU, run under qemu-user as on a board, answering
tritonclient from the host (issue 50; a step of .ci/cross.sh for aarch64 and armv7).

The repository holds the target's build of the cross fixture model (tests/fixtures/cross/ARCH/
model.so, no config.pbtxt: the server completes it); tritonclient, over HTTP (JSON and binary
tensors) and gRPC, must get the outputs TVM's runtime gave on x86-64
(tests/fixtures/cross/expected/model.main.npy) within the cross fixtures' tolerance (FMA).
The server listens on 127.0.0.1 on free ports and is stopped by its process id.

    python tests/serve_board/board.py --tool TVMRT --arch DIR --qemu QEMU --sysroot DIR
"""

import argparse
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

ROOT = pathlib.Path(__file__).resolve().parents[2]
CROSS = ROOT / "tests/fixtures/cross"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(proc, url, seconds):
    client = httpclient.InferenceServerClient(url)
    deadline = time.time() + seconds
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"tvmrt serve exited with {proc.returncode}")
        try:
            if client.is_server_ready():
                return client
        except Exception:
            pass
        time.sleep(0.5)
    raise TimeoutError(f"tvmrt serve not ready in {seconds} s under qemu")


def infer(mod, client, x, binary):
    inp = mod.InferInput("x", list(x.shape), "FP32")
    if mod is httpclient:
        inp.set_data_from_numpy(x, binary_data=binary)
        out = [mod.InferRequestedOutput("output0", binary_data=binary)]
    else:
        inp.set_data_from_numpy(x)
        out = [mod.InferRequestedOutput("output0")]
    return client.infer("model", [inp], outputs=out).as_numpy("output0")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    ap.add_argument("--arch", required=True, help="the fixtures' folder: aarch64, armv7")
    ap.add_argument("--qemu", required=True)
    ap.add_argument("--sysroot", required=True)
    a = ap.parse_args()
    x = np.load(CROSS / "inputs" / "x.npy")
    want = np.load(CROSS / "expected" / "model.main.npy")
    with tempfile.TemporaryDirectory() as tmp:
        version = pathlib.Path(tmp) / "repo" / "model" / "1"
        version.mkdir(parents=True)
        shutil.copy(CROSS / a.arch / "model.so", version / "model.so")
        http_port, grpc_port = free_port(), free_port()
        log = open(pathlib.Path(tmp) / "server.log", "w+")
        proc = subprocess.Popen(
            [a.qemu, "-L", a.sysroot, a.tool, "serve", "--model-repository",
             str(version.parent.parent), "--host", "127.0.0.1", "--port", str(http_port),
             "--grpc-port", str(grpc_port)],
            stdout=log, stderr=subprocess.STDOUT)
        passed = 0
        try:
            http = wait_ready(proc, f"127.0.0.1:{http_port}", 120)
            grpc = grpcclient.InferenceServerClient(f"127.0.0.1:{grpc_port}")
            meta = http.get_model_metadata("model")
            assert [i["name"] for i in meta["inputs"]] == ["x"], meta
            passed += 1
            for mod, client, binary in ((httpclient, http, False), (httpclient, http, True),
                                        (grpcclient, grpc, True)):
                got = infer(mod, client, x, binary)
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
                passed += 1
            stats = http.get_inference_statistics("model")["model_stats"][0]
            assert int(stats["inference_count"]) == 3, stats
            passed += 1
        except BaseException:
            log.seek(0)
            print(log.read()[-4000:])
            raise
        finally:
            os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()
    print(f"serve board ({a.arch}): {passed} passed, 0 failed")


if __name__ == "__main__":
    sys.exit(main())
