"""What tritonclient asks of `tvmrt serve` beyond the Triton backend's shared tests (called
by test_oip.py on its server): Triton's gRPC extensions (model configuration and statistics
equal to the HTTP answers, the repository index, load and unload, streaming, and UNAVAILABLE for
CUDA shared memory), trace and log settings over both protocols (traces read by Triton's own
trace_summary.py), compressed bodies both ways on HTTP and gRPC with a
decompression bomb refused, and the HTTP header and body read timeouts against a raw socket."""
import gzip
import json
import os
import queue
import re
import socket
import time
import zlib

import numpy as np

from test_triton import check, equal

def grpc_client(srv):
    import tritonclient.grpc as grpcclient
    return grpcclient.InferenceServerClient(f"127.0.0.1:{srv.grpc}")


def triton_grpc(srv, cl, direct, rng, batch_mlp):
    import tritonclient.grpc as grpcclient
    from google.protobuf import json_format
    from tritonclient.grpc import model_config_pb2, service_pb2
    from tritonclient.utils import InferenceServerException
    x = rng.standard_normal((1, 16), dtype=np.float32)
    want = direct.relax(batch_mlp, x)[0]

    def config():
        g = grpc_client(srv)
        for model in ("batch_mlp", "graph_two_outputs", "add_kernel"):
            got = g.get_model_config(model).config
            status, body = srv.get(f"/v2/models/{model}/config")
            assert status == 200, body
            http = json_format.ParseDict(json.loads(body), model_config_pb2.ModelConfig(),
                                         ignore_unknown_fields=True)
            assert got == http, f"{model}:\n{got}\n!=\n{http}"
        c = g.get_model_config("batch_mlp", as_json=True)["config"]
        assert c["max_batch_size"] == 8 and c["instance_group"][0]["count"] == 2, c
        assert c["input"][0]["data_type"] == "TYPE_FP32" and c["input"][0]["dims"] == ["16"], c
        print(f"      batch_mlp: {json.dumps(c)[:200]}")
    check("gRPC get_model_config: the ModelConfig /config answers, field for field", config)

    def statistics():
        g = grpc_client(srv)
        cl.infer("grpc", "batch_mlp", {"x": x})
        # A request's statistics are recorded just after its answer is sent (as Triton's
        # backends report them): read both until they agree, the last request's included.
        for _ in range(20):
            status, body = srv.get("/v2/models/batch_mlp/stats")
            http = json_format.ParseDict(json.loads(body), service_pb2.ModelStatisticsResponse())
            got = g.get_inference_statistics("batch_mlp")
            if got == http:
                break
            time.sleep(0.05)
        assert got == http, f"{got}\n!=\n{http}"
        s = got.model_stats[0]
        assert s.name == "batch_mlp" and s.inference_count > 0 and s.batch_stats, s
        assert s.inference_stats.success.count > 0, s
        every = g.get_inference_statistics()
        assert {m.name for m in every.model_stats} >= {"batch_mlp", "mlp"}, every
        print(f"      batch_mlp: {s.inference_count} inferences in {s.execution_count} executions, "
              f"batch sizes {sorted(b.batch_size for b in s.batch_stats)}")
    check("gRPC get_inference_statistics: the statistics /stats answers", statistics)

    def repository():
        g = grpc_client(srv)
        index = {m.name: m for m in g.get_model_repository_index().models}
        assert index["batch_mlp"].state == "READY" and index["batch_mlp"].version == "1", index
        assert index["corrupt"].state == "UNAVAILABLE" and index["corrupt"].reason, index["corrupt"]
        g.unload_model("graph_two_outputs")
        assert not g.is_model_ready("graph_two_outputs")
        err = cl.error("grpc", "graph_two_outputs", {"x": np.zeros((1, 4), np.float32)})
        assert "has no available versions" in err, err
        index = {m.name: m for m in g.get_model_repository_index().models}
        assert index["graph_two_outputs"].state == "UNAVAILABLE", index["graph_two_outputs"]
        g.load_model("graph_two_outputs")
        assert g.is_model_ready("graph_two_outputs")
        try:
            g.load_model("nowhere")
            raise AssertionError("loading a model the repository lacks succeeded")
        except InferenceServerException as e:
            assert "no model `nowhere`" in e.message(), e
        meta = g.get_server_metadata()
        assert meta.name == "tvmrt" and "model_configuration" in meta.extensions, meta
        assert [i.name for i in g.get_model_metadata("batch_mlp").inputs] == ["x"]
    check("gRPC repository index, load_model/unload_model, server metadata", repository)

    def streaming():
        g = grpc_client(srv)
        answers = queue.Queue()
        g.start_stream(callback=lambda result, error: answers.put((result, error)))
        xs = [rng.standard_normal((1, 16), dtype=np.float32) for _ in range(4)]
        for k, xk in enumerate(xs):
            i = grpcclient.InferInput("x", [1, 16], "FP32")
            i.set_data_from_numpy(xk)
            g.async_stream_infer("batch_mlp" if k != 2 else "no_such_model", [i], request_id=str(k))
        got = [answers.get(timeout=30) for _ in xs]
        g.stop_stream()
        for k, (result, error) in enumerate(got):
            if k == 2:
                assert result is None and "unknown model" in str(error), error
            else:
                assert error is None, error
                equal(result.as_numpy("output0"), direct.relax(batch_mlp, xs[k])[0], f"stream {k}")
    check("gRPC streaming inference: answers in order, an error alone", streaming)

    def unsupported():
        import grpc
        g = grpc_client(srv)
        for name, call in [("CUDA shared memory", g.get_cuda_shared_memory_status)]:
            try:
                call()
                raise AssertionError(f"{name} answered")
            except InferenceServerException as e:
                assert e.status() == str(grpc.StatusCode.UNAVAILABLE), e.status()
                assert name in e.message() and "not supported" in e.message(), e
                print(f"      {e.status()} {e.message()}")
        equal(cl.infer("grpc", "batch_mlp", {"x": x})["output0"], want, "after the refusals")
    check("gRPC CUDA shared memory: UNAVAILABLE naming the feature", unsupported)


def compression(srv, cl, direct, rng, batch_mlp, max_request):
    import tritonclient.grpc as grpcclient
    import tritonclient.http as httpclient
    x = rng.standard_normal((3, 16), dtype=np.float32)
    want = direct.relax(batch_mlp, x)[0]

    def http_both_ways():
        c = httpclient.InferenceServerClient(f"127.0.0.1:{srv.http}")
        for binary in (True, False):
            for req in (None, "gzip", "deflate"):
                for resp in (None, "gzip", "deflate"):
                    i = httpclient.InferInput("x", [3, 16], "FP32")
                    i.set_data_from_numpy(x, binary_data=binary)
                    out = httpclient.InferRequestedOutput("output0", binary_data=binary)
                    r = c.infer("batch_mlp", [i], outputs=[out], request_compression_algorithm=req,
                                response_compression_algorithm=resp)
                    equal(r.as_numpy("output0"), want, f"binary={binary} request {req} response {resp}")
        # The response is compressed only when asked (seen on the wire).
        body = json.dumps({"inputs": [{"name": "x", "shape": [3, 16], "datatype": "FP32",
                                       "data": x.flatten().tolist()}]}).encode()
        for accept, coding, unpack in [("gzip", "gzip", gzip.decompress),
                                       ("deflate", "deflate", zlib.decompress),
                                       ("br", None, lambda b: b)]:
            status, headers, raw = raw_post(srv, "/v2/models/batch_mlp/infer", gzip.compress(body),
                                            {"Content-Encoding": "gzip", "Accept-Encoding": accept})
            assert status == 200 and headers.get("content-encoding") == coding, (status, headers)
            got = np.array(json.loads(unpack(raw))["outputs"][0]["data"], np.float32)
            equal(got.reshape(want.shape), want, f"Accept-Encoding {accept}")
    check("HTTP Content-Encoding gzip/deflate both ways (tritonclient's compression algorithms)",
          http_both_ways)

    def bad_bodies():
        bomb = gzip.compress(b" " * (max_request * 16))
        cases = [("a gzip bomb (16x the limit)", bomb, "gzip", 413, "decompresses to more than"),
                 ("a malformed deflate body", b"not zlib", "deflate", 400, "malformed"),
                 ("an unknown coding", b"{}", "br", 415, "Content-Encoding br is not supported")]
        for name, body, coding, code, words in cases:
            status, _, raw = raw_post(srv, "/v2/models/batch_mlp/infer", body,
                                      {"Content-Encoding": coding})
            error = json.loads(raw)["error"]
            assert status == code and words in error, (name, status, error)
            print(f"      {name} ({len(body)} bytes): {status} {error}")
        equal(cl.infer("http", "batch_mlp", {"x": x})["output0"], want, "after the bad bodies")
    check("compressed bodies that inflate past the limit or are malformed: refused alone",
          bad_bodies)

    def grpc_gzip():
        g = grpc_client(srv)
        i = grpcclient.InferInput("x", [3, 16], "FP32")
        i.set_data_from_numpy(x)
        for algorithm in ("gzip", "deflate"):
            r = g.infer("batch_mlp", [i], compression_algorithm=algorithm)
            equal(r.as_numpy("output0"), want, f"gRPC {algorithm}")
        # A message that inflates past the limit is refused before it is held.
        import grpc
        from tritonclient.grpc import service_pb2
        bomb = service_pb2.ModelInferRequest(model_name="batch_mlp")
        bomb.inputs.add(name="x", datatype="FP32", shape=[max_request, 4])
        bomb.raw_input_contents.append(bytes(max_request * 16))
        with grpc.insecure_channel(f"127.0.0.1:{srv.grpc}") as ch:
            call = ch.unary_unary("/inference.GRPCInferenceService/ModelInfer",
                                  request_serializer=lambda m: m.SerializeToString(),
                                  response_deserializer=lambda b: b)
            try:
                call(bomb, timeout=30, compression=grpc.Compression.Gzip)
                raise AssertionError("a gzip bomb was taken")
            except grpc.RpcError as e:
                assert e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, (e.code(), e.details())
                print(f"      a gRPC gzip bomb: {e.code()} {e.details()}")
        equal(g.infer("batch_mlp", [i]).as_numpy("output0"), want, "gRPC after the bomb")
    check("gRPC compression (tritonclient's compression_algorithm gzip and deflate); a bomb refused",
          grpc_gzip)


def raw_post(srv, path, body, headers):
    """(status, lower-cased headers, raw body) of POST path, nothing decoded."""
    import http.client
    c = http.client.HTTPConnection("127.0.0.1", srv.http, timeout=30)
    try:
        c.request("POST", path, body=body, headers=headers)
        r = c.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        c.close()


def timeouts(srv, header_timeout, body_timeout, cl, x, want):
    """Against a server started with --header-read-timeout and --body-read-timeout: a client
    that sends half a header, or a header and half its body, is cut after the timeout (closed;
    408 for the body) while another client is served meanwhile."""

    def half(data, limit):
        s = socket.create_connection(("127.0.0.1", srv.http), timeout=limit + 10)
        start = time.time()
        s.sendall(data)
        return s, start

    def read_all(s):
        got = b""
        try:
            while chunk := s.recv(4096):
                got += chunk
        except ConnectionResetError:
            pass
        return got

    def header():
        s, start = half(b"POST /v2/models/solo_mlp/infer HTTP/1.1\r\nHost: x\r\nContent-Le", header_timeout)
        equal(cl.infer("http", "solo_mlp", {"x": x})["output0"], want, "while a header hangs")
        got = read_all(s)
        took = time.time() - start
        s.close()
        print(f"      half a header: closed after {took:.1f} s ({got[:40]!r})")
        assert header_timeout - 0.5 <= took <= header_timeout + 5, took
    check(f"HTTP: half a header is cut after --header-read-timeout ({header_timeout} s)", header)

    def body():
        head = (b"POST /v2/models/solo_mlp/infer HTTP/1.1\r\nHost: x\r\n"
                b"Content-Length: 1000\r\n\r\n{\"inputs\": [")
        s, start = half(head, body_timeout)
        equal(cl.infer("grpc", "solo_mlp", {"x": x})["output0"], want, "while a body hangs")
        got = read_all(s)
        took = time.time() - start
        s.close()
        first = got.split(b"\r\n")[0]
        print(f"      half a body: {first!r} after {took:.1f} s")
        assert got.startswith(b"HTTP/1.1 408"), got[:200]
        assert b"--body-read-timeout" in got, got
        assert body_timeout - 0.5 <= took <= body_timeout + 5, took
        equal(cl.infer("http", "solo_mlp", {"x": x})["output0"], want, "after the timeouts")
    check(f"HTTP: half a body is cut after --body-read-timeout ({body_timeout} s) with 408", body)


def grpc_call_timeout(srv, limit, cl, x, want):
    """Against a server whose --body-read-timeout and --request-timeout add up to `limit` s: a
    gRPC call whose message stops halfway (sent with h2, a raw HTTP/2 client) ends after `limit`
    with CANCELLED, tonic's call timeout, while another client is served meanwhile."""
    import urllib.parse

    import h2.config
    import h2.connection
    import h2.events

    def half_a_call():
        s = socket.create_connection(("127.0.0.1", srv.grpc), timeout=limit + 10)
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        conn.initiate_connection()
        conn.send_headers(1, [
            (":method", "POST"), (":scheme", "http"), (":authority", f"127.0.0.1:{srv.grpc}"),
            (":path", "/inference.GRPCInferenceService/ModelInfer"),
            ("content-type", "application/grpc"), ("te", "trailers")])
        # A message announced as 1000 bytes long, of which 10 come: model_name, cut short.
        conn.send_data(1, b"\x00" + (1000).to_bytes(4, "big") + b"\x0a\x08solo_m")
        start = time.time()
        s.sendall(conn.data_to_send())
        equal(cl.infer("grpc", "solo_mlp", {"x": x})["output0"], want, "while a gRPC call hangs")
        headers, ended = {}, None
        while ended is None:
            data = s.recv(65536)
            if not data:
                break
            for ev in conn.receive_data(data):
                if isinstance(ev, (h2.events.ResponseReceived, h2.events.TrailersReceived)):
                    headers.update((k.decode(), v.decode()) for k, v in ev.headers)
                # The answer ends the stream (then the server resets the request's side).
                if isinstance(ev, (h2.events.StreamEnded, h2.events.StreamReset)) and \
                        ev.stream_id == 1 and ended is None:
                    ended = type(ev).__name__
            s.sendall(conn.data_to_send())
        took = time.time() - start
        s.close()
        message = urllib.parse.unquote(headers.get("grpc-message", ""))
        print(f"      half a gRPC message: {ended}, grpc-status {headers.get('grpc-status')} "
              f"({message!r}) after {took:.1f} s")
        assert ended == "StreamEnded", (ended, headers)
        assert headers.get("grpc-status") == "1" and "Timeout expired" in message, headers
        assert limit - 0.5 <= took <= limit + 5, took
        equal(cl.infer("grpc", "solo_mlp", {"x": x})["output0"], want, "after the gRPC timeout")
    check(f"gRPC: a call whose message stops halfway ends after {limit} s with CANCELLED",
          half_a_call)


def shared_memory(srv, cl, direct, rng, batch_mlp):
    """Triton's system shared memory, over HTTP and gRPC with tritonclient's own regions: an
    input read from one region, an output written into another; offsets and sizes outside a
    region refused with the reason, the server serving on."""
    import os
    import tritonclient.grpc as grpcclient
    import tritonclient.http as httpclient
    import tritonclient.utils.shared_memory as shm
    from tritonclient.utils import InferenceServerException
    x = rng.standard_normal((2, 16), dtype=np.float32)
    want = direct.relax(batch_mlp, x)[0]
    keys = {"in": f"/tvmrt_oip_in_{os.getpid()}", "out": f"/tvmrt_oip_out_{os.getpid()}"}
    sizes = {"in": x.nbytes, "out": want.nbytes}
    handles = {n: shm.create_shared_memory_region(n, keys[n], sizes[n]) for n in keys}
    shm.set_shared_memory_region(handles["in"], [x])
    clients = {"http": httpclient.InferenceServerClient(f"127.0.0.1:{srv.http}"),
               "grpc": grpcclient.InferenceServerClient(f"127.0.0.1:{srv.grpc}")}
    mods = {"http": httpclient, "grpc": grpcclient}

    def request(proto, in_offset=0, in_region="in", in_size=sizes["in"]):
        mod = mods[proto]
        i = mod.InferInput("x", [2, 16], "FP32")
        i.set_shared_memory(in_region, in_size, offset=in_offset)
        o = mod.InferRequestedOutput("output0")
        o.set_shared_memory("out", sizes["out"])
        return clients[proto].infer("batch_mlp", [i], outputs=[o])

    def both():
        for proto, c in clients.items():
            c.unregister_system_shared_memory()
            for n in keys:
                c.register_system_shared_memory(n, keys[n], sizes[n])
            status = c.get_system_shared_memory_status()
            names = sorted(r["name"] for r in status) if proto == "http" else sorted(status.regions)
            assert names == ["in", "out"], status
            shm.set_shared_memory_region(handles["out"], [np.zeros_like(want)])
            r = request(proto)
            out = r.get_output("output0")
            params = out["parameters"] if proto == "http" else out.parameters
            region = params["shared_memory_region"] if proto == "http" else \
                params["shared_memory_region"].string_param
            assert region == "out", out
            equal(shm.get_contents_as_numpy(handles["out"], np.float32, list(want.shape)), want,
                  f"output in shared memory over {proto}")
        clients["grpc"].unregister_system_shared_memory("out")
        assert sorted(r["name"] for r in clients["http"].get_system_shared_memory_status()) == ["in"]
        clients["http"].register_system_shared_memory("out", keys["out"], sizes["out"])
    check("system shared memory over HTTP and gRPC: input from one region, output into another",
          both)

    def refused():
        cases = [
            ("a region past the object's end",
             lambda c: c.register_system_shared_memory("big", keys["in"], sizes["in"] * 2),
             "past the end of"),
            ("an input offset past the region", lambda p: request(p, in_offset=64),
             "offset 64 + byte size 128 is past the end of shared memory region 'in' (128 bytes)"),
            ("a byte size the shape does not need", lambda p: request(p, in_size=64),
             "shared_memory_byte_size is 64, its shape needs 128 (32 elements of 4 bytes)"),
            ("an unregistered region", lambda p: request(p, in_region="nowhere"),
             "no system shared memory region 'nowhere' is registered"),
            ("a key outside /dev/shm",
             lambda c: c.register_system_shared_memory("etc", "/../etc/passwd", 8),
             "is not a shared memory key"),
        ]
        for name, call, words in cases:
            for proto, c in clients.items():
                try:
                    call(c if "region past" in name or "key" in name else proto)
                    raise AssertionError(f"{name} over {proto} succeeded")
                except InferenceServerException as e:
                    assert words in e.message(), (name, proto, e)
                    assert e.status() in ("400", "StatusCode.INVALID_ARGUMENT"), (name, e.status())
                    print(f"      {name} over {proto}: {e.status()} {e.message()[:120]}")
        equal(cl.infer("http", "batch_mlp", {"x": x})["output0"], want, "after the refusals")
        status, body = srv.get("/v2/cudasharedmemory/status")
        assert status == 501 and "CUDA shared memory is not supported" in body, (status, body)
    check("shared memory offsets, sizes and keys outside a region: 400/INVALID_ARGUMENT alone",
          refused)

    def cut_short():
        # The client shrinks the object after registering it: a server that mapped it (as
        # Triton does) would take SIGBUS reading past its end; tvmrt's read comes back short.
        path = "/dev/shm" + keys["in"]
        os.truncate(path, 16)
        try:
            for proto in clients:
                try:
                    request(proto)
                    raise AssertionError(f"a cut-short region over {proto} was read")
                except InferenceServerException as e:
                    assert "was cut short after it was registered" in e.message(), (proto, e)
                    assert e.status() in ("400", "StatusCode.INVALID_ARGUMENT"), e.status()
                    print(f"      {proto}: {e.status()} {e.message()[:120]}")
        finally:
            os.truncate(path, sizes["in"])
        shm.set_shared_memory_region(handles["in"], [x])
        for proto in clients:
            request(proto)
            equal(shm.get_contents_as_numpy(handles["out"], np.float32, list(want.shape)), want,
                  f"the region whole again, over {proto}")
    check("a region cut short by its client after registration: 400 naming it, no crash",
          cut_short)
    for c in clients.values():
        c.unregister_system_shared_memory()
        c.close()
    for h in handles.values():
        shm.destroy_shared_memory_region(h)


# Triton's trace summary tool (qa/common/trace_summary.py), vendored unchanged.
TRACE_SUMMARY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                             "conformance", "triton_trace", "trace_summary.py")

# The steps of a request every trace has, in the order they happen.
STEPS = ["REQUEST_START", "QUEUE_START", "COMPUTE_START", "COMPUTE_INPUT_END",
         "COMPUTE_OUTPUT_START", "COMPUTE_END"]


def read_traces(path, want, timeout=10):
    """The entries of trace file `path` once it holds `want` traces (the last holder of a
    trace, the model's instance, may write it just after the client has its answer)."""
    deadline = time.time() + timeout
    while True:
        entries = []
        if os.path.exists(path):
            with open(path) as f:
                entries = json.load(f)
        ids = {e["id"] for e in entries if "model_name" in e}
        if len(ids) >= want or time.time() > deadline:
            assert len(ids) == want, f"{len(ids)} traces in {path}, expected {want}: {entries}"
            return entries


def by_id(entries):
    """{id: {"model": ..., "version": ..., "ns": {name: ns}, "tensors": [...]}}."""
    out = {}
    for e in entries:
        t = out.setdefault(e["id"], {"ns": {}, "tensors": []})
        if "model_name" in e:
            t["model"], t["version"] = e["model_name"], e["model_version"]
        for ts in e.get("timestamps", []):
            t["ns"][ts["name"]] = ts["ns"]
        if "activity" in e:
            t["tensors"].append(e)
    return out


def trace_and_logging(srv, cl, x, want, model, trace_file, log_file):
    """Triton's trace and logging extensions on a server started with `--trace-config
    triton,file=TRACE_FILE` and `--log-file LOG_FILE`, through tritonclient's own calls."""
    import subprocess
    import sys

    import grpc
    import tritonclient.http as httpclient
    from tritonclient.utils import InferenceServerException
    h = httpclient.InferenceServerClient(f"127.0.0.1:{srv.http}")
    g = grpc_client(srv)

    def refused(call, words, code=None):
        try:
            call()
        except InferenceServerException as e:
            assert words in e.message(), e
            if code:
                assert e.status() == code, e.status()
            print(f"      refused: {e.message()}")
            return
        raise AssertionError(f"accepted; expected a refusal with {words!r}")

    def sampled_requests():
        got = h.get_trace_settings()
        assert got == {"trace_level": ["OFF"], "trace_rate": "1000", "trace_count": "-1",
                       "log_frequency": "0", "trace_file": trace_file, "trace_mode": "triton"}, got
        got = h.update_trace_settings(settings={"trace_level": ["TIMESTAMPS"], "trace_rate": "2",
                                                "trace_count": "6"})
        assert got["trace_level"] == ["TIMESTAMPS"] and got["trace_count"] == "6", got
        # Every 2nd request is traced until 6 are (3 over HTTP, 3 over gRPC), then no more.
        for k in range(16):
            equal(cl.infer("http" if k < 6 else "grpc", model, {"x": x})["output0"], want,
                  f"request {k}")
        assert h.get_trace_settings()["trace_count"] == "0"
        traces = by_id(read_traces(trace_file, 6))
        http_ids = [i for i, t in traces.items() if "HTTP_RECV_START" in t["ns"]]
        assert len(http_ids) == 3, traces
        for i, t in traces.items():
            assert t["model"] == model and t["version"] == 1, t
            front = ["HTTP_RECV_START", "HTTP_RECV_END"] if i in http_ids else \
                ["GRPC_WAITREAD_START", "GRPC_WAITREAD_END"]
            send = ["HTTP_SEND_START", "HTTP_SEND_END"] if i in http_ids else \
                ["GRPC_SEND_START", "GRPC_SEND_END"]
            order = front + STEPS[:-1] + ["INFER_RESPONSE_COMPLETE"] + send
            ns = [t["ns"][name] for name in order]
            assert ns == sorted(ns), f"{i}: out of order: {sorted(t['ns'].items(), key=lambda kv: kv[1])}"
            assert t["ns"]["COMPUTE_START"] <= t["ns"]["COMPUTE_END"] <= t["ns"]["REQUEST_END"], t
        summary = subprocess.run([sys.executable, TRACE_SUMMARY, trace_file], capture_output=True,
                                 text=True, timeout=60)
        assert summary.returncode == 0, summary.stderr
        out = summary.stdout
        assert out.count(f"Summary for {model} (1): trace count = 3") == 2, out
        for line in ("HTTP infer request (avg)", "GRPC infer request (avg)", "Queue (avg)",
                     "Compute (avg)", "Infer (avg)"):
            assert line in out, out
        print("      " + "\n      ".join(out.splitlines()[1:8]))
    check("trace: every 2nd request traced until the count is spent; Triton's trace_summary.py "
          "reads the file", sampled_requests)

    def model_tensors():
        # The model's own settings: TENSORS, the rest from the global ones (a fresh count).
        got = g.update_trace_settings(model_name=model, settings={"trace_level": ["TENSORS"]},
                                      as_json=True)["settings"]
        assert got["trace_level"]["value"] == ["TENSORS"], got
        assert got["trace_rate"]["value"] == ["2"] and got["trace_count"]["value"] == ["6"], got
        for k in range(2):
            equal(cl.infer("grpc", model, {"x": x})["output0"], want, f"request {k}")
        traces = by_id(read_traces(trace_file, 7))
        tensors = max(traces.items())[1]["tensors"]
        acts = {e["activity"]: e["tensor"] for e in tensors}
        inp, out = acts["TENSOR_QUEUE_INPUT"], acts["TENSOR_BACKEND_OUTPUT"]
        assert inp["name"] == "x" and inp["dtype"] == "FP32" and inp["shape"] == "1,16", inp
        equal(np.array([float(v) for v in inp["data"].split(",")], np.float32).reshape(1, 16), x,
              "the traced input")
        equal(np.array([float(v) for v in out["data"].split(",")], np.float32).reshape(want.shape),
              want, "the traced output")
        # A model's settings taken back: the global ones again.
        got = h.update_trace_settings(model_name=model, settings={})
        assert got["trace_level"] == ["TIMESTAMPS"] and got["trace_count"] == "0", got
    check("trace: a model's own settings over gRPC, its tensors traced, then taken back",
          model_tensors)

    def indexed_files():
        h.update_trace_settings(settings={"trace_rate": "1", "trace_count": "-1",
                                          "log_frequency": "2"})
        for k in range(5):
            equal(cl.infer("http", model, {"x": x})["output0"], want, f"request {k}")
        for n in range(2):
            assert len(by_id(read_traces(f"{trace_file}.{n}", 2))) == 2
        assert not os.path.exists(f"{trace_file}.2")
        # Turned off: the trace waiting for a third file is written then.
        h.update_trace_settings(settings={"trace_level": ["OFF"], "log_frequency": "0"})
        assert len(by_id(read_traces(f"{trace_file}.2", 1))) == 1
        equal(cl.infer("http", model, {"x": x})["output0"], want, "untraced")
        assert len(by_id(read_traces(trace_file, 7))) == 7
    check("trace: log_frequency 2 writes FILE.0, FILE.1, ...; the rest when turned off",
          indexed_files)

    def bad_trace_settings():
        invalid = str(grpc.StatusCode.INVALID_ARGUMENT)
        refused(lambda: h.update_trace_settings(settings={"trace_file": "/tmp/elsewhere.json"}),
                "--trace-config")
        refused(lambda: h.update_trace_settings(settings={"trace_level": ["TIMESTAMPS"],
                                                          "trace_rate": "0"}), "non-zero")
        refused(lambda: h.update_trace_settings(settings={"trace_level": ["LOUD"]}), "'LOUD'")
        refused(lambda: g.update_trace_settings(settings={"trace_count": "-5"}), "-1 or more",
                invalid)
        refused(lambda: g.update_trace_settings(settings={"trace_speed": "1"}), "'trace_speed'",
                invalid)
        refused(lambda: h.get_trace_settings(model_name="nowhere"), "nowhere")
        status, body = srv.post("/v2/trace/setting", b"{not json")
        assert status == 400 and "malformed" in body["error"], body
        assert h.get_trace_settings()["trace_level"] == ["OFF"]
        equal(cl.infer("grpc", model, {"x": x})["output0"], want, "after the refusals")
    check("trace: bad settings refused (400 / INVALID_ARGUMENT), nothing changed", bad_trace_settings)

    def log_lines(pattern):
        with open(log_file) as f:
            return [l for l in f.read().splitlines() if re.search(pattern, l)]

    def logging_settings():
        got = h.get_log_settings()
        assert got == {"log_file": log_file, "log_info": True, "log_warning": True,
                       "log_error": True, "log_verbose_level": 0, "log_format": "default"}, got
        # The model's load was logged at info level, in Triton's default format.
        loaded = log_lines(r"^I\d{4} \d\d:\d\d:\d\d\.\d{6} \d+ repository\.rs:\d+\] "
                           f"successfully loaded '{model}' version 1$")
        assert len(loaded) == 1, open(log_file).read()
        request = f"infer request for '{model}' version 1"
        assert not log_lines(request)
        got = h.update_log_settings({"log_verbose_level": 1})
        assert got["log_verbose_level"] == 1, got
        cl.infer("http", model, {"x": x})
        lines = log_lines(request)
        assert len(lines) == 1 and lines[0].startswith("I"), lines
        got = g.update_log_settings({"log_format": "ISO8601"}, as_json=True)["settings"]
        assert got["log_format"]["string_param"] == "ISO8601", got
        assert got["log_verbose_level"]["uint32_param"] == 1, got
        cl.infer("grpc", model, {"x": x})
        lines = log_lines(request)
        assert len(lines) == 2, lines
        assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ I \d+ http\.rs:\d+\] ", lines[1]), lines
        # Info off: a reload is not logged; back on, it is.
        h.update_log_settings({"log_verbose_level": 0, "log_info": False})
        h.load_model(model)
        assert len(log_lines(f"successfully loaded '{model}'")) == 1
        g.update_log_settings({"log_info": True, "log_format": "default"})
        h.load_model(model)
        assert len(log_lines(f"successfully loaded '{model}'")) == 2
        cl.infer("http", model, {"x": x})
        assert len(log_lines(request)) == 2
        print(f"      {lines[1]}")
    check("logging: Triton's log settings over HTTP and gRPC change what the log file gets",
          logging_settings)

    def bad_log_settings():
        before = h.get_log_settings()
        refused(lambda: h.update_log_settings({"log_file": "/tmp/elsewhere.log"}), "--log-file")
        refused(lambda: h.update_log_settings({"log_info": "yes"}), "boolean")
        refused(lambda: g.update_log_settings({"log_format": "xml"}), "\"xml\"",
                str(grpc.StatusCode.INVALID_ARGUMENT))
        refused(lambda: h.update_log_settings({"log_level": 3}), "'log_level'")
        assert h.get_log_settings() == before
        equal(cl.infer("http", model, {"x": x})["output0"], want, "after the refusals")
    check("logging: bad settings refused, nothing changed", bad_log_settings)
