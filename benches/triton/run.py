#!/usr/bin/env python3
"""Triton with the tvmrt backend against Triton's Python backend running the same model on TVM
0.27's Python runtime (what PyTriton's `Triton().bind(...)` gives a TVM user), in one run: the
same tritonserver binary (nvidia-pytriton 0.7.0's), the same client, the same models.

    benches/triton/run.sh            (release build, then this script in .venv/triton_bench)

For an MLP (x[n,256] -> 1024 -> 16) and a CNN (x[n,3,32,32], two conv3x3+relu+maxpool, dense
-> 10), both built by TVM 0.27 with a symbolic batch, served with max_batch_size 16 and the
dynamic batcher, one instance: throughput and p50/p99 latency at concurrency 1, 4 and 16
(closed loop, one client process per concurrent request, HTTP with binary tensors), and
Triton's server-side compute time per execution (`compute_infer` of /v2/models/M/stats, per
batch size) against a direct call of the same batch on tvmrt (the Python package over
libtvmrt.so: input tensor in, call, output copied out).
"""
import argparse
import json
import multiprocessing as mp
import os
import shutil
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "crates", "triton", "tests"))
sys.path.insert(0, os.path.join(ROOT, "crates", "triton", "tests", "models"))
from direct_call import direct_times  # noqa: E402
import generate  # noqa: E402
import server as triton  # noqa: E402

MODELS = {
    # name: (builder, input shape without the batch dimension)
    "mlp": (lambda: generate.mlp(256, 1024, 16, seed=1), (256,)),
    "cnn": (lambda: generate.cnn(3, 32, 10, seed=2), (3, 32, 32)),
}
MAX_BATCH = 16
QUEUE_DELAY_US = 500


def tvmrt_config(threads):
    return f"""backend: "tvmrt"
max_batch_size: {MAX_BATCH}
dynamic_batching {{ max_queue_delay_microseconds: {QUEUE_DELAY_US} }}
instance_group [{{ kind: KIND_CPU, count: 1 }}]
parameters {{ key: "threads" value {{ string_value: "{threads}" }} }}
"""


def client_loop(args):
    """One closed-loop client: requests for `seconds`; returns the latencies (s)."""
    port, model, shape, seconds, seed = args
    import tritonclient.http as http

    c = http.InferenceServerClient(f"127.0.0.1:{port}", network_timeout=60)
    x = np.random.default_rng(seed).standard_normal((1, *shape), dtype=np.float32)
    inp = http.InferInput("x", list(x.shape), "FP32")
    inp.set_data_from_numpy(x, binary_data=True)
    out = [http.InferRequestedOutput("output0", binary_data=True)]
    lat = []
    for _ in range(3):  # warm the connection
        c.infer(model, [inp], outputs=out)
    end = time.perf_counter() + seconds
    while True:
        t0 = time.perf_counter()
        if t0 >= end:
            break
        r = c.infer(model, [inp], outputs=out)
        r.as_numpy("output0")
        lat.append(time.perf_counter() - t0)
    c.close()
    return lat


def stats(port, model):
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/models/{model}/stats", timeout=10) as r:
        s = json.loads(r.read())["model_stats"][0]
    return {int(b["batch_size"]): (int(b["compute_infer"]["count"]), int(b["compute_infer"]["ns"]))
            for b in s["batch_stats"]}


def load(port, model, shape, conc, seconds):
    before = stats(port, model)
    with mp.get_context("spawn").Pool(conc) as pool:
        lats = pool.map(client_loop, [(port, model, shape, seconds, k) for k in range(conc)])
    after = stats(port, model)
    delta = {b: (after[b][0] - before.get(b, (0, 0))[0], after[b][1] - before.get(b, (0, 0))[1])
             for b in after}
    delta = {b: v for b, v in delta.items() if v[0] > 0}
    all_lat = sorted(x for l in lats for x in l)
    return {
        "requests": len(all_lat),
        "throughput": len(all_lat) / seconds,
        "p50_ms": 1e3 * all_lat[len(all_lat) // 2],
        "p99_ms": 1e3 * all_lat[min(len(all_lat) - 1, int(len(all_lat) * 0.99))],
        "batches": delta,
    }


def load_all(label, port, names, concs, seconds):
    """Each model warmed up, then loaded at each concurrency: {"model/conc": load(...)}."""
    out = {}
    for name in names:
        load(port, name, MODELS[name][1], 2, 1.0)  # warm-up, not recorded
        for c in concs:
            out[f"{name}/{c}"] = r = load(port, name, MODELS[name][1], c, seconds)
            print(label, name, c, summary(r), flush=True)
    return out


def python_backend(libs, ports, threads):
    """PyTriton serving each model through Triton's Python backend on TVM 0.27's runtime."""
    import tvm
    from pytriton.decorators import batch
    from pytriton.model_config import DynamicBatcher, ModelConfig, Tensor
    from pytriton.triton import Triton, TritonConfig, TritonSecurityConfig

    os.environ["TVM_NUM_THREADS"] = str(threads)
    # The Python backend's stub embeds libpython: it must be this interpreter's (a system
    # libpython of another 3.11 patch level fails on this one's standard library).
    import sysconfig
    libdir = sysconfig.get_config_var("LIBDIR")
    os.environ["LD_LIBRARY_PATH"] = ":".join(p for p in (libdir, os.environ.get("LD_LIBRARY_PATH")) if p)
    http_port, grpc_port, metrics_port = ports
    t = Triton(config=TritonConfig(
        http_address="127.0.0.1", http_port=http_port, grpc_address="127.0.0.1",
        grpc_port=grpc_port, metrics_port=metrics_port, exit_timeout_secs=5),
        # The statistics endpoint open, as the tvmrt server's is (PyTriton guards it by default).
        security_config=TritonSecurityConfig(restricted_endpoints=[]))
    for name, path in libs.items():
        vm = tvm.relax.VirtualMachine(tvm.runtime.load_module(path), tvm.cpu())

        def make(vm):
            @batch
            def infer(x):
                return {"output0": vm["main"](tvm.runtime.tensor(x)).numpy()}
            return infer
        shape = MODELS[name][1]
        t.bind(model_name=name, infer_func=make(vm),
               inputs=[Tensor(name="x", dtype=np.float32, shape=shape)],
               outputs=[Tensor(name="output0", dtype=np.float32, shape=(-1,))],
               config=ModelConfig(max_batch_size=MAX_BATCH,
                                  batcher=DynamicBatcher(max_queue_delay_microseconds=QUEUE_DELAY_US)))
    t.run()
    return t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", required=True)
    ap.add_argument("--runtime", required=True)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--threads", type=int, default=1, help="kernel threads, both backends")
    ap.add_argument("--concurrency", default="1,4,16")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    concs = [int(c) for c in args.concurrency.split(",")]
    # The machine's load decides how far these figures can be trusted: recorded before and after.
    loadavg_before = os.getloadavg()
    tmp = tempfile.mkdtemp(prefix="tvmrt_triton_bench_")
    libs = {}
    for name, (builder, _) in MODELS.items():
        libs[name] = os.path.join(tmp, f"{name}.so")
        generate.build(builder(), libs[name])
    results = {"tvmrt": {}, "python": {}}

    repo = os.path.join(tmp, "repo")
    for name, path in libs.items():
        triton.add_model(repo, name, path, tvmrt_config(args.threads))
    backends = triton.backend_dir(tmp, args.backend)
    srv = triton.Server(repo, backends, os.path.join(tmp, "tvmrt.log"), list(libs))
    try:
        results["tvmrt"] = load_all("tvmrt ", srv.http, libs, concs, args.seconds)
    finally:
        srv.stop()

    ports = triton.free_ports(3)
    t = python_backend(libs, ports, args.threads)
    try:
        results["python"] = load_all("python", ports[0], libs, concs, args.seconds)
    finally:
        t.stop()

    os.environ["TVM_NUM_THREADS"] = str(args.threads)
    os.environ["TVMRT_NUM_THREADS"] = str(args.threads)
    sizes = sorted({b for r in results["tvmrt"].values() for b in r["batches"]})
    direct = {name: direct_times(libs[name], MODELS[name][1], sizes, runtime=os.path.abspath(args.runtime))
              for name in libs}
    results["direct_s"] = {n: {str(b): v for b, v in d.items()} for n, d in direct.items()}
    results["table"] = table(results, direct, concs)
    results["loadavg_before"] = loadavg_before
    results["loadavg"] = os.getloadavg()
    print()
    print(results["table"])
    print(f"load average before the run: {results['loadavg_before']}")
    print(f"load average after the run: {results['loadavg']}")
    # The built models and the server logs (about 55 MB); kept when the run fails.
    shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1, default=str)


def summary(r):
    return (f"{r['throughput']:.0f} inf/s  p50 {r['p50_ms']:.2f} ms  p99 {r['p99_ms']:.2f} ms  "
            f"batches {dict(sorted((b, n) for b, (n, _) in r['batches'].items()))}")


def table(results, direct, concs):
    rows = ["| model | conc. | tvmrt inf/s | Python inf/s | ratio | tvmrt p50 / p99 ms | "
            "Python p50 / p99 ms | tvmrt compute / direct (batch) | Python compute (batch) |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name in direct:
        for c in concs:
            a, p = results["tvmrt"][f"{name}/{c}"], results["python"][f"{name}/{c}"]

            def common(r):
                b, (n, ns) = max(r["batches"].items(), key=lambda kv: kv[1][0])
                return b, ns / n / 1e3
            b, us = common(a)
            pb, pus = common(p)
            d = direct[name][b] * 1e6
            rows.append(
                f"| {name} | {c} | {a['throughput']:.0f} | {p['throughput']:.0f} | "
                f"{a['throughput'] / p['throughput']:.2f}x | {a['p50_ms']:.2f} / {a['p99_ms']:.2f} | "
                f"{p['p50_ms']:.2f} / {p['p99_ms']:.2f} | {us:.0f} us / {d:.0f} us = {us / d:.2f}x ({b}) | "
                f"{pus:.0f} us ({pb}) |")
    return "\n".join(rows)


if __name__ == "__main__":
    main()
