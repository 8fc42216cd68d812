"""A small Relax CNN whose kernels run in parallel tasks, compiled by Apache TVM 0.27: the model
of the Relax half of the parallel benchmark (benches/run_parallel_relax.sh).

    python parallel_relax.py OUT_DIR     (the onnx venv's python: apache-tvm 0.27, numpy)

Writes OUT_DIR/pcnn.so, OUT_DIR/data/pcnn.main.in0.npy and pcnn.main.out0.npy (TVM's own
output). The model: conv2d 8 -> 16 (3x3, pad 1) + bias + relu, conv2d 16 -> 16 + relu,
max_pool2d 2x2, dense 1024 -> 10, on a [1, 8, 16, 16] input; after legalization and fusion, the
outermost loop of every kernel with more than one iteration is made `parallel` (one
TVMBackendParallelLaunch per kernel call), as TVM's x86 schedules do.
"""

import os
import sys

import numpy as np
import tvm
from tvm import relax


def model():
    rng = np.random.default_rng(27)
    w1 = (rng.standard_normal((8, 4, 3, 3)) * 0.2).astype("float32")
    b1 = (rng.standard_normal((1, 8, 1, 1)) * 0.1).astype("float32")
    w2 = (rng.standard_normal((8, 8, 3, 3)) * 0.1).astype("float32")
    wf = (rng.standard_normal((288, 10)) * 0.05).astype("float32")
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((1, 4, 12, 12), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            h = bb.emit(relax.op.nn.conv2d(x, relax.const(w1), padding=(1, 1)))
            h = bb.emit(relax.op.nn.relu(relax.op.add(h, relax.const(b1))))
            h = bb.emit(relax.op.nn.relu(relax.op.nn.conv2d(h, relax.const(w2), padding=(1, 1))))
            h = bb.emit(relax.op.nn.max_pool2d(h, pool_size=(2, 2), strides=(2, 2)))
            h = bb.emit(relax.op.reshape(h, (1, 288)))
            y = bb.emit_output(relax.op.matmul(h, relax.const(wf)))
        bb.emit_func_output(y)
    return bb.get(), rng.standard_normal((1, 4, 12, 12)).astype("float32")


def parallelize(mod):
    """Marks the outermost spatial loop of each kernel's blocks `parallel`."""
    out = mod
    for gv, func in mod.functions_items():
        if not isinstance(func, tvm.tirx.PrimFunc):
            continue
        sch = tvm.s_tir.Schedule(func)
        for block in sch.get_child_blocks(sch.get_sblock("root")):
            loops = sch.get_loops(block)
            if len(loops) >= 2:
                try:
                    loops = [sch.fuse(loops[0], loops[1])] + list(loops[2:])
                except Exception:  # a reduction loop among the first two
                    pass
            try:
                sch.parallel(loops[0])
            except Exception:  # not a spatial loop
                pass
        out[gv] = sch.mod["main"].with_attr("global_symbol", gv.name_hint)
    return out


def main():
    out_dir = sys.argv[1]
    os.makedirs(os.path.join(out_dir, "data"), exist_ok=True)
    mod, x = model()
    target = tvm.target.Target("llvm")
    with target:
        mod = relax.transform.LegalizeOps()(mod)
        mod = relax.transform.AnnotateTIROpPattern()(mod)
        mod = relax.transform.FuseOps()(mod)
        mod = relax.transform.FuseTIR()(mod)
        mod = parallelize(mod)
    ex = tvm.compile(mod, target=target)
    lib = os.path.join(out_dir, "pcnn.so")
    ex.export_library(lib)
    vm = relax.VirtualMachine(tvm.runtime.load_module(lib), tvm.cpu())
    y = vm["main"](tvm.runtime.tensor(x)).numpy()
    np.save(os.path.join(out_dir, "data", "pcnn.main.in0.npy"), x)
    np.save(os.path.join(out_dir, "data", "pcnn.main.out0.npy"), y)
    print(lib)


if __name__ == "__main__":
    main()
