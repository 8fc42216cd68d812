"""tvmrt on Vulkan from Python: devices, tensors to and from numpy, and the library whose host
code apache-tvm 0.27 compiled for target vulkan (tests/fixtures/vulkan/add_scale.so, its SPIR-V
from the fixture's GLSL); the Relax MLP and CNN and a classic graph on Vulkan; expected outputs from numpy or TVM's CPU
build, recorded with the fixtures. Needs a Vulkan
driver (CI installs lavapipe)."""

import unittest
from pathlib import Path

import numpy as np

import tvmrt

VK = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "vulkan"


def npy(name):
    return np.load(VK / "data" / name)


class VulkanTests(unittest.TestCase):
    def test_devices(self):
        self.assertEqual(tvmrt.vulkan(), (7, 0))
        self.assertEqual(tvmrt.vulkan(1), tvmrt.device("vulkan:1"))
        self.assertEqual(repr(tvmrt.vulkan()), "device(type='vulkan', index=0)")

    def test_tensors_to_and_from_numpy(self):
        a = np.arange(12, dtype="float32").reshape(3, 4)
        t = tvmrt.tensor(a, tvmrt.vulkan())
        self.assertEqual(t.device, tvmrt.vulkan())
        np.testing.assert_array_equal(t.numpy(), a)
        back = t.copyto(tvmrt.cpu())
        np.testing.assert_array_equal(np.from_dlpack(back), a)
        t.copyfrom(a * 2)
        np.testing.assert_array_equal(t.numpy(), a * 2)
        with self.assertRaises(ValueError) as cm:
            tvmrt.empty((5,), "int32", tvmrt.vulkan(9))
        self.assertIn("Vulkan device 9 does not exist", str(cm.exception))

    def test_tvm_host_code_on_vulkan(self):
        lib = tvmrt.load_module(VK / "add_scale.so")
        dev = tvmrt.vulkan()
        a, b = npy("add_scale.n1000.in0.npy"), npy("add_scale.n1000.in1.npy")
        c = tvmrt.empty(a.shape, "float32", dev)
        lib["add_scale"](tvmrt.tensor(a, dev), tvmrt.tensor(b, dev), 0.75, c)
        np.testing.assert_array_equal(c.numpy(), npy("add_scale.n1000.out0.npy"))
        with self.assertRaises(ValueError) as cm:
            lib["add_scale"](a, b, 0.75, np.empty_like(a))
        self.assertIn("device_type", str(cm.exception))

    def test_relax_vm_on_vulkan(self):
        dev = tvmrt.vulkan()
        vm = tvmrt.VirtualMachine(tvmrt.load_module(VK / "mlp.so"), dev)
        x, want = npy("mlp.main.in0.npy"), npy("mlp.main.out0.npy")
        y = vm["main"](tvmrt.tensor(x, dev))
        self.assertEqual(y.device, dev)
        np.testing.assert_allclose(y.numpy(), want, rtol=1e-5, atol=1e-5)
        vm.set_input("main", x)  # a host array, uploaded
        vm.invoke_stateful("main")
        np.testing.assert_allclose(vm.get_outputs("main").numpy(), want, rtol=1e-5, atol=1e-5)

    def test_relax_cnn_on_vulkan(self):
        dev = tvmrt.vulkan()
        vm = tvmrt.VirtualMachine(tvmrt.load_module(VK / "cnn.so"), dev)
        x, want = npy("cnn.main.in0.npy"), npy("cnn.main.out0.npy")
        y = vm["main"](tvmrt.tensor(x, dev))
        self.assertEqual(y.shape, (1, 10))
        np.testing.assert_allclose(y.numpy(), want, rtol=1e-5, atol=1e-5)

    def test_graph_executor_on_vulkan(self):
        from tvmrt import graph_executor

        dev = tvmrt.vulkan()
        graph = (VK / "graph.json").read_text()
        gm = graph_executor.create(graph, tvmrt.load_module(VK / "graph_ops.so"), dev)
        gm.set_input("x", npy("graph.x.npy"))
        gm.set_input("w", npy("graph.w.npy"))
        gm.run()
        out = gm.get_output(0)
        self.assertEqual(out.device, dev)
        np.testing.assert_array_equal(out.numpy(), npy("graph.out0.npy"))
        with self.assertRaises(ValueError) as cm:
            gm.set_input("x", np.zeros(3, "float32"))
        self.assertIn("holds 3", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
