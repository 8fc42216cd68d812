"""KServe's own Python SDK (kserve 0.21, .ci/requirements/kserve.txt) against `tvmrt serve`.

KServe's v2 REST client (JSON tensors, and binary tensors through Triton's extension) and its
gRPC client (`inference.GRPCInferenceService`) call a repository of two models: batch_mlp,
whose outputs must equal those TVM 0.27 recorded, and one without a config.pbtxt, whose
configuration the server completes. The server runs on 127.0.0.1 on free ports and is stopped
by its process id.

    python tests/kserve/test_kserve_client.py TVMRT_BINARY
"""

import asyncio
import json
import logging
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import numpy as np
from kserve import InferenceGRPCClient, InferenceRESTClient, InferInput, InferRequest, RESTConfig

ROOT = pathlib.Path(__file__).resolve().parents[2]
MODELS = ROOT / "crates/triton/tests/models"
FIXTURES = ROOT / "tests/fixtures"
BATCH_MLP = """
max_batch_size: 8
input [{ name: "x", data_type: TYPE_FP32, dims: [16] }]
dynamic_batching { max_queue_delay_microseconds: 2000 }
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_repo(root):
    mlp = root / "batch_mlp"
    (mlp / "1").mkdir(parents=True)
    shutil.copy(MODELS / "batch_mlp.so", mlp / "1" / "model.so")
    (mlp / "config.pbtxt").write_text(BATCH_MLP)
    bare = root / "graph_mlp" / "1"
    bare.mkdir(parents=True)
    shutil.copy(FIXTURES / "graph" / "mlp.so", bare / "model.so")


class Server:
    def __init__(self, tvmrt, repo, log):
        self.http, self.grpc = free_port(), free_port()
        self.proc = subprocess.Popen(
            [tvmrt, "serve", "--model-repository", str(repo), "--host", "127.0.0.1",
             "--port", str(self.http), "--grpc-port", str(self.grpc)],
            stdout=log, stderr=subprocess.STDOUT)
        self.base = f"http://127.0.0.1:{self.http}"
        deadline = time.time() + 60
        while time.time() < deadline:
            assert self.proc.poll() is None, "tvmrt serve exited"
            try:
                with urllib.request.urlopen(self.base + "/v2/health/ready", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.2)
        raise TimeoutError("tvmrt serve not ready in 60 s")

    def stop(self):
        os.kill(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.kill(self.proc.pid, signal.SIGKILL)
            raise


def request(model, x, binary):
    inp = InferInput("x", list(x.shape), "FP32")
    inp.set_data_from_numpy(x, binary_data=binary)
    return InferRequest(model_name=model, infer_inputs=[inp], request_id="r1")


async def checks(srv):
    recorded = json.loads((MODELS / "batch_mlp.expected.json").read_text())
    rest = InferenceRESTClient(RESTConfig(protocol="v2", retries=1, timeout=30))
    grpc = InferenceGRPCClient(f"127.0.0.1:{srv.grpc}", timeout=30, retries=2)
    passed = 0
    try:
        assert await rest.is_server_live(srv.base)
        assert await rest.is_server_ready(srv.base)
        assert await rest.is_model_ready(srv.base, "batch_mlp")
        assert await grpc.is_server_ready() and await grpc.is_model_ready("batch_mlp")
        passed += 1
        for case in recorded["cases"]:
            x = np.array(case["x"], dtype=np.float32)
            want = np.array(case["y"], dtype=np.float32)
            for binary in (False, True):
                res = await rest.infer(srv.base, request("batch_mlp", x, binary), "batch_mlp")
                got = res.outputs[0].as_numpy()
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
                assert res.id == "r1", res.id
                passed += 1
            res = await grpc.infer(request("batch_mlp", x, True))
            np.testing.assert_allclose(res.outputs[0].as_numpy(), want, rtol=1e-5, atol=1e-6)
            passed += 1
        # A model served with the configuration the server completed: same answer on both.
        x = np.random.default_rng(3).standard_normal((1, 4), dtype=np.float32)
        a = (await rest.infer(srv.base, request("graph_mlp", x, True), "graph_mlp")).outputs[0]
        b = (await grpc.infer(request("graph_mlp", x, True))).outputs[0]
        np.testing.assert_array_equal(a.as_numpy(), b.as_numpy())
        assert a.as_numpy().shape[0] == 1
        passed += 1
        # Errors reach KServe's clients as errors: an unknown model, a wrong dtype (the
        # clients' own error logs of them are silenced).
        logging.getLogger("kserve").disabled = True
        logging.getLogger("kserve.trace").disabled = True
        try:
            await rest.infer(srv.base, request("nope", x, False), "nope")
            raise AssertionError("an unknown model was answered")
        except Exception as e:  # httpx.HTTPStatusError
            assert "404" in str(e) or "nope" in str(e), e
        bad = InferInput("x", [1, 16], "INT32")
        bad.set_data_from_numpy(np.zeros((1, 16), dtype=np.int32), binary_data=False)
        try:
            await grpc.infer(InferRequest(model_name="batch_mlp", infer_inputs=[bad]))
            raise AssertionError("a wrong dtype was answered")
        except Exception as e:  # grpc.RpcError
            assert "INVALID_ARGUMENT" in str(e) or "dtype" in str(e).lower() or "FP32" in str(e), e
        assert await rest.is_model_ready(srv.base, "batch_mlp")
        passed += 1
        # KServe's own repository messages (the model's name in field 1, where Triton's
        # superset has repository_name) unload and load a model.
        import grpc as grpc_mod
        from kserve.protocol.grpc import grpc_predict_v2_pb2 as pb
        from kserve.protocol.grpc import grpc_predict_v2_pb2_grpc as pb_grpc
        with grpc_mod.insecure_channel(f"127.0.0.1:{srv.grpc}") as channel:
            stub = pb_grpc.GRPCInferenceServiceStub(channel)
            stub.RepositoryModelUnload(pb.RepositoryModelUnloadRequest(model_name="graph_mlp"), timeout=30)
            assert not await grpc.is_model_ready("graph_mlp")
            stub.RepositoryModelLoad(pb.RepositoryModelLoadRequest(model_name="graph_mlp"), timeout=30)
            assert await grpc.is_model_ready("graph_mlp")
        passed += 1
    finally:
        await rest.close()
        await grpc.close()
    return passed


def main():
    tvmrt = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        repo = pathlib.Path(tmp) / "repo"
        make_repo(repo)
        log_path = pathlib.Path(tmp) / "server.log"
        with open(log_path, "w") as log:
            srv = Server(tvmrt, repo, log)
            try:
                passed = asyncio.run(checks(srv))
            except BaseException:
                srv.stop()
                print(log_path.read_text()[-4000:])
                raise
            srv.stop()
    print(f"kserve clients: {passed} passed, 0 failed")


if __name__ == "__main__":
    main()
