"""Remote CUDA tensors and kernels over tvmrt rpc-server, through the CUDA driver's test double.

No GPU is lent to CI: the server opens tests/cuda_double/fake_cuda.c (built here with `cc`) as
its driver (TVMRT_CUDA_LIBRARY). The double's device memory is host memory and it runs the
fixtures' kernels on the host, so everything TVM 0.27's client sends for `sess.cuda(0)` is
checked end to end: device attributes, copies both ways (every dtype, 0-d, empty, MiBs),
copies between remote tensors, tests/fixtures/cuda/elementwise_ptx.so uploaded, loaded and run,
its time evaluator, and bad calls that come back as RPCError with the session still usable.
What only a real GPU shows (PTX JIT, real launches, timings) is benches/gpu/run.sh's rpc_cuda.
"""

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
import tvm
import tvm.rpc

from conftest import CONNECT_TIMEOUT_S, ROOT, SERVER_KIND, TVMRT, bounded, start_server

# The GPU machine's script holds the dtypes and the samples both use.
sys.path.insert(0, str(ROOT / "benches" / "gpu"))
from rpc_cuda import DTYPES, sample  # noqa: E402

pytestmark = pytest.mark.skipif(
    SERVER_KIND != "tvmrt",
    reason="the driver's test double is opened by tvmrt (TVMRT_CUDA_LIBRARY); TVM's own "
    "server has no CUDA in its PyPI build",
)

PTX_LIB = ROOT / "tests" / "fixtures" / "cuda" / "elementwise_ptx.so"
DOUBLE_SRC = ROOT / "tests" / "cuda_double" / "fake_cuda.c"
CALL_TIMEOUT_S = 60.0


@pytest.fixture(scope="module")
def fake_driver():
    """The driver's test double, built with cc into a temporary directory."""
    with tempfile.TemporaryDirectory(prefix="rpc_cuda_double_") as d:
        lib = Path(d) / "libfake_cuda.so"
        subprocess.run(
            ["cc", "-shared", "-fPIC", "-O1", "-o", str(lib), str(DOUBLE_SRC)], check=True
        )
        yield lib


def double_env(lib):
    return dict(os.environ, TVMRT_CUDA_LIBRARY=str(lib), FAKE_CUDA_DEVICES="1")


@pytest.fixture(scope="module")
def cuda_server(fake_driver):
    """tvmrt rpc-server whose CUDA driver is the test double."""
    # two sessions at once: a failed test's session, held by its traceback, does not keep
    # the next test out
    s = start_server(extra=["--max-sessions", "2"], env=double_env(fake_driver))
    yield s
    s.proc.stop()


@pytest.fixture
def sess(cuda_server):
    return bounded(
        lambda: tvm.rpc.connect(cuda_server.host, cuda_server.port), CONNECT_TIMEOUT_S
    )


def test_device_exists_with_attributes(sess):
    def run():
        dev = sess.cuda(0)
        assert dev.exist
        assert dev.device_name == "Fake CUDA Device 0"
        assert dev.compute_version == "8.0"
        assert dev.max_threads_per_block == 1024
        assert dev.warp_size == 32
        assert dev.multi_processor_count == 108
        assert dev.total_global_memory == 40 << 30
        # one device: the second does not exist, and says so instead of failing
        assert not sess.cuda(1).exist

    bounded(run, CALL_TIMEOUT_S)




def test_copies_every_dtype_0d_empty_and_mibs(sess):
    def run():
        dev = sess.cuda(0)
        for i, dtype in enumerate(DTYPES):
            a = sample(dtype, (3, 5, 7), i)
            r = tvm.runtime.tensor(a, dev)
            assert r.device == dev and str(r.dtype) == dtype, (r.device, dev)
            back = r.numpy()
            assert back.dtype == a.dtype and back.shape == a.shape, dtype
            np.testing.assert_array_equal(back, a, err_msg=dtype)
        s = np.array(-2.25, dtype="float64")
        r = tvm.runtime.tensor(s, dev)
        assert r.numpy().shape == () and r.numpy() == s
        e = tvm.runtime.tensor(np.zeros((4, 0), "float32"), dev)
        assert e.numpy().shape == (4, 0)
        # 9 MiB: more than one of the server's 8 MiB staging chunks each way
        big = np.random.default_rng(9).random(9 << 18, dtype=np.float32)
        np.testing.assert_array_equal(tvm.runtime.tensor(big, dev).numpy(), big)

    bounded(run, CALL_TIMEOUT_S)


def test_remote_to_remote_copies_cuda_and_cpu(sess):
    """Copies that stay on the board. TVM's client copies between two remote tensors of one
    device type itself (CopyAmongRemote) and refuses remote cpu <-> remote cuda (its
    TensorCopyFromTo check sees two non-CPU device types); those go through the board's own
    runtime.TVMTensorCopyFromTo."""

    def run():
        gpu, cpu = sess.cuda(0), sess.cpu(0)
        copy = sess.get_function("runtime.TVMTensorCopyFromTo")
        x = np.arange(3000, dtype="float32") * 0.25 - 7
        on_cpu = tvm.runtime.tensor(x, cpu)
        on_gpu = tvm.runtime.empty(x.shape, "float32", gpu)
        copy(on_cpu, on_gpu)  # cpu -> cuda, on the board
        np.testing.assert_array_equal(on_gpu.numpy(), x)
        gpu2 = tvm.runtime.empty(x.shape, "float32", gpu)
        gpu2.copyfrom(on_gpu)  # cuda -> cuda (CopyAmongRemote)
        back = tvm.runtime.empty(x.shape, "float32", cpu)
        copy(gpu2, back)  # cuda -> cpu, on the board
        np.testing.assert_array_equal(back.numpy(), x)
        local = tvm.runtime.tensor(np.zeros_like(x))
        gpu2.copyto(local)  # cuda -> the client
        np.testing.assert_array_equal(local.numpy(), x)

    bounded(run, CALL_TIMEOUT_S)


def load_elementwise(sess):
    sess.upload(str(PTX_LIB), "elementwise_ptx.so")
    return sess.load_module("elementwise_ptx.so")


def test_ptx_library_kernels_and_time_evaluator(sess):
    def run():
        dev = sess.cuda(0)
        mod = load_elementwise(sess)
        rng = np.random.default_rng(4)
        n = 1000
        a, b = rng.standard_normal((2, n)).astype("float32")
        ra, rb = tvm.runtime.tensor(a, dev), tvm.runtime.tensor(b, dev)
        rc = tvm.runtime.empty((n,), "float32", dev)
        mod["add"](ra, rb, rc)
        np.testing.assert_array_equal(rc.numpy(), a + b)
        ry = tvm.runtime.empty((n,), "float32", dev)
        mod["axpk"](ra, ry, 2.5, -3)
        np.testing.assert_array_equal(ry.numpy(), a * np.float32(2.5) + np.float32(-3))
        p, q = rng.standard_normal((2, 3, 70)).astype("float32")
        rm = tvm.runtime.empty((3, 70), "float32", dev)
        mod["mul_2d"](tvm.runtime.tensor(p, dev), tvm.runtime.tensor(q, dev), rm)
        np.testing.assert_array_equal(rm.numpy(), p * q)

        f = mod.time_evaluator("add", dev, number=4, repeat=3)
        res = f(ra, rb, rc)
        assert len(res.results) == 3
        assert all(0 < t < 1.0 for t in res.results), res.results
        np.testing.assert_array_equal(rc.numpy(), a + b)

    bounded(run, CALL_TIMEOUT_S)


def test_bad_calls_come_back_as_rpc_errors(sess):
    def run():
        gpu, cpu = sess.cuda(0), sess.cpu(0)
        mod = load_elementwise(sess)
        x = np.ones(64, "float32")
        ga, gb, gc = (tvm.runtime.tensor(x, gpu) for _ in range(3))
        cases = [
            # host tensors for a CUDA kernel
            (lambda: mod["add"](*(tvm.runtime.tensor(x, cpu) for _ in range(3))),
             "Mismatched A.device_type on argument #0"),
            # shapes that disagree
            (lambda: mod["add"](ga, gb, tvm.runtime.empty((65,), "float32", gpu)),
             "Mismatched C.shape[0] on argument #2"),
            # a device the board lacks
            (lambda: tvm.runtime.empty((4,), "float32", sess.cuda(3)), "cuda:3 does not exist"),
        ]
        for call, says in cases:
            with pytest.raises(tvm.error.RPCError) as e:
                call()
            msg = str(e.value)
            assert msg.startswith("RPCError: Error caught from RPC call:") and says in msg, msg
            # the session keeps working
            mod["add"](ga, gb, gc)
            np.testing.assert_array_equal(gc.numpy(), x + x)

    bounded(run, CALL_TIMEOUT_S)


def test_gpu_machine_part_rehearses_on_the_double(fake_driver):
    """benches/gpu/rpc_cuda.py (the GPU machine's rpc_cuda part: TVM's wire format from
    benches/rpc/raw_client.py, no TVM) passes against this tool on the double, so the part the
    H200 runs is known to work up to what only a GPU shows."""
    script = ROOT / "benches" / "gpu" / "rpc_cuda.py"
    r = subprocess.run(
        [sys.executable, str(script), "--tool", str(TVMRT), "--fake"],
        env=double_env(fake_driver),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    last = r.stdout.strip().splitlines()[-1]
    assert last.startswith("PASS rpc_cuda (test double"), r.stdout
