"""tvmrt on CUDA from Python, on a machine without a GPU: the test double of the NVIDIA driver
(tests/cuda_double/fake_cuda.c, compiled here with cc) stands in for libcuda.so.1; it keeps
"device memory" in host memory and runs the fixtures' elementwise kernels on the host, so values
are checked against TVM's CPU outputs (tests/fixtures/cuda, made by apache-tvm 0.27). Source
modules are compiled by NVRTC from the pinned `cuda` venv (.ci/venv.sh cuda).

The driver is opened once per process, so this module points tvmrt at the double when it is
imported, before any test runs."""

import glob
import os
import subprocess
import tempfile
import unittest
from pathlib import Path

import numpy as np

import tvmrt

REPO = Path(__file__).resolve().parents[2]
CU = REPO / "tests" / "fixtures" / "cuda"


def _setup():
    out = Path(tempfile.mkdtemp(prefix="tvmrt_fake_cuda_")) / "libfake_cuda.so"
    subprocess.run(
        [os.environ.get("CC", "cc"), "-shared", "-fPIC", "-O1", "-o", str(out),
         str(REPO / "tests" / "cuda_double" / "fake_cuda.c")],
        check=True,
    )
    os.environ["TVMRT_CUDA_LIBRARY"] = str(out)
    os.environ["FAKE_CUDA_DEVICES"] = "1"
    if "TVMRT_NVRTC_LIBRARY" not in os.environ:
        found = glob.glob(str(REPO / ".venv/cuda/lib/python3*/site-packages/nvidia/cuda_nvrtc/lib/"
                              "libnvrtc.so.12"))
        if found:
            os.environ["TVMRT_NVRTC_LIBRARY"] = found[0]


_setup()


def npy(name):
    return np.load(CU / "data" / name)


class CudaTests(unittest.TestCase):
    def test_devices(self):
        self.assertEqual(tvmrt.cuda(), (2, 0))
        self.assertEqual(tvmrt.cuda(1), tvmrt.device("cuda:1"))
        self.assertEqual(repr(tvmrt.cuda()), "device(type='cuda', index=0)")

    def test_tensors_to_and_from_numpy(self):
        a = np.arange(12, dtype="float32").reshape(3, 4)
        t = tvmrt.tensor(a, tvmrt.cuda())
        self.assertEqual(t.device, tvmrt.cuda())
        np.testing.assert_array_equal(t.numpy(), a)
        back = t.copyto(tvmrt.cpu())
        np.testing.assert_array_equal(np.from_dlpack(back), a)
        pinned = t.copyto(tvmrt.device("cuda_host"))
        np.testing.assert_array_equal(pinned.numpy(), a)
        with self.assertRaises(ValueError) as cm:
            tvmrt.empty((5,), "float32", tvmrt.cuda(4))
        self.assertIn("cuda:4 does not exist: the driver sees 1 CUDA device", str(cm.exception))

    def test_kernels_of_every_format(self):
        dev = tvmrt.cuda()
        a, b = npy("add.n1000.in0.npy"), npy("add.n1000.in1.npy")
        for name in ["elementwise.so", "elementwise_ptx.so", "elementwise_cubin.so",
                     "elementwise_fatbin.so"]:
            lib = tvmrt.load_module(CU / name)
            c = tvmrt.empty(a.shape, "float32", dev)
            lib["add"](tvmrt.tensor(a, dev), tvmrt.tensor(b, dev), c)
            np.testing.assert_allclose(c.numpy(), npy("add.n1000.out0.npy"), rtol=1e-6,
                                       err_msg=name)
            x = npy("axpk.n100.in0.npy")
            y = tvmrt.empty(x.shape, "float32", dev)
            lib["axpk"](tvmrt.tensor(x, dev), y, 2.5, -3)
            np.testing.assert_allclose(y.numpy(), npy("axpk.n100.out0.npy"), rtol=1e-6)
        # A host array to a CUDA library: TVM's own device check, as an error.
        with self.assertRaises(ValueError) as cm:
            lib["add"](a, b, np.empty_like(a))
        self.assertIn("device_type", str(cm.exception))

    def test_relax_model_on_cuda(self):
        vm = tvmrt.VirtualMachine(tvmrt.load_module(CU / "mlp_ptx.so"), tvmrt.cuda())
        x = npy("mlp.main.in0.npy")
        y = vm["main"](tvmrt.tensor(x, tvmrt.cuda()))
        self.assertEqual((y.device, y.shape), (tvmrt.cuda(), (1, 8)))
        vm.set_input("main", x)
        vm.invoke_stateful("main")
        self.assertEqual(vm.get_outputs("main").device, tvmrt.cuda())

    def test_nvrtc_found_in_pip_packages(self):
        import sys

        from tvmrt import _ffi

        root = Path(tempfile.mkdtemp(prefix="tvmrt_pip_"))
        lib = root / "nvidia" / "cuda_nvrtc" / "lib"
        lib.mkdir(parents=True)
        for name in ["libnvrtc.so.12", "libnvrtc-builtins.so.12.9", "libnvrtc.alt.so.12"]:
            (lib / name).write_bytes(b"")
        (root / "nvidia" / "cuda_nvrtc" / "__init__.py").write_text("")
        saved = {k: v for k, v in sys.modules.items() if k == "nvidia" or k.startswith("nvidia.")}
        for k in saved:
            del sys.modules[k]
        sys.path.insert(0, str(root))
        try:
            self.assertEqual(_ffi.find_pip_nvrtc(), str(lib / "libnvrtc.so.12"))
        finally:
            sys.path.remove(str(root))
            for k in [k for k in sys.modules if k == "nvidia" or k.startswith("nvidia.")]:
                del sys.modules[k]
            sys.modules.update(saved)

    def test_dlpack_keeps_cuda_tensors_on_the_device(self):
        t = tvmrt.tensor(np.arange(4, dtype="float32"), tvmrt.cuda())
        self.assertEqual(t.__dlpack_device__(), (2, 0))
        seen = {}

        class Producer:
            """A CUDA producer (as a PyTorch tensor): tvmrt names the stream it will use."""

            def __dlpack_device__(self):
                return (2, 0)

            def __dlpack__(self, stream=None, max_version=None):
                seen["stream"] = stream
                return t.__dlpack__(max_version=max_version)

        back = tvmrt.from_dlpack(Producer())
        self.assertEqual(seen["stream"], 1, "CUDA's legacy default stream")
        self.assertEqual(back.device, tvmrt.cuda())
        self.assertEqual(back._dl.data, t._dl.data, "the same device memory, no copy")
        np.testing.assert_array_equal(back.numpy(), np.arange(4, dtype="float32"))
        with self.assertRaises(Exception):
            np.from_dlpack(t)  # numpy takes CPU memory only


if __name__ == "__main__":
    unittest.main()
