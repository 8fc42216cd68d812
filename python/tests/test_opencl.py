"""tvmrt on OpenCL from Python: devices, tensors to and from numpy, kernels and Relax models
apache-tvm 0.27 built for OpenCL (tests/fixtures/opencl), and the classic graph executor on
OpenCL; the expected outputs are TVM's (its CPU runtime on the same IR, or TVM 0.19's OpenCL
runtime for the graph model). Needs an OpenCL driver (CI installs POCL)."""

import json
import sys
import unittest
from pathlib import Path

import numpy as np

import tvmrt
from tvmrt import graph_executor

ROOT = Path(__file__).resolve().parents[2] / "tests" / "fixtures"
CL = ROOT / "opencl"
sys.path.insert(0, str(ROOT / "graph"))
import record  # noqa: E402  (the fixtures' reader of save_param_dict blobs)


def npy(name):
    return np.load(CL / "data" / name)


class OpenCLTests(unittest.TestCase):
    def test_devices(self):
        self.assertEqual(tvmrt.opencl(), (4, 0))
        self.assertEqual(tvmrt.opencl(1), tvmrt.device("opencl:1"))
        self.assertEqual(repr(tvmrt.opencl()), "device(type='opencl', index=0)")

    def test_tensors_to_and_from_numpy(self):
        a = np.arange(12, dtype="float32").reshape(3, 4)
        t = tvmrt.tensor(a, tvmrt.opencl())
        self.assertEqual(t.device, tvmrt.opencl())
        self.assertEqual((t.shape, t.dtype), ((3, 4), "float32"))
        np.testing.assert_array_equal(t.numpy(), a)
        back = t.copyto(tvmrt.cpu())
        self.assertEqual(back.device, tvmrt.cpu())
        np.testing.assert_array_equal(np.from_dlpack(back), a)
        t.copyfrom(a * 2)
        np.testing.assert_array_equal(t.numpy(), a * 2)
        with self.assertRaises(ValueError):
            t.copyfrom(np.zeros((4, 3), "float32"))
        e = tvmrt.empty((5,), "int32", tvmrt.opencl())
        self.assertEqual(e.numpy().shape, (5,))
        with self.assertRaises(ValueError) as cm:
            tvmrt.empty((5,), "int32", tvmrt.opencl(9))
        self.assertIn("OpenCL device 9 does not exist", str(cm.exception))

    def test_kernels_on_device_tensors(self):
        lib = tvmrt.load_module(CL / "elementwise.so")
        dev = tvmrt.opencl()
        a, b = npy("add.n1000.in0.npy"), npy("add.n1000.in1.npy")
        c = tvmrt.empty(a.shape, "float32", dev)
        lib["add"](tvmrt.tensor(a, dev), tvmrt.tensor(b, dev), c)
        np.testing.assert_allclose(c.numpy(), npy("add.n1000.out0.npy"), rtol=1e-6)
        x = npy("axpk.n100.in0.npy")
        y = tvmrt.empty(x.shape, "float32", dev)
        lib["axpk"](tvmrt.tensor(x, dev), y, 2.5, -3)
        np.testing.assert_allclose(y.numpy(), npy("axpk.n100.out0.npy"), rtol=1e-5, atol=1e-6)
        # numpy arrays (host memory) given to an OpenCL kernel: its own device check.
        with self.assertRaises(ValueError) as cm:
            lib["add"](a, b, np.empty_like(a))
        self.assertIn("device_type", str(cm.exception))

    def test_relax_vm_on_opencl(self):
        dev = tvmrt.opencl()
        vm = tvmrt.VirtualMachine(tvmrt.load_module(CL / "mlp.so"), dev)
        x = npy("mlp.main.in0.npy")
        want = npy("mlp.main.out0.npy")
        y = vm["main"](tvmrt.tensor(x, dev))
        self.assertEqual(y.device, dev)
        np.testing.assert_allclose(y.numpy(), want, rtol=1e-5, atol=1e-5)
        vm.set_input("main", x)  # a host array, uploaded
        vm.invoke_stateful("main")
        np.testing.assert_allclose(vm.get_outputs("main").numpy(), want, rtol=1e-5, atol=1e-5)
        cnn = tvmrt.VirtualMachine(tvmrt.load_module(CL / "cnn.so"), dev)
        out = cnn["main"](tvmrt.tensor(npy("cnn.main.in0.npy"), dev))
        np.testing.assert_allclose(out.numpy(), npy("cnn.main.out0.npy"), rtol=1e-5, atol=1e-5)

    def test_classic_graph_executor_on_opencl(self):
        lib = tvmrt.load_module(CL / "graph_cl.so")
        m = graph_executor.GraphModule(lib["default"](tvmrt.opencl()))
        [(name, _, shape, raw)] = record.read_params((CL / "graph_cl.inputs.bin").read_bytes())
        m.set_input(name, np.frombuffer(raw, "float32").reshape(shape))
        m.run()
        want = json.loads((CL / "graph_cl.expected.json").read_text())
        for i in range(m.get_num_outputs()):
            out = m.get_output(i)
            self.assertEqual(out.device, tvmrt.opencl())
            self.assertEqual(out.numpy().ravel().tolist(), want["outputs"][i]["values"])


if __name__ == "__main__":
    unittest.main()
