#!/usr/bin/env python3
"""Sends a running `tvmrt serve --model-repository` the requests of the serving benchmark
(benches/serve_oip): health, metadata, config and statistics, HTTP inference with binary and
JSON tensors from 1, 4 and 16 concurrent clients (so the batcher runs batches > 1), and gRPC
inference, metadata and config through tritonclient. record.sh profiles the server meanwhile.

    drive.py HTTP_PORT GRPC_PORT MODEL:D1xD2... [MODEL:...]
"""
import http.client
import json
import sys
import threading

import numpy as np
import tritonclient.grpc as grpc


def get(port, path):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    c.request("GET", path)
    r = c.getresponse()
    r.read()
    c.close()
    assert r.status == 200, (path, r.status)


def infer(port, model, shape, n, binary):
    x = np.random.default_rng(0).standard_normal((1, *shape), dtype=np.float32)
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    path = f"/v2/models/{model}/infer"
    for _ in range(n):
        if binary:
            head = json.dumps({
                "inputs": [{"name": "x", "shape": list(x.shape), "datatype": "FP32",
                            "parameters": {"binary_data_size": x.nbytes}}],
                "outputs": [{"name": "output0", "parameters": {"binary_data": True}}]})
            c.request("POST", path, body=head.encode() + x.tobytes(),
                      headers={"Inference-Header-Content-Length": str(len(head))})
        else:
            c.request("POST", path, body=json.dumps({"inputs": [
                {"name": "x", "shape": list(x.shape), "datatype": "FP32",
                 "data": x.ravel().tolist()}]}))
        r = c.getresponse()
        r.read()
        assert r.status == 200, (path, r.status)
    c.close()


def main():
    port, gport = int(sys.argv[1]), int(sys.argv[2])
    models = {m: tuple(int(d) for d in s.split("x"))
              for m, s in (a.split(":") for a in sys.argv[3:])}
    for path in ["/v2/health/live", "/v2/health/ready", "/v2", "/metrics"]:
        get(port, path)
    for m in models:
        for suffix in ["", "/ready", "/config", "/stats"]:
            get(port, f"/v2/models/{m}{suffix}")
    for m, shape in models.items():
        for clients in (1, 4, 16):
            ts = [threading.Thread(target=infer, args=(port, m, shape, 6, k % 2 == 0))
                  for k in range(clients)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
    c = grpc.InferenceServerClient(f"127.0.0.1:{gport}")
    for m, shape in models.items():
        x = np.zeros((1, *shape), np.float32)
        inp = grpc.InferInput("x", list(x.shape), "FP32")
        inp.set_data_from_numpy(x)
        for _ in range(3):
            c.infer(m, [inp])
        c.get_model_metadata(m)
        c.get_model_config(m)
        c.is_model_ready(m)
    get(port, "/metrics")


if __name__ == "__main__":
    main()
