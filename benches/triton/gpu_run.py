#!/usr/bin/env python3
"""The tvmrt backend's KIND_GPU instances in Triton 2.51 on a real CUDA GPU, from the folder
benches/triton/gpu_pack.sh wrote: unpacks the server, starts it on 127.0.0.1 (free ports),
sends KServe v2 requests over HTTP (JSON and binary tensors, plain urllib), and checks
outputs, statistics, metrics and the broken model. Python's standard library and numpy only.

    gpu_run.py DIR [--rehearse | --device-param] [--server tvmrt --tool TVMRT]

--server tvmrt: the same repository, requests and checks against `tvmrt serve
--model-repository` (issue 50) in place of Triton: its KIND_GPU instances on cuda:0 (also in a
rehearsal, on the double), its own /metrics on the HTTP port, and CUDA shared memory refused
by name (501) where Triton reads GPU pointers.

--device-param: the `models_rehearse` repository (KIND_CPU instances with `device: cuda:0`) on
the real driver: the backend's CUDA path without Triton's KIND_GPU, a fallback proof.
--rehearse: a machine without a GPU: the `models_rehearse` repository (KIND_CPU instances with
`device: cuda:0`) on tests/cuda_double's test double of the driver (DIR/libfake_cuda.so). The
double runs the `add` kernel on the host but not the MLP's kernels, so the MLP on "cuda:0" is
checked for its shape only there.

Prints one PASS/FAIL line per check and exits 1 when any failed. Logs go to $OUT when set.
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import urllib.error
import urllib.request

import numpy as np

# The free-port helper of the backend's own tests (stdlib only, as this script must be).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "crates", "triton", "tests"))
from server import free_ports  # noqa: E402

TOL = 1e-4
FAILED = []


def report(ok, name, detail=""):
    print(f"{'PASS' if ok else 'FAIL'}  {name}{': ' + detail if detail else ''}", flush=True)
    if not ok:
        FAILED.append(name)


def check(name, f):
    try:
        detail = f()
        report(True, name, detail or "")
    except Exception as e:  # every failure is a FAIL line, and the run goes on
        report(False, name, f"{type(e).__name__}: {e}"[:800])


class Http:
    def __init__(self, port):
        self.base = f"http://127.0.0.1:{port}"

    def request(self, path, body=None, headers=None, timeout=20):
        """(status, headers, body bytes); a refused connection is status None."""
        req = urllib.request.Request(self.base + path, data=body, headers=headers or {},
                                     method="POST" if body is not None else "GET")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, r.headers, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.headers, e.read()
        except OSError:
            return None, {}, b""

    def json(self, path, body=None):
        status, _, data = self.request(path, None if body is None else json.dumps(body).encode())
        if status != 200:
            raise RuntimeError(f"{path}: HTTP {status} {data[:300]!r}")
        return json.loads(data)

    def ready(self, model):
        return self.request(f"/v2/models/{model}/ready", timeout=2)[0] == 200

    def infer(self, model, inputs, binary=True):
        """{output name: array} for {input name: float32 array}: KServe v2 over HTTP, the tensors
        as binary data after the JSON header, or inline JSON."""
        header = {"inputs": [], "outputs": []}
        blobs = []
        for name, x in inputs.items():
            x = np.ascontiguousarray(x, dtype=np.float32)
            spec = {"name": name, "shape": list(x.shape), "datatype": "FP32"}
            if binary:
                spec["parameters"] = {"binary_data_size": x.nbytes}
                blobs.append(x.tobytes())
            else:
                spec["data"] = x.reshape(-1).tolist()
            header["inputs"].append(spec)
        header.pop("outputs")
        if binary:
            header["parameters"] = {"binary_data_output": True}
        head = json.dumps(header).encode()
        headers = {"Content-Type": "application/octet-stream"}
        if binary:
            headers["Inference-Header-Content-Length"] = str(len(head))
        status, rh, data = self.request(f"/v2/models/{model}/infer", head + b"".join(blobs),
                                        headers)
        if status != 200:
            raise RuntimeError(f"{model}: HTTP {status} {data[:400]!r}")
        n = int(rh.get("Inference-Header-Content-Length") or len(data))
        resp = json.loads(data[:n])
        out, pos = {}, n
        for o in resp["outputs"]:
            if o.get("datatype") != "FP32":
                raise RuntimeError(f"output {o['name']} is {o.get('datatype')}")
            size = (o.get("parameters") or {}).get("binary_data_size")
            if size is not None:
                arr = np.frombuffer(data[pos:pos + size], dtype=np.float32)
                pos += size
            else:
                arr = np.array(o["data"], dtype=np.float32)
            out[o["name"]] = arr.reshape(o["shape"])
        return out


def close(got, want, what):
    if got.shape != want.shape:
        raise AssertionError(f"{what}: shape {got.shape} != {want.shape}")
    diff = float(np.max(np.abs(got.astype(np.float64) - want))) if want.size else 0.0
    if not np.allclose(got, want, rtol=TOL, atol=TOL):
        raise AssertionError(f"{what}: max |diff| {diff:.3g} > {TOL}")
    return diff


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--rehearse", action="store_true",
                    help="no GPU: KIND_CPU + device cuda:0 on the driver's test double")
    ap.add_argument("--device-param", action="store_true",
                    help="KIND_CPU + device cuda:0 on the real driver")
    ap.add_argument("--server", choices=["triton", "tvmrt"], default="triton",
                    help="tritonserver with the backend (default), or `tvmrt serve`")
    ap.add_argument("--tool", help="the tvmrt binary, for --server tvmrt")
    args = ap.parse_args()
    tvmrt_server = args.server == "tvmrt"
    if tvmrt_server and (not args.tool or args.device_param):
        ap.error("--server tvmrt takes --tool TVMRT, and not --device-param")
    mode = "rehearse" if args.rehearse else "device_param" if args.device_param else "kind_gpu"
    if tvmrt_server:
        mode = "oip_" + mode
    t0 = time.time()
    pack = os.path.abspath(args.dir)
    logs = os.path.join(os.environ.get("OUT") or tempfile.mkdtemp(prefix="tvmrt_gpu_logs_"), mode)
    os.makedirs(logs, exist_ok=True)
    work = tempfile.mkdtemp(prefix="tvmrt_gpu_run_")
    # Triton refuses KIND_GPU where CUDA sees no device, so its rehearsal takes KIND_CPU
    # instances with `device: cuda:0`; tvmrt serve asks only tvmrt's driver (the double there).
    repo = os.path.join(pack, "models" if mode.endswith("kind_gpu") or tvmrt_server
                        else "models_rehearse")
    env = dict(os.environ)
    if args.rehearse:
        env.update(TVMRT_CUDA_LIBRARY=os.path.join(pack, "libfake_cuda.so"), FAKE_CUDA_DEVICES="1",
                   FAKE_CUDA_SM="90")
    http_port, grpc_port, metrics_port = free_ports(3)
    log_path = os.path.join(logs, "server.log")
    log = open(log_path, "w")
    if tvmrt_server:
        metrics_port = http_port
        cmd = [args.tool, "serve", "--model-repository", repo, "--host", "127.0.0.1",
               "--port", str(http_port), "--grpc-port", str(grpc_port)]
    else:
        cmd = triton_command(pack, work, repo, http_port, grpc_port, metrics_port)
        print(f"unpacked the server in {time.time() - t0:.1f} s", flush=True)
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    print(f"{args.server} pid {proc.pid}, http {http_port}, metrics {metrics_port}, "
          f"repository {os.path.basename(repo)}", flush=True)
    h = Http(http_port)
    good = ["mlp_gpu", "add_gpu", "mul_batched", "mlp_cpu"]
    try:
        deadline = time.time() + 30
        pending = list(good)
        failed = {}
        while pending and time.time() < deadline and proc.poll() is None:
            pending = [m for m in pending if not h.ready(m)]
            if pending:
                # A model whose load failed is UNAVAILABLE with its reason: stop waiting.
                status, _, data = h.request("/v2/repository/index", b"{}", timeout=5)
                if status == 200:
                    failed = {m["name"]: m.get("reason", "") for m in json.loads(data)
                              if m["name"] in pending and m.get("state") == "UNAVAILABLE"}
                    if failed and set(failed) == set(pending):
                        break
            time.sleep(0.2)
        report(not pending, f"server up, models ready ({mode})",
               f"{time.time() - t0:.1f} s since start" if not pending
               else f"not ready: {pending}, server exit {proc.poll()}, reasons {failed}")
        if not pending:
            checks(h, pack, mode, log_path, proc, metrics_port, args.server)
    finally:
        log.flush()
        code = stop(proc)
        log.close()
        with open(log_path) as f:
            text = f.read()
        unloaded = text.count("successfully unloaded")  # Triton's words
        report(code == 0, "server stopped by its pid",
               f"exit {code}" + ("" if tvmrt_server else f", {unloaded} models unloaded"))
        if FAILED:
            print("---- server log (last 40 lines) ----")
            print("\n".join(text.splitlines()[-40:]))
        shutil.rmtree(work, ignore_errors=True)
    total = time.time() - t0
    print(f"{'FAILED: ' + ', '.join(FAILED) if FAILED else 'ALL PASS'} ({total:.1f} s; "
          f"log {log_path})")
    with open(os.path.join(logs, "summary.json"), "w") as f:
        json.dump({"failed": FAILED, "seconds": total, "mode": mode}, f)
    sys.exit(1 if FAILED else 0)


def triton_command(pack, work, repo, http_port, grpc_port, metrics_port):
    """Unpacks tritonserver and the backend into `work`; the server's command line."""
    with tarfile.open(os.path.join(pack, "tritonserver.tar.xz")) as t:
        try:
            t.extractall(work, filter="data")
        except TypeError:  # a Python without extraction filters
            t.extractall(work)
    binary = os.path.join(work, "tritonserver", "pytriton", "tritonserver", "bin", "tritonserver")
    return [binary, f"--model-repository={repo}",
            f"--backend-directory={os.path.join(work, 'backends')}",
            "--http-address=127.0.0.1", f"--http-port={http_port}",
            "--grpc-address=127.0.0.1", f"--grpc-port={grpc_port}",
            "--metrics-address=127.0.0.1", f"--metrics-port={metrics_port}",
            "--exit-on-error=false", "--strict-readiness=false", "--exit-timeout-secs=10",
            "--log-verbose=0"]


def stop(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
    return proc.returncode


def checks(h, pack, mode, log_path, proc, metrics_port, server):
    rehearse = mode.endswith("rehearse")
    x = np.load(os.path.join(pack, "data", "mlp.main.in0.npy"))
    want = np.load(os.path.join(pack, "data", "mlp.main.out0.npy")).astype(np.float64)
    counts = {"mlp_gpu": 0}
    # The double does not run the MLP's kernels: its output there has the shape only.
    mlp_values = not rehearse

    def libraries():
        with open(f"/proc/{proc.pid}/maps") as f:
            libs = sorted({line.split()[-1].rsplit("/", 1)[-1] for line in f
                           if ".so" in line.split()[-1]})
        return " ".join(libs)
    check("libraries the server has mapped", libraries)

    def config():
        c = h.json("/v2/models/mlp_gpu/config")
        groups = [(g["kind"], g["count"], g.get("gpus", [])) for g in c["instance_group"]]
        if mode.endswith("kind_gpu") or server == "tvmrt":
            assert groups == [("KIND_GPU", 2, [0])], groups
        with open(log_path) as f:  # the backend's line and tvmrt serve's: "model `M` instance"
            lines = [l for l in f if "model `mlp_gpu` instance" in l]
        on = [l.rsplit(" on ", 1)[-1].strip().rstrip('"') for l in lines]
        assert len(on) == 2 and set(on) == {"cuda:0"}, on
        return f"instance_group {groups}; instances on {on}"
    check("mlp_gpu: two instances on cuda:0", config)

    def single():
        out = []
        for binary in (True, False):
            got = h.infer("mlp_gpu", {"x": x}, binary=binary)
            counts["mlp_gpu"] += 1
            assert list(got) == ["output0"], list(got)
            y = got["output0"]
            if mlp_values:
                d = close(y, want, "binary" if binary else "JSON")
                out.append(f"{'binary' if binary else 'JSON'} max|diff| {d:.2g}")
            else:
                assert y.shape == want.shape, y.shape
                out.append(f"{'binary' if binary else 'JSON'} shape {y.shape} (values not run by the double)")
        return "; ".join(out)
    check("mlp_gpu (Relax MLP, PTX) = expected output, HTTP binary and JSON", single)

    def cpu_same():
        y = h.infer("mlp_cpu", {"x": x})["output0"]
        d = close(y, want, "mlp_cpu")
        return f"max|diff| {d:.2g} (the llvm build of the same MLP)"
    check("mlp_cpu (same MLP, KIND_CPU, llvm) = expected output", cpu_same)

    def kernel():
        rng = np.random.default_rng(30)
        out = []
        for n in (1, 1000, 4099):
            a = rng.standard_normal(n, dtype=np.float32)
            b = rng.standard_normal(n, dtype=np.float32)
            y = h.infer("add_gpu", {"A": a, "B": b})["output0"]
            d = close(y, (a.astype(np.float64) + b), f"add n={n}")
            out.append(f"n={n} max|diff| {d:.2g}")
        return "; ".join(out)
    check("add_gpu (a PTX kernel by `function`) = A + B", kernel)

    def latency():
        times = []
        for _ in range(100):
            s = time.perf_counter()
            y = h.infer("mlp_gpu", {"x": x})["output0"]
            times.append(time.perf_counter() - s)
            counts["mlp_gpu"] += 1
            if mlp_values:
                close(y, want, "sequential")
        ms = np.array(times) * 1e3
        return f"100 sequential HTTP requests: p50 {np.percentile(ms, 50):.3f} ms, " \
               f"p99 {np.percentile(ms, 99):.3f} ms (client round trip)"
    check("mlp_gpu latency", latency)

    def concurrent():
        errors, done = [], [0] * 8

        def worker(k):
            try:
                for _ in range(40):
                    y = h.infer("mlp_gpu", {"x": x}, binary=k % 2 == 0)["output0"]
                    if mlp_values:
                        close(y, want, f"client {k}")
                    else:
                        assert y.shape == want.shape
                    done[k] += 1
            except Exception as e:
                errors.append(f"client {k}: {e}")
        threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
        s = time.time()
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        counts["mlp_gpu"] += sum(done)
        assert not errors, errors[:3]
        assert done == [40] * 8, done
        return f"8 clients x 40 requests in {time.time() - s:.2f} s, every answer correct"
    check("mlp_gpu: 8 concurrent clients on the two GPU instances", concurrent)

    def stats():
        s = h.json("/v2/models/mlp_gpu/stats")["model_stats"][0]
        inf, ex = int(s["inference_count"]), int(s["execution_count"])
        succ = s["inference_stats"]["success"]
        compute = s["inference_stats"]["compute_infer"]
        assert inf == counts["mlp_gpu"], (inf, counts)
        assert ex >= 1 and int(succ["count"]) == inf, s
        us = int(compute["ns"]) / max(int(compute["count"]), 1) / 1e3
        return f"inference_count {inf} = requests sent, execution_count {ex}, " \
               f"server compute_infer {us:.1f} us per execution"
    check("/v2/models/mlp_gpu/stats counts every request", stats)

    def metrics():
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as r:
            text = r.read().decode()
        line = [l for l in text.splitlines()
                if l.startswith("nv_inference_count{") and 'model="mlp_gpu"' in l]
        assert line and int(float(line[0].split()[-1])) == counts["mlp_gpu"], (line, counts)
        gpu = sorted({l.split("{")[0] for l in text.splitlines() if l.startswith("nv_gpu_")})
        return f"{line[0]}; GPU metrics: {', '.join(gpu) or 'none'}"
    check("/metrics shows mlp_gpu's inference count", metrics)

    def batched():
        # 16 clients, one row each at a time: the dynamic batcher joins them into one call of
        # mul_2d on cuda:0 (m > 1), and each client gets its own row back.
        errors, done = [], [0] * 16

        def worker(k):
            rng = np.random.default_rng(100 + k)
            try:
                for _ in range(10):
                    a = rng.standard_normal((1, 70), dtype=np.float32)
                    b = rng.standard_normal((1, 70), dtype=np.float32)
                    y = h.infer("mul_batched", {"A": a, "B": b}, binary=k % 2 == 0)["output0"]
                    close(y, a.astype(np.float64) * b, f"client {k}")
                    done[k] += 1
            except Exception as e:
                errors.append(f"client {k}: {e}")
        threads = [threading.Thread(target=worker, args=(k,)) for k in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert not errors, errors[:3]
        assert done == [10] * 16, done
        s = h.json("/v2/models/mul_batched/stats")["model_stats"][0]
        sizes = {int(b["batch_size"]): int(b["compute_infer"]["count"])
                 for b in s.get("batch_stats", [])}
        assert int(s["inference_count"]) == 160, s["inference_count"]
        assert max(sizes, default=0) > 1, f"no batch above 1: {sizes}"
        return f"160 rows from 16 clients, each = A * B; executions by batch size {sizes}"
    check("mul_batched: single rows joined into batches on cuda:0", batched)

    def broken():
        index = {m["name"]: m for m in h.json("/v2/repository/index", {})}
        b = index.get("broken", {})
        assert b.get("state") == "UNAVAILABLE", b
        assert "model `broken`" in b.get("reason", ""), b
        assert not h.ready("broken")
        for m in ("mlp_gpu", "add_gpu", "mul_batched", "mlp_cpu"):
            assert h.ready(m), m
        y = h.infer("mlp_gpu", {"x": x})["output0"]
        counts["mlp_gpu"] += 1
        if mlp_values:
            close(y, want, "after")
        assert proc.poll() is None
        return f"broken: {b['reason'][:160]}"
    check("the corrupt model fails to load; the others serve", broken)

    def cuda_shared_memory():
        # Inputs and outputs in a client's CUDA shared memory: Triton hands the backend GPU
        # pointers (TRITONSERVER_MEMORY_GPU), which it copies through tvmrt's CUDA back end.
        import base64

        import cupy  # on the GPU machine; a missing cupy is a SKIP line
        rt = cupy.cuda.runtime
        rt.setDevice(0)
        regions = {"in": x.nbytes, "out": want.size * 4}
        ptrs = {k: rt.malloc(n) for k, n in regions.items()}  # allocation bases, for IPC
        try:
            rt.memcpy(ptrs["in"], x.ctypes.data, x.nbytes, rt.memcpyHostToDevice)
            for k, n in regions.items():
                handle = base64.b64encode(bytes(rt.ipcGetMemHandle(ptrs[k]))).decode()
                status, _, data = h.request(
                    f"/v2/cudasharedmemory/region/{k}/register",
                    json.dumps({"raw_handle": {"b64": handle}, "device_id": 0,
                                "byte_size": n}).encode())
                assert status == 200, f"registering region {k}: HTTP {status} {data[:300]!r}"
            body = {"inputs": [{"name": "x", "shape": list(x.shape), "datatype": "FP32",
                                "parameters": {"shared_memory_region": "in",
                                               "shared_memory_byte_size": x.nbytes}}],
                    "outputs": [{"name": "output0",
                                 "parameters": {"shared_memory_region": "out",
                                                "shared_memory_byte_size": regions["out"]}}]}
            for model in ("mlp_gpu", "mlp_cpu"):
                rt.memset(ptrs["out"], 0, regions["out"])
                h.json(f"/v2/models/{model}/infer", body)
                y = np.empty(want.shape, np.float32)
                rt.memcpy(y.ctypes.data, ptrs["out"], y.nbytes, rt.memcpyDeviceToHost)
                close(y, want, f"{model} through CUDA shared memory")
        finally:
            for k in regions:
                h.request(f"/v2/cudasharedmemory/region/{k}/unregister", b"{}")
            for p in ptrs.values():
                rt.free(p)
        return "input read from and output written to GPU memory, mlp_gpu and mlp_cpu"
    def cuda_shared_memory_refused():
        status, _, data = h.request("/v2/cudasharedmemory/region/in/register", json.dumps(
            {"raw_handle": {"b64": "AAAA"}, "device_id": 0, "byte_size": 64}).encode())
        error = json.loads(data).get("error", "")
        assert status == 501 and "CUDA shared memory" in error, (status, data[:300])
        y = h.infer("mlp_gpu", {"x": x})["output0"]
        counts["mlp_gpu"] += 1
        if mlp_values:
            close(y, want, "after the refusal")
        return f"HTTP {status}: {error}"
    if server == "tvmrt":
        check("CUDA shared memory refused by name; the server goes on",
              cuda_shared_memory_refused)
    elif rehearse:
        print("SKIP  CUDA shared memory (no GPU in a rehearsal)")
    else:
        try:
            import cupy  # noqa: F401
            check("inputs and outputs in CUDA shared memory (GPU pointers)", cuda_shared_memory)
        except ImportError:
            print("SKIP  CUDA shared memory (no cupy)")


if __name__ == "__main__":
    main()
