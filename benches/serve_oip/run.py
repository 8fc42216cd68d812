#!/usr/bin/env python3
"""`tvmrt serve --model-repository` against Triton 2.51 with the tvmrt backend (issue 50), in
one run: the same repository (benches/triton's MLP and CNN, built by TVM 0.27, max_batch_size
16, the dynamic batcher, one instance), the same closed-loop tritonclient HTTP clients
(benches/triton/run.py's `load`), one server after the other.

Per server: start-up to ready (process start until every model answers ready, polled every 2 ms
on a fresh connection, probe.py's wait), resident
memory after the load (VmRSS of the server process, its children included), throughput and
p50/p99 latency at 1, 4 and 16 clients.

    benches/serve_oip/run.sh [--seconds 4 --json out.json]
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "benches", "triton"))
sys.path.insert(0, os.path.join(ROOT, "crates", "oip", "tests"))
import run as triton_bench  # noqa: E402  (benches/triton/run.py: models, config, load)
from test_oip import OipServer  # noqa: E402  (`tvmrt serve` started as its tests start it)
from probe import wait_ready_fine  # noqa: E402  (the same readiness wait for both servers)

generate, triton = triton_bench.generate, triton_bench.triton


class Triton(triton.Server):
    wait_ready = wait_ready_fine


class Tvmrt(OipServer):
    wait_ready = wait_ready_fine


def rss_kib(pid):
    """Resident memory of pid and its descendants, in KiB."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/status") as f:
                total += next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
            with open(f"/proc/{p}/task/{p}/children") as f:
                todo += [int(c) for c in f.read().split()]
        except (OSError, StopIteration):
            pass
    return total


def measure(name, start, models, concs, seconds):
    t0 = time.perf_counter()
    srv = start()
    ready_s = time.perf_counter() - t0
    out = {"ready_s": ready_s}
    try:
        out["load"] = triton_bench.load_all(name, srv.http, models, concs, seconds)
        out["rss_mib"] = rss_kib(srv.proc.pid) / 1024
    finally:
        srv.stop()
    print(f"{name}: ready in {ready_s:.2f} s, {out['rss_mib']:.1f} MiB resident", flush=True)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", required=True)
    ap.add_argument("--tool", required=True)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--concurrency", default="1,4,16")
    ap.add_argument("--json")
    a = ap.parse_args()
    concs = [int(c) for c in a.concurrency.split(",")]
    loadavg_before = os.getloadavg()
    tmp = tempfile.mkdtemp(prefix="tvmrt_oip_bench_")
    repo = os.path.join(tmp, "repo")
    for name, (builder, _) in triton_bench.MODELS.items():
        lib = os.path.join(tmp, f"{name}.so")
        generate.build(builder(), lib)
        triton.add_model(repo, name, lib, triton_bench.tvmrt_config(1))
    backends = triton.backend_dir(tmp, a.backend)
    models = triton_bench.MODELS
    res = {
        "triton": measure("triton", lambda: Triton(
            repo, backends, os.path.join(tmp, "triton.log"), list(models)), models, concs,
            a.seconds),
        "tvmrt": measure("tvmrt ", lambda: Tvmrt(
            a.tool, ["--model-repository", repo], os.path.join(tmp, "tvmrt.log"), list(models)),
            models, concs, a.seconds),
    }
    rows = ["| model | clients | Triton+backend inf/s | tvmrt serve inf/s | ratio | "
            "Triton p50 ms | tvmrt p50 ms | p50 ratio |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for m in models:
        for c in concs:
            t, s = res["triton"]["load"][f"{m}/{c}"], res["tvmrt"]["load"][f"{m}/{c}"]
            rows.append(f"| {m} | {c} | {t['throughput']:.0f} | {s['throughput']:.0f} | "
                        f"{s['throughput'] / t['throughput']:.2f}x | {t['p50_ms']:.2f} | "
                        f"{s['p50_ms']:.2f} | {s['p50_ms'] / t['p50_ms']:.2f}x |")
    t, s = res["triton"], res["tvmrt"]
    rows += ["", f"start-up to ready: Triton {t['ready_s']:.2f} s, tvmrt serve {s['ready_s']:.2f} s "
             f"({s['ready_s'] / t['ready_s']:.3f}x)",
             f"resident memory: Triton {t['rss_mib']:.1f} MiB, tvmrt serve {s['rss_mib']:.1f} MiB "
             f"({s['rss_mib'] / t['rss_mib']:.2f}x)",
             f"load average before / after: {loadavg_before} / {os.getloadavg()}"]
    print("\n".join(rows))
    shutil.rmtree(tmp, ignore_errors=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1, default=str)


if __name__ == "__main__":
    main()
