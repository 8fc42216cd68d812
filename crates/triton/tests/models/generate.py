#!/usr/bin/env python3
"""Builds the Relax models the Triton backend's tests serve, with apache-tvm 0.27 (compiler and
exporter); the project's own fixtures (tests/fixtures) have no model whose every input is
batched along a symbolic first dimension, which Triton's dynamic batcher needs.

    .venv/triton_bench/bin/python crates/triton/tests/models/generate.py [--out DIR]

Writes (fixed seeds, deterministic):
  batch_mlp.so        y = relu(x @ W1 + b1) @ W2 + b2, x[n,16] -> 32 -> 8, float32, weights
                      bound as constants: the batchable model of the tests.
  batch_mlp.expected.json  inputs and TVM 0.27's own outputs for n = 1, 3 (tvm.relax.VirtualMachine).
  weights_mlp.so, weights_mlp/   the same MLP as main(x, w1, b1, w2, b2): its weights detached
                      (relax.frontend.detach_params) into a tensor cache named by parameter.
  packed_mlp.so, packed_mlp/     the same MLP as main(x, params), params a tuple of the weights
                      (relax.frontend.nn's packed mode, MLC-LLM's), the cache in tuple order.

Also importable: `mlp(hidden, n_in, n_out, seed)` and `cnn(...)` give IRModules with a symbolic
batch dimension, which benches/triton/run.py builds larger models from.
"""
import argparse
import json
import os
import shutil
import sys


def mlp_weights(n_in, hidden, n_out, seed):
    """{name: array} of the MLP's weights w1, b1, w2, b2 (in that order)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    w1 = (rng.standard_normal((n_in, hidden)) * (1.0 / np.sqrt(n_in))).astype("float32")
    b1 = (rng.standard_normal(hidden) * 0.1).astype("float32")
    w2 = (rng.standard_normal((hidden, n_out)) * (1.0 / np.sqrt(hidden))).astype("float32")
    b2 = (rng.standard_normal(n_out) * 0.1).astype("float32")
    return {"w1": w1, "b1": b1, "w2": w2, "b2": b2}


def mlp(n_in, hidden, n_out, seed):
    from tvm import relax, tirx as tir

    w1, b1, w2, b2 = mlp_weights(n_in, hidden, n_out, seed).values()
    n = tir.Var("n", "int64")
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((n, n_in), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            h = bb.emit(relax.op.matmul(x, relax.const(w1)))
            h = bb.emit(relax.op.add(h, relax.const(b1)))
            h = bb.emit(relax.op.nn.relu(h))
            h = bb.emit(relax.op.matmul(h, relax.const(w2)))
            y = bb.emit_output(relax.op.add(h, relax.const(b2)))
        bb.emit_func_output(y)
    return bb.get()


def mlp_detached(n_in, hidden, n_out, seed):
    """The MLP with its weights as parameters, `main(x, w1, b1, w2, b2)`, as TVM's frontends
    import a model keeping its parameters out of the code (`num_input` 1 and the weights in
    the `params` attribute), then split off with `relax.frontend.detach_params`: returns the
    module and {name: array} of the detached weights."""
    import numpy as np
    import tvm
    from tvm import relax, tirx as tir

    weights = mlp_weights(n_in, hidden, n_out, seed)
    n = tir.Var("n", "int64")
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((n, n_in), "float32"))
    ps = [relax.Var(k, relax.TensorType(v.shape, "float32")) for k, v in weights.items()]
    with bb.function("main", [x, *ps]):
        with bb.dataflow():
            h = bb.emit(relax.op.matmul(x, ps[0]))
            h = bb.emit(relax.op.nn.relu(relax.op.add(h, ps[1])))
            h = bb.emit(relax.op.matmul(h, ps[2]))
            y = bb.emit_output(relax.op.add(h, ps[3]))
        bb.emit_func_output(y)
    mod = bb.get()
    func = mod["main"].with_attr("num_input", 1).with_attr(
        "params", [tvm.runtime.tensor(v) for v in weights.values()])
    mod["main"] = func
    mod, params = relax.frontend.detach_params(mod)
    detached = {k: np.asarray(t.numpy()) for k, t in zip(weights, params["main"])}
    return mod, detached


def mlp_packed(n_in, hidden, n_out, seed, prefix="mlp"):
    """The MLP taking its weights as one tuple, `main(x, params)`, as `relax.frontend.nn`
    exports a module with `param_mode="packed"` (MLC-LLM's models): returns the module and
    {name: array} of the weights in the tuple's order."""
    from tvm import relax, tirx as tir

    weights = mlp_weights(n_in, hidden, n_out, seed)
    n = tir.Var("n", "int64")
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((n, n_in), "float32"))
    p = relax.Var("params", relax.TupleType(
        [relax.TensorType(v.shape, "float32") for v in weights.values()]))
    with bb.function("main", [x, p]):
        with bb.dataflow():
            w1, b1, w2, b2 = (bb.emit(relax.TupleGetItem(p, i)) for i in range(4))
            h = bb.emit(relax.op.matmul(x, w1))
            h = bb.emit(relax.op.nn.relu(relax.op.add(h, b1)))
            h = bb.emit(relax.op.matmul(h, w2))
            y = bb.emit_output(relax.op.add(h, b2))
        bb.emit_func_output(y)
    return bb.get(), {f"{prefix}.{k}": v for k, v in weights.items()}


def cnn(channels, size, classes, seed):
    """conv3x3 (channels -> 16) + relu + maxpool2, conv3x3 (16 -> 32) + relu + maxpool2, dense."""
    import numpy as np
    from tvm import relax, tirx as tir

    rng = np.random.default_rng(seed)
    w1 = (rng.standard_normal((16, channels, 3, 3)) * 0.2).astype("float32")
    b1 = (rng.standard_normal((1, 16, 1, 1)) * 0.1).astype("float32")
    w2 = (rng.standard_normal((32, 16, 3, 3)) * 0.1).astype("float32")
    b2 = (rng.standard_normal((1, 32, 1, 1)) * 0.1).astype("float32")
    flat = 32 * (size // 4) * (size // 4)
    wf = (rng.standard_normal((flat, classes)) * (1.0 / np.sqrt(flat))).astype("float32")
    bf = (rng.standard_normal(classes) * 0.1).astype("float32")
    n = tir.Var("n", "int64")
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((n, channels, size, size), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            h = bb.emit(relax.op.nn.conv2d(x, relax.const(w1), padding=(1, 1)))
            h = bb.emit(relax.op.nn.relu(relax.op.add(h, relax.const(b1))))
            h = bb.emit(relax.op.nn.max_pool2d(h, pool_size=(2, 2), strides=(2, 2)))
            h = bb.emit(relax.op.nn.conv2d(h, relax.const(w2), padding=(1, 1)))
            h = bb.emit(relax.op.nn.relu(relax.op.add(h, relax.const(b2))))
            h = bb.emit(relax.op.nn.max_pool2d(h, pool_size=(2, 2), strides=(2, 2)))
            h = bb.emit(relax.op.reshape(h, (n, flat)))
            h = bb.emit(relax.op.matmul(h, relax.const(wf)))
            y = bb.emit_output(relax.op.add(h, relax.const(bf)))
        bb.emit_func_output(y)
    return bb.get()


def build(mod, path):
    import tvm

    tvm.compile(mod, target="llvm").export_library(path)


def main():
    import numpy as np
    import tvm
    from tvm import relax

    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    args = ap.parse_args()
    if not tvm.__version__.startswith("0.27"):
        sys.exit(f"apache-tvm 0.27 is needed, this is {tvm.__version__}")
    path = os.path.join(args.out, "batch_mlp.so")
    build(mlp(16, 32, 8, seed=30), path)
    vm = relax.VirtualMachine(tvm.runtime.load_module(path), tvm.cpu())
    rng = np.random.default_rng(31)
    cases = []
    for n in (1, 3):
        x = rng.standard_normal((n, 16)).astype("float32")
        y = vm["main"](tvm.runtime.tensor(x)).numpy()
        cases.append({"x": x.tolist(), "y": y.tolist()})
    with open(os.path.join(args.out, "batch_mlp.expected.json"), "w") as f:
        json.dump({"tvm": tvm.__version__, "cases": cases}, f, indent=1)
        f.write("\n")
    print(f"wrote {path}")

    # The same MLP with its weights kept out of the library, in a tensor cache (MLC-LLM's
    # weight format: tensor-cache.json + shards, written by TVM's own tvmjs.dump_tensor_cache).
    from tvm.contrib import tvmjs

    for name, (mod, weights) in (("weights_mlp", mlp_detached(16, 32, 8, seed=30)),
                                 ("packed_mlp", mlp_packed(16, 32, 8, seed=30))):
        lib = os.path.join(args.out, f"{name}.so")
        build(mod, lib)
        wdir = os.path.join(args.out, name)
        if os.path.isdir(wdir):
            shutil.rmtree(wdir)
        tvmjs.dump_tensor_cache(weights, wdir, encode_format="raw", show_progress=False)
        vm = relax.VirtualMachine(tvm.runtime.load_module(lib), tvm.cpu())
        x = tvm.runtime.tensor(np.array(cases[1]["x"], dtype="float32"))
        ws = [tvm.runtime.tensor(w) for w in weights.values()]
        y = vm["main"](x, *ws) if name == "weights_mlp" else vm["main"](x, ws)
        np.testing.assert_allclose(y.numpy(), np.array(cases[1]["y"], dtype="float32"),
                                   rtol=1e-5, atol=1e-6)
        print(f"wrote {lib} and {wdir}/ (= batch_mlp's outputs)")


if __name__ == "__main__":
    main()
