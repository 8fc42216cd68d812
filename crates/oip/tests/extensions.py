"""What tritonclient asks of `tvmrt serve` beyond the Triton backend's shared tests (called
by test_oip.py on its server): Triton's gRPC extensions (model configuration and statistics
equal to the HTTP answers, the repository index, load and unload, streaming, and UNAVAILABLE for
CUDA shared memory, trace and log settings), compressed bodies both ways on HTTP and gRPC with a
decompression bomb refused, and the HTTP header and body read timeouts against a raw socket."""
import gzip
import json
import queue
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
        status, body = srv.get("/v2/models/batch_mlp/stats")
        http = json_format.ParseDict(json.loads(body), service_pb2.ModelStatisticsResponse())
        got = g.get_inference_statistics("batch_mlp")
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
        for name, call in [("CUDA shared memory", g.get_cuda_shared_memory_status),
                           ("trace", g.get_trace_settings), ("log settings", g.get_log_settings)]:
            try:
                call()
                raise AssertionError(f"{name} answered")
            except InferenceServerException as e:
                assert e.status() == str(grpc.StatusCode.UNAVAILABLE), e.status()
                assert name in e.message() and "not supported" in e.message(), e
                print(f"      {e.status()} {e.message()}")
        equal(cl.infer("grpc", "batch_mlp", {"x": x})["output0"], want, "after the refusals")
    check("gRPC CUDA shared memory, trace and log settings: UNAVAILABLE naming the feature",
          unsupported)


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

    def request(proto, in_offset=0, in_region="in"):
        mod = mods[proto]
        i = mod.InferInput("x", [2, 16], "FP32")
        i.set_shared_memory(in_region, sizes["in"], offset=in_offset)
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
    for c in clients.values():
        c.unregister_system_shared_memory()
        c.close()
    for h in handles.values():
        shm.destroy_shared_memory_region(h)
