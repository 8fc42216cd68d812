"""MetaSchedule tunes a small matmul on tvmrt rpc-server through TVM's tracker (issue 48):
the unchanged `RPCRunner` uploads each candidate (`.tar` from the default builder, linked on
the server with its C compiler; or `.so`), fills its inputs with
`tvm.contrib.random.random_fill_for_measure`, times it with `runtime.RPCTimeEvaluator` and
`cache_flush_cpu_non_first_arg`, and cleans up."""

import os
import sys
import tempfile

import cloudpickle
import pytest
import tvm
from tvm import te
from tvm.s_tir import meta_schedule as ms

from conftest import start_server

TRIALS = 8
# The builder's workers unpickle `export_so`: send it by value, as this test module is not
# importable there.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def matmul(n=32):
    a = te.placeholder((n, n), name="A")
    b = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    c = te.compute((n, n), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    return te.create_prim_func([a, b, c])


def export_so(mod):
    path = os.path.join(tempfile.mkdtemp(), "tvm_tmp_mod.so")
    mod.export_library(path)
    return path


@pytest.mark.parametrize("artifact", ["tar", "so"])
def test_metaschedule_through_the_tracker(tracker, artifact, tmp_path):
    key = f"tvmrt-ms-{artifact}"
    srv = start_server(key=key, tracker=tracker)
    try:
        runner = ms.runner.RPCRunner(
            rpc_config=ms.runner.RPCConfig(
                tracker_host=tracker[0],
                tracker_port=tracker[1],
                tracker_key=key,
                session_timeout_sec=60,
            ),
            evaluator_config=ms.runner.EvaluatorConfig(
                number=2, repeat=2, min_repeat_ms=0, enable_cpu_cache_flush=True
            ),
            max_workers=1,
        )
        if artifact == "so":
            builder = ms.builder.LocalBuilder(f_export=export_so, max_workers=1)
        else:
            builder = ms.builder.LocalBuilder(max_workers=1)
        db = ms.tir_integration.tune_tir(
            mod=tvm.IRModule({"main": matmul()}),
            target=tvm.target.Target({"kind": "llvm", "num-cores": 1}),
            work_dir=str(tmp_path),
            max_trials_global=TRIALS,
            num_trials_per_iter=TRIALS,
            builder=builder,
            runner=runner,
            cost_model="random",
        )
        records = db.get_all_tuning_records()
        assert len(records) == TRIALS
        for r in records:
            secs = [float(s) for s in r.run_secs]
            # Measured, not the runner's failure marker (1e10 s): a 32x32 matmul runs in
            # microseconds.
            assert len(secs) == 2 and all(0 < s < 0.1 for s in secs), secs
        assert srv.proc.alive()
    finally:
        srv.proc.stop()
