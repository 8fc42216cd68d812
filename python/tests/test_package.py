"""The package as a user installs it (the wheel) or runs it from a checkout: which library and
command-line tool it uses, the modules it ships, and TVM's names (devices, DLPack, the Relax
VM's calls, error kinds) on real TVM-built fixtures."""

import os
import pkgutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

import numpy as np

import tvmrt
from tvmrt import _cli, _ffi

CHECKOUT_PACKAGE = Path(__file__).resolve().parents[1] / "tvmrt"
FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "fixtures"
DATA = FIXTURES / "data"


def npy(name):
    return np.load(DATA / name)


def package_dir() -> Path:
    return Path(tvmrt.__file__).resolve().parent


def child_env() -> dict:
    """The environment of a child `python -m tvmrt`: from a checkout, with the package on
    its path (an install finds it by itself)."""
    if installed():
        return dict(os.environ)
    return {**os.environ, "PYTHONPATH": str(package_dir().parent)}


def installed() -> bool:
    """True for a wheel's install: the package carries its own library."""
    return (package_dir() / "lib" / "libtvmrt.so").is_file()


class PackageTests(unittest.TestCase):
    def test_library_is_the_bundled_one_when_installed(self):
        library = Path(tvmrt.library_path()).resolve()
        if installed():
            self.assertEqual(library, package_dir() / "lib" / "libtvmrt.so")
            self.assertNotIn(CHECKOUT_PACKAGE.parent.parent, library.parents)
        else:
            # From a checkout: $TVMRT_LIBRARY, else this repository's (or $CARGO_TARGET_DIR's)
            # target/{release,debug} build.
            env = os.environ.get("TVMRT_LIBRARY")
            if env:
                self.assertEqual(library, Path(env).resolve())
            else:
                self.assertIn(library.parent.name, ("release", "debug"))
        self.assertEqual(library.name, "libtvmrt.so")

    def test_every_module_of_the_source_tree_ships(self):
        def names(path):
            return sorted(m.name for m in pkgutil.walk_packages([str(path)]))

        source = names(CHECKOUT_PACKAGE)
        self.assertIn("graph_executor", source)
        self.assertIn("__main__", source)
        self.assertEqual(names(package_dir()), source)

    def test_command_line_tool(self):
        tool = _cli.tool_path()
        if installed():
            self.assertEqual(tool, package_dir() / "bin" / "tvmrt")
        self.assertTrue(os.access(tool, os.X_OK), tool)
        mlp = FIXTURES / "graph" / "mlp.so"
        commands = [[sys.executable, "-m", "tvmrt"]]
        script = Path(sys.executable).parent / "tvmrt"  # the wheel's console script
        if installed():
            self.assertTrue(script.is_file(), f"pip did not install the tvmrt script {script}")
        if script.is_file():
            commands.append([str(script)])
        for command in commands:
            with self.subTest(command=command[-1]):
                out = subprocess.run(
                    command + ["inspect", str(mlp)], capture_output=True, text=True, timeout=60, env=child_env()
                )
                self.assertEqual(out.returncode, 0, out.stderr)
                self.assertIn("GraphExecutorFactory", out.stdout)
                self.assertIn("graph: 7 nodes", out.stdout)
                bad = subprocess.run(
                    command + ["inspect", "/nonexistent/model.so"],
                    capture_output=True,
                    text=True,
                    timeout=60,
                    env=child_env(),
                )
                self.assertEqual(bad.returncode, 1)
                self.assertIn("cannot read `/nonexistent/model.so`", bad.stderr)

    def test_command_line_tool_runs_a_relax_model(self):
        with tempfile.TemporaryDirectory() as out:
            run = subprocess.run(
                [sys.executable, "-m", "tvmrt", "run", str(FIXTURES / "mlp.so"), "main"]
                + ["-i", str(DATA / "mlp.main.in0.npy"), "--save", out],
                capture_output=True,
                text=True,
                timeout=60,
                env=child_env(),
            )
            self.assertEqual(run.returncode, 0, run.stderr)
            np.testing.assert_allclose(
                np.load(Path(out) / "output0.npy"), npy("mlp.main.out0.npy"), rtol=1e-5, atol=1e-6
            )


class DeviceTests(unittest.TestCase):
    def test_cpu_and_device(self):
        dev = tvmrt.cpu()
        self.assertIsInstance(dev, tvmrt.Device)
        self.assertEqual(dev, (1, 0))
        self.assertEqual((dev.device_type, dev.device_id, dev.index), (1, 0, 0))
        self.assertEqual(repr(tvmrt.cpu(3)), "device(type='cpu', index=3)")
        self.assertEqual(tvmrt.device("cpu:2"), (1, 2))
        self.assertEqual(tvmrt.device("cuda", 1), (2, 1))
        self.assertEqual(tvmrt.device(1), tvmrt.cpu())
        with self.assertRaises(ValueError):
            tvmrt.device("tpu")
        with self.assertRaises(ValueError):
            tvmrt.device("cpu:x")
        with self.assertRaises(TypeError):
            tvmrt.device(1.5)

    def test_a_device_crosses_c_as_a_device(self):
        tvmrt.register_func("tvmrt_test.device_echo", lambda d: d, override=True)
        echo = tvmrt.get_global_func("tvmrt_test.device_echo")
        out = echo(tvmrt.device("cuda", 3))
        self.assertIsInstance(out, tvmrt.Device)
        self.assertEqual(out, (2, 3))
        # A plain tuple of ints is a shape, as in tvm_ffi.
        seen = []
        tvmrt.register_func("tvmrt_test.record", seen.append, override=True)
        record = tvmrt.get_global_func("tvmrt_test.record")
        record((2, 3))
        record(tvmrt.cpu(1))
        self.assertEqual([type(v) for v in seen], [tuple, tvmrt.Device])
        self.assertEqual(seen, [(2, 3), (1, 1)])

    def test_graph_factory_takes_a_device_as_tvm_does(self):
        # `lib["default"](tvm.cpu())`, the way TVM creates a graph executor.
        lib = tvmrt.load_module(FIXTURES / "graph" / "mlp.so")
        executor = lib["default"](tvmrt.cpu())
        self.assertEqual(executor.kind, "GraphExecutor")
        self.assertEqual(executor["get_num_outputs"](), 1)


class RelaxVMTests(unittest.TestCase):
    def setUp(self):
        self.vm = tvmrt.VirtualMachine(tvmrt.load_module(FIXTURES / "tuple_ret.so"), tvmrt.cpu())
        self.a = npy("tuple_ret.main.in0.npy")
        self.b = npy("tuple_ret.main.in1.npy")

    def test_outputs_through_dlpack(self):
        outs = self.vm["main"](self.a, self.b)
        for i, t in enumerate(outs):
            self.assertEqual(t.device, tvmrt.cpu())
            self.assertEqual(t.__dlpack_device__(), (1, 0))
            self.assertIs(tvmrt.from_dlpack(t), t)
            np.testing.assert_allclose(
                np.from_dlpack(t), npy(f"tuple_ret.main.out{i}.npy"), rtol=1e-5, atol=1e-6
            )
        # A tvmrt tensor is an input too, without going through numpy.
        again = self.vm["main"](tvmrt.from_dlpack(self.a), tvmrt.from_dlpack(self.b))
        np.testing.assert_array_equal(np.from_dlpack(again[2]), np.from_dlpack(outs[2]))

    def test_stateful_outputs_by_index(self):
        self.vm.set_input("main", self.a, self.b)
        self.vm.invoke_stateful("main")
        for i in range(3):
            np.testing.assert_allclose(
                self.vm.get_output("main", i).numpy(),
                npy(f"tuple_ret.main.out{i}.npy"),
                rtol=1e-5,
                atol=1e-6,
            )

    def test_errors_have_tvm_kinds(self):
        self.vm.set_input("main", self.a, self.b)
        self.vm.invoke_stateful("main")
        with self.assertRaises(IndexError) as cm:
            self.vm.get_output("main", 7)
        self.assertEqual(str(cm.exception), "Invalid index (7 >= 3).")
        self.assertEqual(cm.exception.kind, "IndexError")
        with self.assertRaises(AttributeError):
            self.vm["no_such_function"]
        with self.assertRaises(ValueError) as cm:
            self.vm["main"](self.a)
        self.assertIn("expects 2 arguments", str(cm.exception))
        with self.assertRaises(TypeError):
            self.vm["main"]("x", "y")
        with self.assertRaises(ValueError) as cm:
            self.vm.invoke_stateful("no_such_function")
        self.assertIn("no_such_function", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
