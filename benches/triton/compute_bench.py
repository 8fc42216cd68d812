#!/usr/bin/env python3
"""Triton's server-side compute per execution against a direct tvmrt call of the same batch
(issue 30's "within 1.1x" goal), for a machine with more cores than the 2 of CI's: the tvmrt
backend alone (no Python backend), run from a folder benches/triton/gpu_pack.sh wrote, with
nothing but python3 + numpy (the client speaks KServe v2 over plain HTTP, binary tensors).

    python3 benches/triton/compute_bench.py PACK MODELS RUNTIME [--seconds 4] [--threads 1]
        [--models mlp,cnn] [--server-cpus 0-7 --client-cpus 8-15]

PACK: gpu_pack.sh's folder (the server and the backend); MODELS: mlp.so and cnn.so, the models
of benches/triton/run.py (MLP x[n,256] -> 1024 -> 16, CNN x[n,3,32,32]) built by TVM 0.27 with
a symbolic batch (crates/triton/tests/models/generate.py); RUNTIME: libtvmrt.so for the direct
calls. As benches/triton/run.py: max_batch_size 16, the dynamic batcher (500 us queue delay),
one instance, `threads` kernel threads in the server and in the direct call; closed-loop client
processes at concurrency 1, 4 and 16; compute = `compute_infer` of /v2/models/M/stats per batch
size, over the executions of that run; direct = median of a tvmrt call (tensor in, `main`,
output copied out) of a batch of that size in this process, after the server has stopped
(on the server's CPUs when --server-cpus pins them).
"""
import argparse
import json
import multiprocessing as mp
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
from direct_call import direct_times  # noqa: E402
from gpu_run import Http, free_ports, stop  # noqa: E402

SHAPES = {"mlp": (256,), "cnn": (3, 32, 32)}


def config(threads):
    return f"""backend: "tvmrt"
max_batch_size: 16
dynamic_batching {{ max_queue_delay_microseconds: 500 }}
instance_group [{{ kind: KIND_CPU, count: 1 }}]
parameters {{ key: "threads" value {{ string_value: "{threads}" }} }}
"""


def cpus(text):
    """A CPU list like `0-7,12` as a set (None for an empty text)."""
    if not text:
        return None
    out = set()
    for part in text.split(","):
        a, _, b = part.partition("-")
        out.update(range(int(a), int(b or a) + 1))
    return out


def client(args):
    """One closed-loop client for `seconds`: its latencies (s)."""
    port, model, shape, seconds, seed, client_cpus = args
    if client_cpus:
        os.sched_setaffinity(0, client_cpus)
    h = Http(port)
    x = np.random.default_rng(seed).standard_normal((1, *shape), dtype=np.float32)
    for _ in range(3):
        h.infer(model, {"x": x})
    lat = []
    end = time.perf_counter() + seconds
    while True:
        t0 = time.perf_counter()
        if t0 >= end:
            return lat
        h.infer(model, {"x": x})
        lat.append(time.perf_counter() - t0)


def batch_stats(h, model):
    s = h.json(f"/v2/models/{model}/stats")["model_stats"][0]
    return {int(b["batch_size"]): (int(b["compute_infer"]["count"]), int(b["compute_infer"]["ns"]))
            for b in s.get("batch_stats", [])}


def load(port, model, conc, seconds, client_cpus=None):
    h = Http(port)
    before = batch_stats(h, model)
    with mp.get_context("fork").Pool(conc) as pool:
        lats = pool.map(client, [(port, model, SHAPES[model], seconds, k, client_cpus)
                                 for k in range(conc)])
    after = batch_stats(h, model)
    delta = {b: (c - before.get(b, (0, 0))[0], ns - before.get(b, (0, 0))[1])
             for b, (c, ns) in after.items()}
    lat = sorted(x for l in lats for x in l)
    return {"requests": len(lat), "throughput": len(lat) / seconds,
            "p50_ms": 1e3 * lat[len(lat) // 2],
            "p99_ms": 1e3 * lat[min(len(lat) - 1, int(len(lat) * 0.99))],
            "batches": {b: v for b, v in delta.items() if v[0] > 0}}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("pack")
    ap.add_argument("models_dir")
    ap.add_argument("runtime")
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--concurrency", default="1,4,16")
    ap.add_argument("--models", default="mlp,cnn")
    ap.add_argument("--server-cpus", default="", help="CPUs of the server and the direct call")
    ap.add_argument("--client-cpus", default="", help="CPUs of the client processes")
    args = ap.parse_args()
    names = args.models.split(",")
    server_cpus, client_cpus = cpus(args.server_cpus), cpus(args.client_cpus)
    sib = "/sys/devices/system/cpu/cpu0/topology/thread_siblings_list"
    if os.path.exists(sib):
        with open(sib) as f:
            print(f"cpu0's hardware threads: {f.read().strip()}")
    concs = [int(c) for c in args.concurrency.split(",")]
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()}", flush=True)
    work = tempfile.mkdtemp(prefix="tvmrt_compute_bench_")
    with tarfile.open(os.path.join(args.pack, "tritonserver.tar.xz")) as t:
        t.extractall(work)
    repo = os.path.join(work, "repo")
    for name in names:
        os.makedirs(os.path.join(repo, name, "1"))
        shutil.copy(os.path.join(args.models_dir, f"{name}.so"),
                    os.path.join(repo, name, "1", "model.so"))
        with open(os.path.join(repo, name, "config.pbtxt"), "w") as f:
            f.write(config(args.threads))
    http, grpc, metrics = free_ports(3)
    log = open(os.path.join(work, "tritonserver.log"), "w")
    proc = subprocess.Popen(
        [os.path.join(work, "tritonserver", "pytriton", "tritonserver", "bin", "tritonserver"),
         f"--model-repository={repo}", f"--backend-directory={os.path.join(work, 'backends')}",
         "--http-address=127.0.0.1", f"--http-port={http}", "--grpc-address=127.0.0.1",
         f"--grpc-port={grpc}", "--metrics-address=127.0.0.1", f"--metrics-port={metrics}",
         "--exit-timeout-secs=10"], stdout=log, stderr=subprocess.STDOUT,
        preexec_fn=(lambda: os.sched_setaffinity(0, server_cpus)) if server_cpus else None)
    results = {}
    try:
        h = Http(http)
        deadline = time.time() + 60
        while not all(h.ready(m) for m in names):
            if time.time() > deadline or proc.poll() is not None:
                raise RuntimeError("the server did not get ready")
            time.sleep(0.2)
        for name in names:
            load(http, name, 2, 1.0, client_cpus)  # warm-up
            for c in concs:
                r = results[(name, c)] = load(http, name, c, args.seconds, client_cpus)
                print(f"{name} c={c}: {r['throughput']:.0f} req/s, p50 {r['p50_ms']:.3f} ms, "
                      f"p99 {r['p99_ms']:.3f} ms, batches {sorted(r['batches'])}", flush=True)
    finally:
        code = stop(proc)
        log.close()
        print(f"server stopped by its pid: exit {code}")
    os.environ["TVMRT_LIBRARY"] = os.path.abspath(args.runtime)
    os.environ["TVMRT_NUM_THREADS"] = os.environ["TVM_NUM_THREADS"] = str(args.threads)
    sys.path.insert(0, os.path.join(ROOT, "python"))
    sizes = sorted({b for r in results.values() for b in r["batches"]})
    if server_cpus:
        os.sched_setaffinity(0, server_cpus)
    times = {n: direct_times(os.path.join(args.models_dir, f"{n}.so"), SHAPES[n], sizes) for n in names}
    print()
    print("| model | clients | req/s | p50 / p99 ms | executions by batch size | "
          "compute / direct per execution (weighted) |")
    print("|---|---:|---:|---|---|---:|")
    worst = 0.0
    for (name, c), r in results.items():
        execs = sum(n for n, _ in r["batches"].values())
        server_ns = sum(ns for _, ns in r["batches"].values())
        direct_ns = sum(n * times[name][b] * 1e9 for b, (n, _) in r["batches"].items())
        ratio = server_ns / direct_ns
        worst = max(worst, ratio)
        by = ", ".join(f"{b}: {n} ({ns / n / 1e3:.1f} vs {times[name][b] * 1e6:.1f} us)"
                       for b, (n, ns) in sorted(r["batches"].items()))
        print(f"| {name} | {c} | {r['throughput']:.0f} | {r['p50_ms']:.3f} / {r['p99_ms']:.3f} "
              f"| {execs} executions; {by} | {ratio:.2f}x |")
    print(f"\nworst compute / direct: {worst:.2f}x (goal: at most 1.1x); load average "
          f"{os.getloadavg()}")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
