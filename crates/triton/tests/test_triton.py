#!/usr/bin/env python3
"""The tvmrt backend in the real Triton server (nvidia-pytriton's tritonserver 2.51), through
tritonclient over HTTP and gRPC: outputs equal to a direct tvmrt call (weights from a tensor
cache included: by name, packed, and MLC-LLM's `embed`), auto-completed configurations,
dynamic batching, OpenCL and Vulkan models on the CPU's drivers, several instances, 16
concurrent clients x 200 requests, and every bad input of issue 30 answered with an error
while the server keeps serving.

Run through crates/triton/tests/run.sh, which builds the backend and libtvmrt.so.
"""
import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import threading
import time
import traceback

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
FIX = os.path.join(ROOT, "tests", "fixtures")
sys.path.insert(0, HERE)
import server as triton  # noqa: E402

BACKEND = 'backend: "tvmrt"\n'

BATCH_MLP = BACKEND + """
instance_group [{ kind: KIND_CPU, count: 2 }]
dynamic_batching { max_queue_delay_microseconds: 20000 }
parameters { key: "threads" value { string_value: "1" } }
model_warmup [{
  name: "zeros"
  batch_size: 2
  inputs { key: "x" value { data_type: TYPE_FP32 dims: [16] zero_data: true } }
}]
"""

ADD_KERNEL = BACKEND + """
max_batch_size: 0
input [{ name: "A" data_type: TYPE_FP32 dims: [-1] }, { name: "B" data_type: TYPE_FP32 dims: [-1] }]
output [{ name: "output0" data_type: TYPE_FP32 dims: [-1] }]
parameters { key: "function" value { string_value: "add" } }
"""

# A Relax model TVM 0.27 built for OpenCL, on POCL (the CPU) through the `device` parameter.
OPENCL = BACKEND + """
parameters { key: "device" value { string_value: "opencl:0" } }
"""

# The same model TVM 0.27 built for Vulkan (its own SPIR-V), on Mesa's lavapipe (the CPU).
VULKAN = BACKEND + """
parameters { key: "device" value { string_value: "vulkan:0" } }
"""

WRONG_DTYPE = BACKEND + """
input [{ name: "x" data_type: TYPE_FP64 dims: [1, 16] }]
output [{ name: "output0" data_type: TYPE_FP32 dims: [1, 8] }]
"""

WRONG_SHAPE = BACKEND + """
input [{ name: "x" data_type: TYPE_FP32 dims: [-1, -1] }]
output [{ name: "output0" data_type: TYPE_FP32 dims: [-1, -1] }]
"""

OPTIONAL_B = BACKEND + """
input [
  { name: "x" data_type: TYPE_FP32 dims: [-1, 8] },
  { name: "w" data_type: TYPE_FP32 dims: [8, 4] },
  { name: "b" data_type: TYPE_FP32 dims: [4] optional: true }
]
output [{ name: "output0" data_type: TYPE_FP32 dims: [-1, 4] }]
"""

# A BYTES (string) input where the model takes float32: the config lets it through.
BYTES_INPUT = BACKEND + """
input [{ name: "x" data_type: TYPE_STRING dims: [1, 16] }]
output [{ name: "output0" data_type: TYPE_FP32 dims: [1, 8] }]
"""

# Weights in a tensor cache: `weights/` beside model.so (by default), or the directory the
# `weights` parameter names (relative to the version directory, or absolute).
PACKED = BACKEND + """
parameters { key: "weights" value { string_value: "cache" } }
"""
MLC_EMBED = BACKEND + f"""
parameters {{ key: "function" value {{ string_value: "embed" }} }}
parameters {{ key: "weights" value {{ string_value: "{FIX}/mlc/model" }} }}
"""
# CUDA models on tests/cuda_double's test double of the driver (the server runs with
# TVMRT_CUDA_LIBRARY naming it): KIND_CPU instances with `device: cuda:N`, the path a KIND_GPU
# instance takes on its GPU (Triton itself refuses KIND_GPU where CUDA sees no device; see
# benches/triton/gpu_run.py for a real GPU). The double runs the `add` kernel on the host, not
# the MLP's kernels: the MLP is checked for its launches' shape, `add` for its values.
CUDA_ADD = ADD_KERNEL + """
parameters { key: "device" value { string_value: "cuda:0" } }
"""
CUDA_MLP = BACKEND + """
instance_group [{ kind: KIND_CPU, count: 2 }]
parameters { key: "device" value { string_value: "cuda:0" } }
"""
CUDA_MISSING = BACKEND + """
parameters { key: "device" value { string_value: "cuda:3" } }
"""
NO_SUCH_WEIGHTS = BACKEND + """
parameters { key: "weights" value { string_value: "nowhere" } }
"""

GOOD = ["mlp", "cnn", "dyn_batch", "batch_mlp", "graph_mlp", "graph_two_outputs", "graph_params",
        "add_kernel", "opencl_mlp", "vulkan_mlp", "weights_mlp", "packed_mlp", "mlc_embed",
        "wrong_dtype", "wrong_shape", "optional_b", "bytes_input", "cuda_add", "cuda_mlp"]
BROKEN = ["corrupt", "not_tvm", "weights_absent", "weights_unnamed", "weights_corrupt",
          "weights_nowhere", "cuda_missing"]


def non_tvm_library():
    """A shared library TVM did not build (the C math library)."""
    for d in ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64",
              "/lib/aarch64-linux-gnu", "/usr/lib"):
        p = os.path.join(d, "libm.so.6")
        if os.path.isfile(p):
            return p
    raise FileNotFoundError("no libm.so.6 to serve as a library TVM did not build")


def make_repo(repo, tmp):
    add = triton.add_model
    add(repo, "mlp", f"{FIX}/mlp.so", BACKEND)
    add(repo, "cnn", f"{FIX}/cnn.so", BACKEND)
    add(repo, "dyn_batch", f"{FIX}/dyn_batch.so", BACKEND)
    add(repo, "batch_mlp", f"{HERE}/models/batch_mlp.so", BATCH_MLP)
    add(repo, "graph_mlp", f"{FIX}/graph/mlp.so", BACKEND)
    add(repo, "graph_two_outputs", f"{FIX}/graph/two_outputs.so", BACKEND)
    add(repo, "graph_params", f"{FIX}/graph/mlp.so", BACKEND)
    shutil.copy(f"{FIX}/graph/mlp.override.params", os.path.join(repo, "graph_params", "1", "params"))
    add(repo, "add_kernel", f"{FIX}/add_dyn.so", ADD_KERNEL)
    add(repo, "opencl_mlp", f"{FIX}/opencl/mlp.so", OPENCL)
    add(repo, "vulkan_mlp", f"{FIX}/vulkan/mlp.so", VULKAN)
    add(repo, "wrong_dtype", f"{FIX}/mlp.so", WRONG_DTYPE)
    add(repo, "wrong_shape", f"{FIX}/mlp.so", WRONG_SHAPE)
    add(repo, "optional_b", f"{FIX}/dyn_batch.so", OPTIONAL_B)
    add(repo, "bytes_input", f"{FIX}/mlp.so", BYTES_INPUT)
    models = os.path.join(HERE, "models")
    add(repo, "weights_mlp", f"{models}/weights_mlp.so", BACKEND)
    shutil.copytree(f"{models}/weights_mlp", os.path.join(repo, "weights_mlp", "1", "weights"))
    add(repo, "packed_mlp", f"{models}/packed_mlp.so", PACKED)
    shutil.copytree(f"{models}/packed_mlp", os.path.join(repo, "packed_mlp", "1", "cache"))
    add(repo, "mlc_embed", f"{FIX}/mlc/model/lib.so", MLC_EMBED)
    # Weights and no cache, as a tuple or by name; a shard cut short; a directory that is not
    # there.
    add(repo, "weights_absent", f"{models}/packed_mlp.so", BACKEND)
    add(repo, "weights_unnamed", f"{models}/weights_mlp.so", BACKEND)
    add(repo, "weights_corrupt", f"{models}/weights_mlp.so", BACKEND)
    cut = os.path.join(repo, "weights_corrupt", "1", "weights")
    shutil.copytree(f"{models}/weights_mlp", cut)
    with open(os.path.join(cut, "params_shard_0.bin"), "r+b") as f:
        f.truncate(1000)
    add(repo, "weights_nowhere", f"{models}/weights_mlp.so", NO_SUCH_WEIGHTS)
    corrupt = os.path.join(tmp, "corrupt.so")
    with open(corrupt, "wb") as f:
        f.write(b"\x7fELF" + bytes(random.Random(30).randrange(256) for _ in range(4096)))
    add(repo, "corrupt", corrupt, BACKEND)
    add(repo, "not_tvm", non_tvm_library(), BACKEND)
    add(repo, "cuda_add", f"{FIX}/cuda/elementwise_ptx.so", CUDA_ADD)
    add(repo, "cuda_mlp", f"{FIX}/cuda/mlp_ptx.so", CUDA_MLP)
    add(repo, "cuda_missing", f"{FIX}/cuda/mlp_ptx.so", CUDA_MISSING)


def fake_cuda(tmp):
    """Builds the driver's test double (tests/cuda_double/fake_cuda.c) and points tvmrt at it
    for the server this process starts (one device, an sm_80 like the fixtures' PTX)."""
    import subprocess
    out = os.path.join(tmp, "libfake_cuda.so")
    subprocess.run([os.environ.get("CC", "cc"), "-shared", "-fPIC", "-O2", "-o", out,
                    os.path.join(ROOT, "tests", "cuda_double", "fake_cuda.c"), "-lm", "-lpthread"],
                   check=True)
    os.environ.update(TVMRT_CUDA_LIBRARY=out, FAKE_CUDA_DEVICES="1", FAKE_CUDA_SM="80")


class Direct:
    """The same models called directly on tvmrt (its Python package over libtvmrt.so)."""

    def __init__(self, runtime):
        os.environ["TVMRT_LIBRARY"] = os.path.abspath(runtime)
        sys.path.insert(0, os.path.join(ROOT, "python"))
        import tvmrt
        from tvmrt.graph_executor import GraphModule

        self.tvmrt = tvmrt
        self.vms = {}
        self.graphs = {}
        self.GraphModule = GraphModule
        self.lock = threading.Lock()

    def weighted(self, path, cache, x, func="main", packed=True):
        """`func(x, weights)` of a model whose weights are the tensor cache `cache`: by name
        when its parameters are named like the cache's records, else packed in a tuple in the
        order of its `_metadata` (an MLC-LLM model) or of tensor-cache.json."""
        tvmrt = self.tvmrt
        with self.lock:
            vm = tvmrt.VirtualMachine(tvmrt.load_module(path), tvmrt.cpu())
            tvmrt.get_global_func("vm.builtin.tensor_cache.load")(cache, 1, 0)
            with open(os.path.join(cache, "tensor-cache.json")) as f:
                names = [r["name"] for s in json.load(f)["records"] for r in s["records"]]
            if vm.module.get_function("_metadata", False) is not None:
                names = [p["name"] for p in json.loads(str(vm["_metadata"]()))["params"]]
            get = tvmrt.get_global_func("vm.builtin.tensor_cache.get")
            arg = tvmrt.tensor(np.ascontiguousarray(x))
            if not packed:
                out = vm[func](arg, *[get(n) for n in names])
            else:
                packed = tvmrt.get_global_func("vm.builtin.param_array_from_cache_by_name_unpacked")
                out = vm[func](arg, packed(*names))
            tvmrt.get_global_func("vm.builtin.tensor_cache.clear")()
            return [out.numpy()]

    def relax(self, path, *inputs, device=None):
        tvmrt = self.tvmrt
        dev = device or tvmrt.cpu()
        with self.lock:
            if (path, dev) not in self.vms:
                self.vms[(path, dev)] = tvmrt.VirtualMachine(tvmrt.load_module(path), dev)
            args = [tvmrt.tensor(np.ascontiguousarray(x), dev) for x in inputs]
            return [self.vms[(path, dev)]["main"](*args).numpy()]

    def graph(self, path, params=None, **inputs):
        tvmrt = self.tvmrt
        with self.lock:
            if (path, params) not in self.graphs:
                lib = tvmrt.load_module(path)
                g = self.GraphModule(lib["default"](tvmrt.cpu()))
                if params:
                    with open(params, "rb") as f:
                        g.load_params(f.read())
                self.graphs[(path, params)] = g
            g = self.graphs[(path, params)]
            for k, v in inputs.items():
                g.set_input(k, tvmrt.tensor(v))
            g.run()
            return [g._get_output(i).numpy() for i in range(g.get_num_outputs())]


class Clients:
    def __init__(self, srv):
        import tritonclient.grpc as grpc
        import tritonclient.http as http

        self.http_mod, self.grpc_mod = http, grpc
        self.srv = srv

    def http(self):
        return self.http_mod.InferenceServerClient(f"127.0.0.1:{self.srv.http}", network_timeout=60)

    def grpc(self):
        return self.grpc_mod.InferenceServerClient(f"127.0.0.1:{self.srv.grpc}")

    def infer(self, proto, model, inputs, binary=True, client=None):
        """{output name: array} for {input name: array}, over `proto` (http or grpc)."""
        mod = self.http_mod if proto == "http" else self.grpc_mod
        c = client or (self.http() if proto == "http" else self.grpc())
        try:
            return self._infer(mod, proto, model, inputs, binary, c)
        finally:
            if client is None:
                c.close()

    def _infer(self, mod, proto, model, inputs, binary, c):
        ins = []
        for name, x in inputs.items():
            i = mod.InferInput(name, list(x.shape), mod.np_to_triton_dtype(x.dtype))
            if proto == "http":
                i.set_data_from_numpy(x, binary_data=binary)
            else:
                i.set_data_from_numpy(x)
            ins.append(i)
        if proto == "http":
            r = c.infer(model, ins, timeout=60)
        else:
            r = c.infer(model, ins, client_timeout=60)
        out = r.get_response()
        names = [o["name"] for o in out["outputs"]] if proto == "http" else [o.name for o in out.outputs]
        return {n: r.as_numpy(n) for n in names}

    def error(self, proto, model, inputs):
        """The error message a request gets (fails if it succeeds)."""
        try:
            self.infer(proto, model, inputs)
        except Exception as e:  # tritonclient's InferenceServerException
            return str(e)
        raise AssertionError(f"{model}: the bad request succeeded")


FAILED = []


def check(name, f):
    start = time.time()
    try:
        f()
        print(f"ok    {name} ({time.time() - start:.1f} s)")
    except Exception:
        FAILED.append(name)
        print(f"FAIL  {name}")
        traceback.print_exc()


def equal(got, want, what):
    assert got.dtype == want.dtype and got.shape == want.shape, \
        f"{what}: {got.dtype}{got.shape} != {want.dtype}{want.shape}"
    assert np.array_equal(got, want), f"{what}: max diff {np.max(np.abs(got - want))}"


def run(args):
    tmp = tempfile.mkdtemp(prefix="tvmrt_triton_")
    repo = os.path.join(tmp, "repo")
    make_repo(repo, tmp)
    fake_cuda(tmp)
    backends = triton.backend_dir(tmp, args.backend)
    direct = Direct(args.runtime)
    start = time.time()
    srv = triton.Server(repo, backends, os.path.join(tmp, "server.log"), GOOD)
    print(f"server pid {srv.proc.pid} ready in {time.time() - start:.1f} s (log: {srv.log_path})")
    cl = Clients(srv)
    rng = np.random.default_rng(30)
    try:
        tests(srv, cl, direct, rng)
    finally:
        code = srv.stop()
        print(f"server pid {srv.proc.pid} stopped (exit {code})")
        unloaded = srv.log_text_after_stop().count("successfully unloaded")
        if code != 0 or unloaded != len(GOOD):
            FAILED.append(f"clean shutdown (exit {code}, {unloaded} of {len(GOOD)} models unloaded)")
        if FAILED or args.show_log:
            print("---- server log (last 60 lines) ----")
            print("\n".join(srv.log_text_after_stop().splitlines()[-60:]))
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def tests(srv, cl, direct, rng):
    def config(model):
        status, body = srv.get(f"/v2/models/{model}/config")
        assert status == 200, body
        return json.loads(body)

    def autocomplete():
        c = config("batch_mlp")
        assert c["max_batch_size"] == 8, c["max_batch_size"]
        assert "dynamic_batching" in c
        assert [(i["name"], i["data_type"], i["dims"]) for i in c["input"]] == [("x", "TYPE_FP32", [16])]
        assert [(o["name"], o["data_type"], o["dims"]) for o in c["output"]] == [("output0", "TYPE_FP32", [8])]
        c = config("mlp")
        assert c["max_batch_size"] == 0
        assert c["input"][0]["dims"] == [1, 16] and c["output"][0]["dims"] == [1, 8]
        c = config("dyn_batch")
        assert c["max_batch_size"] == 0, "w and b have no batch dimension"
        assert [i["dims"] for i in c["input"]] == [[-1, 8], [8, 4], [4]]
        assert c["output"][0]["dims"] == [-1, 4]
        c = config("graph_two_outputs")
        assert [o["name"] for o in c["output"]] == ["output0", "output1"]
    check("auto-complete: inputs, outputs, batching from the model", autocomplete)

    cases = {
        "mlp": lambda: ({"x": rng.standard_normal((1, 16), dtype=np.float32)}, "relax", f"{FIX}/mlp.so"),
        "cnn": lambda: ({"x": rng.standard_normal((1, 3, 8, 8), dtype=np.float32)}, "relax", f"{FIX}/cnn.so"),
        "dyn_batch": lambda: ({"x": rng.standard_normal((5, 8), dtype=np.float32),
                               "w": rng.standard_normal((8, 4), dtype=np.float32),
                               "b": rng.standard_normal(4, dtype=np.float32)}, "relax", f"{FIX}/dyn_batch.so"),
        "batch_mlp": lambda: ({"x": rng.standard_normal((3, 16), dtype=np.float32)}, "relax",
                              f"{HERE}/models/batch_mlp.so"),
        "graph_mlp": lambda: ({"x": rng.standard_normal((1, 4), dtype=np.float32)}, "graph",
                              f"{FIX}/graph/mlp.so"),
        "opencl_mlp": lambda: ({"x": rng.standard_normal((1, 16), dtype=np.float32)}, "opencl",
                               f"{FIX}/opencl/mlp.so"),
        "vulkan_mlp": lambda: ({"x": rng.standard_normal((1, 16), dtype=np.float32)}, "vulkan",
                               f"{FIX}/vulkan/mlp.so"),
        "graph_params": lambda: ({"x": rng.standard_normal((1, 4), dtype=np.float32)}, "graph",
                                 (f"{FIX}/graph/mlp.so", f"{FIX}/graph/mlp.override.params")),
        "graph_two_outputs": lambda: ({"x": rng.standard_normal((2, 3), dtype=np.float32)}, "graph",
                                      f"{FIX}/graph/two_outputs.so"),
        "weights_mlp": lambda: ({"x": rng.standard_normal((3, 16), dtype=np.float32)}, "weights",
                                (f"{HERE}/models/weights_mlp.so", f"{HERE}/models/weights_mlp", "main")),
        "packed_mlp": lambda: ({"x": rng.standard_normal((2, 16), dtype=np.float32)}, "weights",
                               (f"{HERE}/models/packed_mlp.so", f"{HERE}/models/packed_mlp", "main")),
        # Token ids [n] are dims [1] reshaped to [] (Triton's idiom): requests send [n, 1].
        "mlc_embed": lambda: ({"input_ids": rng.integers(0, 320, (6, 1), dtype=np.int32)}, "weights",
                              (f"{FIX}/mlc/model/lib.so", f"{FIX}/mlc/model", "embed")),
    }

    def expected(model, kind, path, inputs):
        if kind == "weights":
            lib, cache, func = path
            x = next(iter(inputs.values()))
            x = x.reshape(-1) if model == "mlc_embed" else x
            return direct.weighted(lib, cache, x, func=func,
                                   packed=model != "weights_mlp")
        if kind == "opencl":
            return direct.relax(path, *inputs.values(), device=direct.tvmrt.opencl())
        if kind == "vulkan":
            return direct.relax(path, *inputs.values(), device=direct.tvmrt.vulkan())
        if kind == "relax":
            return direct.relax(path, *inputs.values())
        if isinstance(path, tuple):
            return direct.graph(path[0], params=path[1], **inputs)
        return direct.graph(path, **inputs)

    for model, make in cases.items():
        for proto, binary in (("http", True), ("http", False), ("grpc", True)):
            def one(model=model, make=make, proto=proto, binary=binary):
                inputs, kind, path = make()
                want = expected(model, kind, path, inputs)
                got = cl.infer(proto, model, inputs, binary=binary)
                assert sorted(got) == [f"output{k}" for k in range(len(want))], sorted(got)
                for k, w in enumerate(want):
                    equal(got[f"output{k}"], w, f"{model} output{k}")
            label = proto + (" binary" if proto == "http" and binary else " JSON" if proto == "http" else "")
            check(f"{model} over {label} = direct tvmrt call", one)

    def kernel():
        a = rng.standard_normal(7, dtype=np.float32)
        b = rng.standard_normal(7, dtype=np.float32)
        got = cl.infer("http", "add_kernel", {"A": a, "B": b})["output0"]
        equal(got, a + b, "add")
    check("a compiled kernel named by `function` (add_dyn.so's add)", kernel)

    def on_cuda():
        # Host inputs copied to cuda:0, the kernel run there, the output copied back; over
        # HTTP (binary and JSON) and gRPC.
        for n, proto, binary in ((1000, "http", True), (7, "http", False), (1, "grpc", True)):
            a = rng.standard_normal(n, dtype=np.float32)
            b = rng.standard_normal(n, dtype=np.float32)
            got = cl.infer(proto, "cuda_add", {"A": a, "B": b}, binary=binary)["output0"]
            equal(got, a + b, f"add on cuda:0, n={n}")
        c = config("cuda_mlp")
        assert c["max_batch_size"] == 0 and c["input"][0]["dims"] == [1, 16], c
        for proto in ("http", "grpc"):
            got = cl.infer(proto, "cuda_mlp", {"x": np.ones((1, 16), np.float32)})["output0"]
            assert got.shape == (1, 8) and got.dtype == np.float32, got.shape
        on = [l.rsplit(" on ", 1)[-1].strip().rstrip('"') for l in srv.log_text().splitlines()
              if "model `cuda_mlp` instance" in l]
        assert on == ["cuda:0", "cuda:0"], on
    check("CUDA (the driver's test double): `device: cuda:0` instances, copies both ways", on_cuda)

    def weights_autocomplete():
        for model, name, dtype, dims in (("weights_mlp", "x", "TYPE_FP32", [16]),
                                         ("packed_mlp", "x", "TYPE_FP32", [16]),
                                         ("mlc_embed", "input_ids", "TYPE_INT32", [])):
            c = config(model)
            got = [(i["name"], i["data_type"], i["dims"]) for i in c["input"]]
            assert got == [(name, dtype, dims or [1])], (model, got)
            assert ("reshape" in c["input"][0]) == (dims == []), c["input"][0]
            assert c["max_batch_size"] == 8, (model, c["max_batch_size"])
        # The weights are the batch_mlp's, kept out of the library: the same outputs.
        x = rng.standard_normal((2, 16), dtype=np.float32)
        want = direct.relax(f"{HERE}/models/batch_mlp.so", x)[0]
        for model in ("weights_mlp", "packed_mlp"):
            got = cl.infer("http", model, {"x": x})["output0"]
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        # MLC-LLM's embed is a row of the embedding table (stored as bfloat16 halves).
        with open(f"{FIX}/mlc/model/tensor-cache.json") as f:
            shard = json.load(f)["records"][0]
        rec = next(r for r in shard["records"] if r["name"] == "model.embed_tokens.weight")
        raw = np.fromfile(f"{FIX}/mlc/model/{shard['dataPath']}", dtype=np.uint16,
                          count=rec["nbytes"] // 2, offset=rec["byteOffset"])
        table = (raw.astype(np.uint32) << 16).view(np.float32).reshape(rec["shape"])
        ids = np.array([5, 0, 319], np.int32)
        got = cl.infer("grpc", "mlc_embed", {"input_ids": ids.reshape(3, 1)})["output0"]
        equal(got, table[ids], "embed")
    check("weights from a tensor cache: left out of the inputs, the model's own values", weights_autocomplete)

    def params_differ():
        x = rng.standard_normal((1, 4), dtype=np.float32)
        a = cl.infer("http", "graph_mlp", {"x": x})["output0"]
        b = cl.infer("http", "graph_params", {"x": x})["output0"]
        assert not np.array_equal(a, b), "the params file changed nothing"
    check("a graph model's params file beside it replaces its parameters", params_differ)

    def recorded_by_tvm():
        with open(f"{HERE}/models/batch_mlp.expected.json") as f:
            rec = json.load(f)
        for case in rec["cases"]:
            x = np.array(case["x"], dtype=np.float32)
            got = cl.infer("grpc", "batch_mlp", {"x": x})["output0"]
            np.testing.assert_allclose(got, np.array(case["y"], dtype=np.float32), rtol=1e-5, atol=1e-6)
    check("batch_mlp = TVM 0.27's recorded outputs", recorded_by_tvm)

    def vulkan_recorded_by_tvm():
        # The input and output TVM 0.27 recorded when it built the Vulkan fixture.
        x = np.load(f"{FIX}/vulkan/data/mlp.main.in0.npy")
        want = np.load(f"{FIX}/vulkan/data/mlp.main.out0.npy")
        for proto in ("http", "grpc"):
            got = cl.infer(proto, "vulkan_mlp", {"x": x})["output0"]
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    check("vulkan_mlp on lavapipe = TVM 0.27's recorded output", vulkan_recorded_by_tvm)

    # Dynamic batching: many single-row requests at once; the stats must show batches > 1.
    pool = [rng.standard_normal((1, 16), dtype=np.float32) for _ in range(32)]
    pool_out = [direct.relax(f"{HERE}/models/batch_mlp.so", x)[0] for x in pool]

    def batching():
        errors = []

        def worker(k):
            try:
                c = cl.http()
                for j in range(8):
                    i = (k * 8 + j) % len(pool)
                    equal(cl.infer("http", "batch_mlp", {"x": pool[i]}, client=c)["output0"], pool_out[i], "row")
                c.close()
            except Exception as e:
                errors.append(e)
        threads = [threading.Thread(target=worker, args=(k,)) for k in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert not errors, errors[:3]
        status, body = srv.get("/v2/models/batch_mlp/stats")
        stats = json.loads(body)["model_stats"][0]
        sizes = {int(b["batch_size"]): int(b["compute_infer"]["count"]) for b in stats["batch_stats"]}
        print(f"      batch sizes run (size: count): {dict(sorted(sizes.items()))}; "
              f"{stats['inference_count']} inferences in {stats['execution_count']} executions")
        assert max(sizes) > 1, sizes
        assert int(stats["inference_count"]) > int(stats["execution_count"])
    check("dynamic batching: batches > 1 in /v2/models/batch_mlp/stats", batching)

    def metrics():
        import urllib.request
        with urllib.request.urlopen(f"http://127.0.0.1:{srv.metrics}/metrics", timeout=10) as r:
            text = r.read().decode()
        line = [l for l in text.splitlines()
                if l.startswith("nv_inference_exec_count") and 'model="batch_mlp"' in l]
        assert line and float(line[0].split()[-1]) > 0, line
    check("Prometheus /metrics counts the backend's executions", metrics)

    def instances():
        c = config("batch_mlp")
        assert c["instance_group"][0]["count"] == 2
        log = srv.log_text()
        names = {l.split("instance `")[1].split("`")[0] for l in log.splitlines()
                 if "model `batch_mlp` instance" in l}
        assert len(names) == 2, names
    check("two KIND_CPU instances, each with its own executor", instances)

    def concurrent():
        errors = []
        counts = [0] * 16

        def worker(k):
            try:
                proto = "http" if k % 2 == 0 else "grpc"
                c = cl.http() if proto == "http" else cl.grpc()
                r = random.Random(k)
                for _ in range(200):
                    i = r.randrange(len(pool))
                    got = cl.infer(proto, "batch_mlp", {"x": pool[i]}, client=c)["output0"]
                    equal(got, pool_out[i], f"client {k}")
                    counts[k] += 1
                c.close()
            except Exception as e:
                errors.append(f"client {k}: {e!r}")
        threads = [threading.Thread(target=worker, args=(k,)) for k in range(16)]
        start = time.time()
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
        assert not errors, errors[:3]
        assert counts == [200] * 16, counts
        print(f"      3200 requests in {time.time() - start:.1f} s, all correct")
    check("16 concurrent clients x 200 requests (HTTP and gRPC), every answer correct", concurrent)

    # Bad input: each gets an error; the server keeps serving.
    def bad_dtype():
        e = cl.error("http", "wrong_dtype", {"x": np.zeros((1, 16), np.float64)})
        assert "input `x` is FP64, but the model takes FP32" in e, e
        print(f"      {e[:300]}")
        e = cl.error("http", "mlp", {"x": np.zeros((1, 16), np.float64)})
        assert "FP64" in e and "FP32" in e, e
    check("bad input: wrong dtype (one the config let through, one Triton refuses)", bad_dtype)

    def bad_bytes():
        strings = np.array([[b"1.5"] * 16], dtype=np.object_)
        for proto in ("http", "grpc"):
            e = cl.error(proto, "bytes_input", {"x": strings})
            assert "input `x` is BYTES, but the model takes FP32" in e, e
        print(f"      {e[:300]}")
        e = cl.error("http", "mlp", {"x": strings})
        assert "BYTES" in e and "FP32" in e, e
        x = rng.standard_normal((1, 16), dtype=np.float32)
        equal(cl.infer("http", "mlp", {"x": x})["output0"], direct.relax(f"{FIX}/mlp.so", x)[0],
              "mlp after the strings")
    check("bad input: BYTES (strings) for a float32 input (the config let through, and not)",
          bad_bytes)

    def bad_shape():
        e = cl.error("grpc", "wrong_shape", {"x": np.zeros((1, 15), np.float32)})
        assert "input `x` has shape [1, 15], but the model takes x: float32[1, 16]" in e, e
        print(f"      {e[:300]}")
        e = cl.error("http", "wrong_shape", {"x": np.zeros((16,), np.float32)})
        assert "Triton" in e or "dims" in e or "shape" in e, e
    check("bad input: wrong shape", bad_shape)

    def missing():
        x = np.zeros((2, 8), np.float32)
        w = np.zeros((8, 4), np.float32)
        e = cl.error("http", "optional_b", {"x": x, "w": w})
        assert "the request has no input `b`" in e, e
        print(f"      {e[:300]}")
        e = cl.error("http", "dyn_batch", {"x": x, "w": w})
        assert "missing required input" in e and "'b'" in e, e
    check("bad input: a missing input (optional in the config, and not)", missing)

    def kernel_fails():
        e = cl.error("http", "add_kernel", {"A": np.zeros(4, np.float32), "B": np.zeros(5, np.float32)})
        # TVM's own argument check in the kernel, reported through the C symbol the kernel
        # imports (TVMFFIErrorSetRaisedFromCStrParts, global since the backend's first load).
        assert "running the model" in e and "Mismatched" in e and "B.shape[0]" in e, e
        print(f"      {e[:300]}")
        got = cl.infer("http", "add_kernel", {"A": np.ones(3, np.float32), "B": np.ones(3, np.float32)})
        equal(got["output0"], np.full(3, 2, np.float32), "after the failure")
    check("bad input: a kernel that fails (its error, then the next request is served)", kernel_fails)

    def broken_models():
        import urllib.request
        req = urllib.request.Request(srv.url("/v2/repository/index"), data=b"{}", method="POST")
        with urllib.request.urlopen(req, timeout=10) as r:
            index = {m["name"]: m for m in json.loads(r.read())}
        for model, words in (("corrupt", ["model `corrupt`", "model.so"]),
                             ("not_tvm", ["neither a Relax model nor a graph executor model"]),
                             ("weights_absent", ["parameter 1 (`params`)", "T.Tuple(",
                                                 "tensor-cache.json"]),
                             ("weights_unnamed", ["parameter 1 (`w1`)", "num_input"]),
                             ("weights_corrupt", ["weights_corrupt/1/weights", "params_shard_0.bin",
                                                  "corrupted parameter shard"]),
                             ("weights_nowhere", ["weights_nowhere/1/nowhere", "does not exist"]),
                             ("cuda_missing", ["cuda:3 does not exist", "1 CUDA device"])):
            assert not srv.model_ready(model), model
            reason = index[model].get("reason", "")
            assert index[model]["state"] == "UNAVAILABLE", index[model]
            assert all(w in reason for w in words), reason
            print(f"      {model}: {reason[:200]}")
        for m in GOOD:
            assert srv.model_ready(m), m
        equal(cl.infer("grpc", "mlp", {"x": pool[0]})["output0"],
              direct.relax(f"{FIX}/mlp.so", pool[0])[0], "mlp after the bad models")
    check("bad model files and weights: load fails with a message, the other models keep serving",
          broken_models)

    def still_alive():
        assert srv.proc.poll() is None, "the server died"
        status, _ = srv.get("/v2/health/live")
        assert status == 200
    check("the server is alive after every bad input", still_alive)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", required=True, help="libtriton_tvmrt.so")
    ap.add_argument("--runtime", required=True, help="libtvmrt.so, for the direct calls")
    ap.add_argument("--show-log", action="store_true")
    run_and_exit(run, ap.parse_args(), "all Triton backend tests passed")


def run_and_exit(run, args, passed):
    """Runs the suite `run(args)`, prints its verdict and time, exits 1 if a check failed."""
    start = time.time()
    run(args)
    print(f"{'FAILED: ' + ', '.join(FAILED) if FAILED else passed} ({time.time() - start:.0f} s)")
    sys.exit(1 if FAILED else 0)


if __name__ == "__main__":
    main()
