"""MetaSchedule's tuning of a small matmul through a tracker, shared by tests/rpc and the
board test (tests/rpc_board)."""

import os
import sys
import tempfile

import cloudpickle
import tvm
from tvm import te
from tvm.s_tir import meta_schedule as ms

TRIALS = 8
# The builder's workers unpickle the export functions: send them by value, as this module is
# not importable there.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def matmul(n=32):
    a = te.placeholder((n, n), name="A")
    b = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    c = te.compute((n, n), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    return te.create_prim_func([a, b, c])


def so_exporter(cc=None):
    """An export function writing a `.so` (linked on the host, with `cc` when given)."""

    def export(mod):
        path = os.path.join(tempfile.mkdtemp(), "tvm_tmp_mod.so")
        if cc:
            from tvm.support import cc as tvm_cc

            mod.export_library(path, fcompile=tvm_cc.cross_compiler(cc))
        else:
            mod.export_library(path)
        return path

    return export


def tune(tracker, key, work_dir, target=None, export=None):
    """Tunes `matmul` for TRIALS trials on the boards registered as `key`; returns each
    record's measured seconds. `export=None` is MetaSchedule's default: a `.tar` the server
    links."""
    runner = ms.runner.RPCRunner(
        rpc_config=ms.runner.RPCConfig(
            tracker_host=tracker[0],
            tracker_port=tracker[1],
            tracker_key=key,
            session_timeout_sec=120,
        ),
        evaluator_config=ms.runner.EvaluatorConfig(
            number=2, repeat=2, min_repeat_ms=0, enable_cpu_cache_flush=True
        ),
        max_workers=1,
    )
    # The builder's default 30 s per candidate is too short on a loaded 2-core CI machine
    # (a host-side build timeout shows as a failed trial, as a failed run would).
    if export is None:
        builder = ms.builder.LocalBuilder(max_workers=1, timeout_sec=300)
    else:
        builder = ms.builder.LocalBuilder(f_export=export, max_workers=1, timeout_sec=300)
    db = ms.tir_integration.tune_tir(
        mod=tvm.IRModule({"main": matmul()}),
        target=target or tvm.target.Target({"kind": "llvm", "num-cores": 1}),
        work_dir=str(work_dir),
        max_trials_global=TRIALS,
        num_trials_per_iter=TRIALS,
        builder=builder,
        runner=runner,
        cost_model="random",
    )
    return [[float(s) for s in r.run_secs] for r in db.get_all_tuning_records()]


def check_measured(costs):
    """Every trial measured: two positive times, not the runner's failure marker (1e10 s);
    a 32x32 matmul runs in well under 0.1 s even under emulation."""
    assert len(costs) == TRIALS, costs
    for secs in costs:
        assert len(secs) == 2 and all(0 < s < 0.1 for s in secs), secs
