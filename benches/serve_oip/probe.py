#!/usr/bin/env python3
"""Where `tvmrt serve --model-repository` and Triton 2.51 with the tvmrt backend spend start-up,
memory and CPU, on the Triton tests' batch_mlp (x[1,16]) with and without a 500 us dynamic
batching delay. Rounds alternate the servers (the machine is shared; report medians):

- start-up to ready: process start until every model answers ready, polled every 2 ms on a
  fresh connection (no fixed step in the figure beyond that);
- resident memory idle after start and after the requests, with /proc/PID/smaps_rollup's
  anonymous and file-backed parts;
- the server's own CPU time (utime+stime of /proc/PID/stat, threads included) per request over
  N requests from one persistent HTTP connection, binary tensors and JSON, and their p50.

    .venv/triton/bin/python benches/serve_oip/probe.py \\
        --backend target/release/libtriton_tvmrt.so --tool target/release/tvmrt [--rounds 3]
"""
import argparse
import http.client
import json
import os
import statistics
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
# The repository, the servers and the configurations of one_client.py.
sys.path.insert(0, HERE)
from one_client import CONFIGS, ROOT, OipServer, triton  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")


def wait_ready_fine(self, ready_models, timeout):
    """Every model ready, polled every 2 ms (replaces the servers' 0.1 s step)."""
    deadline = time.perf_counter() + timeout
    pending = list(ready_models)
    while pending:
        if self.proc.poll() is not None:
            raise RuntimeError(f"the server exited:\n{self.log_text()}")
        if time.perf_counter() > deadline:
            self.stop()
            raise RuntimeError(f"models {pending} not ready after {timeout} s")
        pending = [m for m in pending if not ready(self.http, m)]
        if pending:
            time.sleep(0.002)


def ready(port, model):
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        c.request("GET", f"/v2/models/{model}/ready")
        ok = c.getresponse().status == 200
        c.close()
        return ok
    except OSError:
        return False


class Triton(triton.Server):
    wait_ready = wait_ready_fine


class Tvmrt(OipServer):
    wait_ready = wait_ready_fine


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def memory(pid):
    """(VmRSS, smaps_rollup's Rss, Anonymous, file-backed) in MiB."""
    with open(f"/proc/{pid}/status") as f:
        rss = next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
    roll = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 3 and parts[-1] == "kB":
                roll[parts[0].rstrip(":")] = int(parts[1])
    anon = roll.get("Anonymous", 0)
    return {"rss": rss / 1024, "anon": anon / 1024, "file": (roll.get("Rss", 0) - anon) / 1024}


def bodies():
    x = np.random.default_rng(0).standard_normal((1, 16), dtype=np.float32)
    head = json.dumps({"inputs": [{"name": "x", "shape": [1, 16], "datatype": "FP32",
                                   "parameters": {"binary_data_size": 64}}],
                       "outputs": [{"name": "output0", "parameters": {"binary_data": True}}]})
    binary = (head.encode() + x.tobytes(), {"Inference-Header-Content-Length": str(len(head)),
                                            "Content-Type": "application/octet-stream"})
    js = json.dumps({"inputs": [{"name": "x", "shape": [1, 16], "datatype": "FP32",
                                 "data": x.ravel().tolist()}]}).encode()
    return {"binary": binary, "json": (js, {"Content-Type": "application/json"})}


def run(port, pid, model, body, headers, n):
    """(server CPU us per request, p50 ms) over n requests after 50 to warm up."""
    c = http.client.HTTPConnection("127.0.0.1", port)
    path = f"/v2/models/{model}/infer"

    def one():
        c.request("POST", path, body=body, headers=headers)
        r = c.getresponse()
        r.read()
        assert r.status == 200, r.status

    for _ in range(50):
        one()
    cpu0, lat = cpu_s(pid), []
    for _ in range(n):
        t = time.perf_counter()
        one()
        lat.append(time.perf_counter() - t)
    cpu = cpu_s(pid) - cpu0
    c.close()
    return 1e6 * cpu / n, 1e3 * statistics.median(lat)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", required=True)
    ap.add_argument("--tool", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--only", choices=["triton", "tvmrt"])
    a = ap.parse_args()
    lib = os.path.join(ROOT, "crates", "triton", "tests", "models", "batch_mlp.so")
    res = {"triton": [], "tvmrt": []}
    print(f"load average before: {os.getloadavg()}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        repo = os.path.join(tmp, "repo")
        for name, config in CONFIGS.items():
            triton.add_model(repo, name, lib, config)
        starts = {
            "triton": lambda: Triton(repo, triton.backend_dir(tmp, a.backend),
                                     os.path.join(tmp, "triton.log"), list(CONFIGS)),
            "tvmrt": lambda: Tvmrt(a.tool, ["--model-repository", repo],
                                   os.path.join(tmp, "tvmrt.log"), list(CONFIGS)),
        }
        names = [a.only] if a.only else list(starts)
        for k in range(a.rounds):
            for label in names if k % 2 == 0 else reversed(names):
                t0 = time.perf_counter()
                srv = starts[label]()
                out = {"ready_s": time.perf_counter() - t0}
                try:
                    time.sleep(0.5)
                    out["idle"] = memory(srv.proc.pid)
                    for kind, (body, headers) in bodies().items():
                        for m in CONFIGS:
                            out[f"{m}/{kind}"] = run(srv.http, srv.proc.pid, m, body, headers,
                                                     a.requests)
                    out["after"] = memory(srv.proc.pid)
                    out["threads"] = len(os.listdir(f"/proc/{srv.proc.pid}/task"))
                finally:
                    srv.stop()
                res[label].append(out)
                print(label, json.dumps(out), flush=True)
    print(f"load average after: {os.getloadavg()}")
    print("medians:")
    for label in names:
        rounds = res[label]
        med = lambda f: statistics.median(f(r) for r in rounds)  # noqa: E731
        line = [f"ready {med(lambda r: r['ready_s']) * 1e3:.1f} ms",
                f"idle {med(lambda r: r['idle']['rss']):.1f} MiB "
                f"(anon {med(lambda r: r['idle']['anon']):.1f}, file {med(lambda r: r['idle']['file']):.1f})",
                f"after {med(lambda r: r['after']['rss']):.1f} MiB "
                f"(anon {med(lambda r: r['after']['anon']):.1f}, file {med(lambda r: r['after']['file']):.1f})",
                f"threads {med(lambda r: r['threads'])}"]
        for key in [k for k in rounds[0] if "/" in k]:
            line.append(f"{key}: {med(lambda r: r[key][0]):.0f} us CPU/req, "
                        f"p50 {med(lambda r: r[key][1]):.3f} ms")
        print(f"{label}: " + "; ".join(line))


if __name__ == "__main__":
    main()
