"""MetaSchedule tunes a small matmul on tvmrt rpc-server through TVM's tracker (issue 48):
the unchanged `RPCRunner` uploads each candidate (`.tar` from the default builder, linked on
the server with its C compiler; or `.so`), fills its inputs with
`tvm.contrib.random.random_fill_for_measure`, times it with `runtime.RPCTimeEvaluator` and
`cache_flush_cpu_non_first_arg`, and cleans up."""

import pytest

from conftest import start_server
from tuning import check_measured, so_exporter, tune


@pytest.mark.parametrize("artifact", ["tar", "so"])
def test_metaschedule_through_the_tracker(tracker, artifact, tmp_path):
    key = f"tvmrt-ms-{artifact}"
    srv = start_server(key=key, tracker=tracker)
    try:
        export = so_exporter() if artifact == "so" else None
        check_measured(tune(tracker, key, tmp_path, export=export))
        assert srv.proc.alive()
    finally:
        srv.proc.stop()
