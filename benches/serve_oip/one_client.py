#!/usr/bin/env python3
"""One client in one process against Triton 2.51 with the tvmrt backend and `tvmrt serve`:
p50 latency of 1000 requests (after 50 to warm up) to the Triton tests' batch_mlp (x[1,16],
tritonclient HTTP, binary tensors), with a 500 us dynamic-batching delay and without
dynamic batching. The server's own path without the client processes of run.py.

    .venv/triton/bin/python benches/serve_oip/one_client.py \\
        --backend target/release/libtriton_tvmrt.so --tool target/release/tvmrt
"""
import argparse
import os
import sys
import tempfile
import time

import numpy as np
import tritonclient.http as http

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "crates", "triton", "tests"))
sys.path.insert(0, os.path.join(ROOT, "crates", "oip", "tests"))
import server as triton  # noqa: E402
from test_oip import OipServer  # noqa: E402

CONFIGS = {
    "batched": 'backend: "tvmrt"\nmax_batch_size: 8\n'
               "dynamic_batching { max_queue_delay_microseconds: 500 }\n",
    "unbatched": 'backend: "tvmrt"\nmax_batch_size: 8\n',
}


def p50_ms(port, model):
    c = http.InferenceServerClient(f"127.0.0.1:{port}")
    x = np.random.default_rng(0).standard_normal((1, 16), dtype=np.float32)
    i = http.InferInput("x", [1, 16], "FP32")
    i.set_data_from_numpy(x, binary_data=True)
    o = [http.InferRequestedOutput("output0", binary_data=True)]
    for _ in range(50):
        c.infer(model, [i], outputs=o)
    lat = []
    for _ in range(1000):
        t = time.perf_counter()
        c.infer(model, [i], outputs=o)
        lat.append(time.perf_counter() - t)
    c.close()
    return 1e3 * sorted(lat)[len(lat) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", required=True)
    ap.add_argument("--tool", required=True)
    a = ap.parse_args()
    lib = os.path.join(ROOT, "crates", "triton", "tests", "models", "batch_mlp.so")
    with tempfile.TemporaryDirectory() as tmp:
        repo = os.path.join(tmp, "repo")
        for name, config in CONFIGS.items():
            triton.add_model(repo, name, lib, config)
        servers = {
            "triton": lambda: triton.Server(repo, triton.backend_dir(tmp, a.backend),
                                            os.path.join(tmp, "triton.log"), list(CONFIGS)),
            "tvmrt serve": lambda: OipServer(a.tool, ["--model-repository", repo],
                                             os.path.join(tmp, "tvmrt.log"), list(CONFIGS)),
        }
        res = {}
        for label, start in servers.items():
            srv = start()
            try:
                res[label] = {m: p50_ms(srv.http, m) for m in CONFIGS}
            finally:
                srv.stop()
    for m in CONFIGS:
        t, s = res["triton"][m], res["tvmrt serve"][m]
        print(f"{m}: Triton {t:.3f} ms, tvmrt serve {s:.3f} ms p50 ({s / t:.2f}x)")


if __name__ == "__main__":
    main()
