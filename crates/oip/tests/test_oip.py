#!/usr/bin/env python3
"""`tvmrt serve --model-repository` (crates/oip) under the Triton backend's own client tests:
the same repository and the same checks (crates/triton/tests/test_triton.py's `tests`, with
tritonclient over HTTP binary and JSON and gRPC: outputs equal to direct tvmrt calls and TVM's
recorded outputs, auto-completed configurations, dynamic batching seen in the statistics, two
instances, 16 clients x 200 requests, every bad input, broken models listed with their reason),
then what only this server is asked: bad requests at the protocol level (unknown model,
malformed JSON and protobuf, an oversized body, a batch over the maximum, shapes far beyond the
data sent) each refused alone,
load/unload/reload without a restart, and SIGTERM with requests in flight (every accepted
request answered, a clean exit).

Run through crates/oip/tests/run.sh, which builds the tool and libtvmrt.so.
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
TRITON_TESTS = os.path.join(ROOT, "crates", "triton", "tests")
sys.path.insert(0, TRITON_TESTS)
import server as triton  # noqa: E402
import test_triton as tt  # noqa: E402
from test_triton import FIX, check, equal  # noqa: E402
import extensions  # noqa: E402

# Requests larger than this get 413 (the largest the shared tests send is a few KB).
MAX_REQUEST = 1 << 20


class OipServer(triton.Server):
    """`tvmrt serve --model-repository` on 127.0.0.1 and free ports; the interface of the
    Triton test's server (its /metrics is on the HTTP port); stopped by its pid."""

    def __init__(self, tool, what, log_path, ready_models, timeout=120):
        """`what`: the arguments naming what to serve (`--model-repository DIR`, or a file)."""
        self.http, self.grpc = triton.free_ports(2)
        self.metrics = self.http
        self.log = open(log_path, "w")
        self.log_path = log_path
        args = [tool, "serve", *what, "--host", "127.0.0.1",
                "--port", str(self.http), "--grpc-port", str(self.grpc),
                "--max-request-size", str(MAX_REQUEST)]
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        self.wait_ready(ready_models, timeout)

    def post(self, path, body, headers=None):
        """(status, parsed JSON body) of POST path."""
        req = urllib.request.Request(self.url(path), data=body, method="POST",
                                     headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")


# The JSON of a binary request whose input claims 64 bytes.
BINARY_HEAD = (b'{"inputs": [{"name": "x", "shape": [1, 16], "datatype": "FP32", '
               b'"parameters": {"binary_data_size": 64}}]}')

# ... and one whose 2^62 + 1 elements would wrap to the 4 bytes sent.
WRAPS_HEAD = (b'{"inputs": [{"name": "x", "shape": [1, 4611686018427387905], "datatype": "FP32", '
              b'"parameters": {"binary_data_size": 4}}]}')


def protocol_errors(srv, cl, direct, rng):
    x = rng.standard_normal((1, 16), dtype=np.float32)
    want = direct.relax(f"{HERE}/../../triton/tests/models/batch_mlp.so", x)[0]

    def served_alone():
        equal(cl.infer("http", "batch_mlp", {"x": x})["output0"], want, "batch_mlp after a bad request")

    def infer_json(model, inputs):
        return srv.post(f"/v2/models/{model}/infer", json.dumps({"inputs": inputs}).encode())

    good = [{"name": "x", "shape": [1, 16], "datatype": "FP32", "data": x.tolist()}]
    cases = [
        ("unknown model", lambda: infer_json("no_such_model", good), 404,
         "Request for unknown model: 'no_such_model' is not found"),
        ("unknown version", lambda: srv.post("/v2/models/batch_mlp/versions/7/infer",
                                             json.dumps({"inputs": good}).encode()), 404,
         "'batch_mlp' version 7 is not found"),
        ("malformed JSON", lambda: srv.post("/v2/models/batch_mlp/infer", b'{"inputs": [{"name": '), 400,
         "malformed inference request JSON"),
        ("oversized body", lambda: srv.post("/v2/models/batch_mlp/infer", b" " * (MAX_REQUEST + 1)), 413,
         f"larger than {MAX_REQUEST} bytes"),
        ("batch over the maximum (8)", lambda: infer_json("batch_mlp", [
            {"name": "x", "shape": [9, 16], "datatype": "FP32", "data": [0.0] * 144}]), 400,
         "batch-size must be <= 8 for 'batch_mlp'"),
        ("an input the model does not take", lambda: infer_json("batch_mlp", good + [
            {"name": "y", "shape": [1], "datatype": "FP32", "data": [1]}]), 400,
         "unexpected inference input 'y'"),
        ("data short of the shape", lambda: infer_json("batch_mlp", [
            {"name": "x", "shape": [1, 16], "datatype": "FP32", "data": [1.0] * 15}]), 400,
         "holds 15 elements, its shape has 16"),
        # Once aborted the whole server: 2^40 elements claimed, one sent, and 8 TiB asked of
        # the allocator before the elements were counted.
        ("a shape far beyond the data sent", lambda: infer_json("batch_mlp", [
            {"name": "x", "shape": [1, 1 << 40], "datatype": "FP32", "data": [1.0]}]), 400,
         "holds 1 elements, its shape has 1099511627776"),
        # 2^62 + 1 elements of 4 bytes wrap to 4 bytes in 64 bits.
        ("a binary size that matches a shape only modulo 2^64", lambda: srv.post(
            "/v2/models/batch_mlp/infer", WRAPS_HEAD + b"\0" * 4,
            {"Inference-Header-Content-Length": str(len(WRAPS_HEAD))}), 400,
         "holds 4 bytes, its shape needs 18446744073709551620"),
        ("an unknown datatype", lambda: infer_json("batch_mlp", [
            {"name": "x", "shape": [1, 16], "datatype": "FLOAT", "data": [1.0] * 16}]), 400,
         "invalid datatype 'FLOAT'"),
        ("binary data cut short", lambda: srv.post(
            "/v2/models/batch_mlp/infer", BINARY_HEAD + b"\0" * 10,
            {"Inference-Header-Content-Length": str(len(BINARY_HEAD))}), 400,
         "binary_data_size is 64, but only 10 bytes"),
        ("an unknown output asked for", lambda: srv.post(
            "/v2/models/batch_mlp/infer",
            json.dumps({"inputs": good, "outputs": [{"name": "logits"}]}).encode()), 400,
         "the model has no output `logits`"),
    ]
    for name, send, status, words in cases:
        def one(send=send, status=status, words=words):
            code, body = send()
            assert code == status, (code, body)
            assert words in body["error"], body
            print(f"      {code} {body['error'][:160]}")
            served_alone()
        check(f"bad request: {name} ({status}), the server serves on", one)

    def bad_protobuf():
        import grpc
        with grpc.insecure_channel(f"127.0.0.1:{srv.grpc}") as ch:
            call = ch.unary_unary("/inference.GRPCInferenceService/ModelInfer",
                                  request_serializer=lambda b: b, response_deserializer=lambda b: b)
            try:
                call(b"\x0a\xff\xff\xff\xff\x0f", timeout=10)
            except grpc.RpcError as e:
                assert e.code() in (grpc.StatusCode.INTERNAL, grpc.StatusCode.INVALID_ARGUMENT), e.code()
                print(f"      {e.code()} {e.details()[:160]}")
            else:
                raise AssertionError("a malformed protobuf was accepted")
        equal(cl.infer("grpc", "batch_mlp", {"x": x})["output0"], want, "gRPC after the bad protobuf")
        served_alone()
    check("bad request: malformed protobuf over gRPC, the server serves on", bad_protobuf)

    def metadata():
        import tritonclient.grpc as grpcclient
        import tritonclient.http as httpclient
        m = httpclient.InferenceServerClient(f"127.0.0.1:{srv.http}").get_model_metadata("batch_mlp")
        assert m["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [-1, 16]}], m
        assert m["outputs"] == [{"name": "output0", "datatype": "FP32", "shape": [-1, 8]}], m
        g = grpcclient.InferenceServerClient(f"127.0.0.1:{srv.grpc}")
        gm = g.get_model_metadata("graph_two_outputs")
        assert [o.name for o in gm.outputs] == ["output0", "output1"], gm
        assert g.is_server_live() and g.is_server_ready() and not g.is_model_ready("corrupt")
        status, body = srv.get("/v2")
        meta = json.loads(body)
        assert status == 200 and "binary_tensor_data" in meta["extensions"], meta
    check("metadata over HTTP and gRPC: datatypes by name, -1 for the batch dimension", metadata)


def model_control(srv, cl, direct, rng, repo):
    x = rng.standard_normal((1, 16), dtype=np.float32)
    mlp_out = direct.relax(f"{FIX}/mlp.so", x)[0]

    def index():
        code, body = srv.post("/v2/repository/index", b"")
        assert code == 200, body
        return {m["name"]: m for m in body}

    def unload_load():
        import tritonclient.http as httpclient
        c = httpclient.InferenceServerClient(f"127.0.0.1:{srv.http}")
        c.unload_model("mlp")
        assert not srv.model_ready("mlp")
        assert index()["mlp"]["state"] == "UNAVAILABLE" and index()["mlp"]["reason"] == "unloaded"
        e = cl.error("http", "mlp", {"x": x})
        assert "'mlp' has no available versions" in e, e
        equal(cl.infer("grpc", "batch_mlp", {"x": x})["output0"],
              direct.relax(f"{HERE}/../../triton/tests/models/batch_mlp.so", x)[0], "others serve on")
        c.load_model("mlp")
        assert srv.model_ready("mlp") and index()["mlp"]["state"] == "READY"
        equal(cl.infer("http", "mlp", {"x": x})["output0"], mlp_out, "mlp loaded again")
    check("unload and load without a restart (tritonclient's load_model/unload_model)", unload_load)

    def reload_changed():
        with open(os.path.join(repo, "graph_mlp", "config.pbtxt"), "w") as f:
            f.write('backend: "tvmrt"\ninstance_group [{ kind: KIND_CPU, count: 3 }]\n')
        code, body = srv.post("/v2/repository/models/graph_mlp/load", b"{}")
        assert code == 200, body
        status, c = srv.get("/v2/models/graph_mlp/config")
        assert json.loads(c)["instance_group"][0]["count"] == 3, c
        g = rng.standard_normal((1, 4), dtype=np.float32)
        equal(cl.infer("http", "graph_mlp", {"x": g})["output0"],
              direct.graph(f"{FIX}/graph/mlp.so", x=g)[0], "graph_mlp reloaded")
        # A reload that fails keeps the version served before.
        with open(os.path.join(repo, "graph_mlp", "config.pbtxt"), "w") as f:
            f.write('backend: "tvmrt"\nmax_batch_sise: 4\n')
        code, body = srv.post("/v2/repository/models/graph_mlp/load", b"{}")
        assert code == 400 and "max_batch_sise" in body["error"], body
        print(f"      {body['error'][:200]}")
        assert srv.model_ready("graph_mlp")
        equal(cl.infer("grpc", "graph_mlp", {"x": g})["output0"],
              direct.graph(f"{FIX}/graph/mlp.so", x=g)[0], "graph_mlp after a failed reload")
    check("reload with a changed config.pbtxt; a failed reload keeps the model served", reload_changed)

    def added_later():
        os.makedirs(os.path.join(repo, "late_mlp", "1"))
        shutil.copy(f"{FIX}/mlp.so", os.path.join(repo, "late_mlp", "1", "model.so"))
        assert index()["late_mlp"] == {"name": "late_mlp"}, index()["late_mlp"]
        code, body = srv.post("/v2/repository/models/late_mlp/load", b"")
        assert code == 200, body
        equal(cl.infer("grpc", "late_mlp", {"x": x})["output0"], mlp_out, "a model added later")
        code, body = srv.post("/v2/repository/models/nowhere/load", b"")
        assert code == 400 and "no model `nowhere`" in body["error"], body
    check("a model added to the repository while serving loads (no config.pbtxt)", added_later)

    def config_override():
        import tritonclient.grpc as grpcclient
        import tritonclient.http as httpclient
        from tritonclient.utils import InferenceServerException
        clients = {"http": httpclient.InferenceServerClient(f"127.0.0.1:{srv.http}"),
                   "grpc": grpcclient.InferenceServerClient(f"127.0.0.1:{srv.grpc}")}
        lib = f"{HERE}/../../triton/tests/models/batch_mlp.so"
        x3 = rng.standard_normal((3, 16), dtype=np.float32)

        def config():
            return json.loads(srv.get("/v2/models/batch_mlp/config")[1])
        assert config()["max_batch_size"] == 8
        # Triton's JSON as a client writes it (protobuf's JSON: 64-bit integers as strings).
        two = {"max_batch_size": 2, "dynamic_batching": {"max_queue_delay_microseconds": "100"},
               "instance_group": [{"kind": "KIND_CPU", "count": 2}]}
        for proto, c in clients.items():
            c.load_model("batch_mlp", config=json.dumps(two))
            got = config()
            assert got["max_batch_size"] == 2 and got["instance_group"][0]["count"] == 2, got
            e = cl.error(proto, "batch_mlp", {"x": x3})
            assert "batch-size must be <= 2" in e, e
            equal(cl.infer(proto, "batch_mlp", {"x": x3[:2]})["output0"],
                  direct.relax(lib, x3[:2])[0], f"batch_mlp loaded with a config over {proto}")
        refused = [
            ("a misspelt field", {"config": json.dumps({"max_batch_sise": 4})},
             "unrecognized field name 'max_batch_sise'"),
            # A thread each: a million had ended the process before the bound.
            ("a million instances", {"config": json.dumps(
                {"max_batch_size": 2, "instance_group": [{"count": 1000000}]})},
             "instance_group asks for 1000000 instances or more; a model may have at most 256"),
            ("a model's files", {"config": json.dumps(two), "files": {"file:1/model.so": b"\x7fELF"}},
             "model files in the load request (`file:1/model.so`) are not accepted"),
        ]
        for name, kwargs, words in refused:
            for proto, c in clients.items():
                try:
                    c.load_model("batch_mlp", **kwargs)
                    raise AssertionError(f"{name} over {proto} was loaded")
                except InferenceServerException as e:
                    assert words in e.message(), (name, proto, e.message())
                    assert e.status() in ("400", "StatusCode.INVALID_ARGUMENT"), e.status()
                    print(f"      {name} over {proto}: {e.status()} {e.message()[:150]}")
                assert config()["max_batch_size"] == 2, "a refused load changed the model"
        # A load without a config reads config.pbtxt again.
        clients["http"].load_model("batch_mlp")
        assert config()["max_batch_size"] == 8
        equal(cl.infer("http", "batch_mlp", {"x": x3})["output0"], direct.relax(lib, x3)[0],
              "batch_mlp with its own config again")
    check("a load with a config in place of config.pbtxt (tritonclient's load_model(config=)), "
          "over HTTP and gRPC; a misspelt one, a million instances and a model's files refused",
          config_override)


def single_model(tool, tmp, direct):
    """`tvmrt serve model.so`: one library served alone, named after the file."""
    lib = os.path.join(tmp, "solo_mlp.so")
    shutil.copy(f"{FIX}/mlp.so", lib)
    # Short read and request timeouts, for extensions.timeouts and grpc_call_timeout.
    header_timeout, body_timeout, request_timeout = 2, 3, 2
    srv = OipServer(tool, [lib, "--header-read-timeout", str(header_timeout),
                           "--body-read-timeout", str(body_timeout),
                           "--request-timeout", str(request_timeout)],
                    os.path.join(tmp, "solo.log"), ["solo_mlp"], timeout=60)
    try:
        x = np.random.default_rng(5).standard_normal((1, 16), dtype=np.float32)
        want = direct.relax(f"{FIX}/mlp.so", x)[0]
        cl = tt.Clients(srv)
        for proto in ("http", "grpc"):
            equal(cl.infer(proto, "solo_mlp", {"x": x})["output0"], want, f"solo_mlp over {proto}")
        extensions.timeouts(srv, header_timeout, body_timeout, cl, x, want)
        extensions.grpc_call_timeout(srv, body_timeout + request_timeout, cl, x, want)
        status, body = srv.get("/v2/models/solo_mlp/config")
        assert status == 200 and json.loads(body)["input"][0]["dims"] == [1, 16], body
    finally:
        assert srv.stop() == 0


def traced(tool, tmp, direct):
    """`tvmrt serve model.so --trace-config triton,file=... --log-file ...`: Triton's trace and
    logging extensions (extensions.trace_and_logging)."""
    lib = os.path.join(tmp, "traced_mlp.so")
    shutil.copy(f"{FIX}/mlp.so", lib)
    trace_file, log_file = os.path.join(tmp, "trace.json"), os.path.join(tmp, "traced.log")
    srv = OipServer(tool, [lib, "--trace-config", f"triton,file={trace_file}",
                           "--log-file", log_file],
                    os.path.join(tmp, "traced.out"), ["traced_mlp"], timeout=60)
    try:
        x = np.random.default_rng(6).standard_normal((1, 16), dtype=np.float32)
        want = direct.relax(f"{FIX}/mlp.so", x)[0]
        extensions.trace_and_logging(srv, tt.Clients(srv), x, want, "traced_mlp", trace_file,
                                     log_file)
    finally:
        assert srv.stop() == 0
    with open(log_file) as f:
        log = f.read()
    assert "tvmrt serve: stopped" in log, log[-500:]


def with_language_model(tool, tmp, direct):
    """A repository holding an MLC-LLM model directory beside a tensor model: one process
    serves both, the tensor model over OIP, the language model on OpenAI's routes."""
    repo = os.path.join(tmp, "mixed")
    triton.add_model(repo, "batch_mlp", f"{tt.HERE}/models/batch_mlp.so", tt.BATCH_MLP)
    os.symlink(os.path.join(FIX, "mlc", "model"), os.path.join(repo, "llm"))
    srv = OipServer(tool, ["--model-repository", repo], os.path.join(tmp, "mixed.log"),
                    ["batch_mlp"], timeout=120)
    try:
        x = np.random.default_rng(6).standard_normal((2, 16), dtype=np.float32)
        equal(tt.Clients(srv).infer("grpc", "batch_mlp", {"x": x})["output0"],
              direct.relax(f"{tt.HERE}/models/batch_mlp.so", x)[0], "batch_mlp beside the LLM")
        code, body = srv.post("/v1/completions", json.dumps({"prompt": "hello", "max_tokens": 4}).encode(),
                              {"Content-Type": "application/json"})
        assert code == 200 and body["usage"]["completion_tokens"] == 4, body
        code, body = srv.post("/v2/repository/index", b"")
        assert [m["name"] for m in body] == ["batch_mlp"], body
        status, text = srv.get("/metrics")
        assert 'nv_inference_exec_count{model="batch_mlp",version="1"}' in text, text[:500]
        assert 'tvmrt_requests_total{status="ok"} 1' in text, text
        assert srv.get("/health")[0] == 200
    finally:
        assert srv.stop() == 0


def sigterm_in_flight(srv, cl, direct, pool, pool_out):
    """Eight clients send to batch_mlp (whose batches wait up to 20 ms for more) while the
    server gets SIGTERM: every request is answered correctly or refused (503, or a connection
    the server closed before taking it); some answers come after the signal; exit code 0."""
    import tritonclient.http as httpclient
    results = []
    stop = threading.Event()
    lock = threading.Lock()

    def worker(k):
        c = httpclient.InferenceServerClient(f"127.0.0.1:{srv.http}", network_timeout=30)
        j = 0
        while not stop.is_set() and j < 2000:
            i = (k + j) % len(pool)
            j += 1
            try:
                got = cl.infer("http", "batch_mlp", {"x": pool[i]}, client=c)["output0"]
                outcome = "ok" if np.array_equal(got, pool_out[i]) else "wrong"
            except Exception as e:
                # tritonclient writes a server's answer as `[STATUS] message`; anything else
                # is the connection (refused or closed: the server no longer takes requests).
                text = str(e)
                status = re.match(r"\[(\d{3})\]", text)
                outcome = "closed" if not status else \
                    "refused" if status.group(1) == "503" else "error: " + text
            with lock:
                results.append((time.time(), outcome))
            if outcome in ("refused", "closed"):
                break

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    deadline = time.time() + 30
    while sum(1 for r in results if r[1] == "ok") < 40 and time.time() < deadline:
        time.sleep(0.05)
    signalled = time.time()
    srv.proc.send_signal(signal.SIGTERM)
    code = srv.proc.wait(timeout=30)
    stop.set()
    for t in threads:
        t.join(timeout=60)
    outcomes = [r[1] for r in results]
    after = sum(1 for t, o in results if o == "ok" and t >= signalled)
    print(f"      {outcomes.count('ok')} answered ({after} after SIGTERM), "
          f"{outcomes.count('refused')} refused, {outcomes.count('closed')} closed; exit {code}")
    bad = [o for o in outcomes if o not in ("ok", "refused", "closed")]
    assert not bad, bad[:3]
    assert code == 0, code
    assert after > 0, "no request was in flight at SIGTERM"
    log = srv.log_text_after_stop()
    assert "shutting down" in log and "tvmrt serve: stopped" in log, log[-500:]


def run(args):
    tmp = tempfile.mkdtemp(prefix="tvmrt_oip_")
    repo = os.path.join(tmp, "repo")
    tt.make_repo(repo, tmp)
    tt.fake_cuda(tmp)
    direct = tt.Direct(args.runtime)
    start = time.time()
    srv = OipServer(args.tool, ["--model-repository", repo], os.path.join(tmp, "server.log"),
                    tt.GOOD)
    print(f"tvmrt serve pid {srv.proc.pid} ready in {time.time() - start:.1f} s (log: {srv.log_path})")
    cl = tt.Clients(srv)
    rng = np.random.default_rng(50)
    try:
        tt.tests(srv, cl, direct, rng)
        protocol_errors(srv, cl, direct, rng)
        batch_mlp = f"{tt.HERE}/models/batch_mlp.so"
        extensions.triton_grpc(srv, cl, direct, rng, batch_mlp)
        extensions.compression(srv, cl, direct, rng, batch_mlp, MAX_REQUEST)
        extensions.shared_memory(srv, cl, direct, rng, batch_mlp)
        model_control(srv, cl, direct, rng, repo)
        check("tvmrt serve model.so: one library served alone, named after the file",
              lambda: single_model(args.tool, tmp, direct))
        check("Triton's trace and logging extensions (--trace-config, --log-file)",
              lambda: traced(args.tool, tmp, direct))
        check("an MLC-LLM directory in the repository: OpenAI's routes in the same process",
              lambda: with_language_model(args.tool, tmp, direct))
        pool = [rng.standard_normal((1, 16), dtype=np.float32) for _ in range(16)]
        pool_out = [direct.relax(f"{tt.HERE}/models/batch_mlp.so", x)[0] for x in pool]
        check("SIGTERM with requests in flight: each answered or refused, exit 0",
              lambda: sigterm_in_flight(srv, cl, direct, pool, pool_out))
    finally:
        code = srv.stop()
        log = srv.log_text_after_stop()
        unloaded = log.count("successfully unloaded")
        # mlp and graph_two_outputs unloaded by the tests, then every model ready at shutdown
        # (GOOD and late_mlp).
        want = len(tt.GOOD) + 3
        if code != 0 or unloaded != want:
            tt.FAILED.append(f"clean shutdown (exit {code}, {unloaded} of {want} unloads logged)")
        if tt.FAILED or args.show_log:
            print("---- server log (last 60 lines) ----")
            print("\n".join(log.splitlines()[-60:]))
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True, help="the tvmrt tool")
    ap.add_argument("--runtime", required=True, help="libtvmrt.so, for the direct calls")
    ap.add_argument("--show-log", action="store_true")
    tt.run_and_exit(run, ap.parse_args(), "all tvmrt serve (OIP) tests passed")


if __name__ == "__main__":
    main()
