"""Tests of the tvmrt Python package against libtvmrt.so and real TVM-built fixtures."""

import gc
import os
import unittest
from pathlib import Path

import tvmrt

try:
    import numpy as np
except ImportError:  # numpy is optional for the package, needed for tensor tests
    np = None

FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "fixtures"
DATA = FIXTURES / "data"
needs_numpy = unittest.skipIf(np is None, "numpy is not installed")


def load(name):
    return tvmrt.load_module(FIXTURES / name)


def npy(name):
    return np.load(DATA / name)


class LibraryTests(unittest.TestCase):
    def test_library_is_found(self):
        path = tvmrt.library_path()
        self.assertTrue(os.path.basename(path).startswith("libtvmrt"), path)

    def test_module_kind_and_lookup(self):
        m = load("add_dyn.so")
        self.assertEqual(m.kind, "library")
        self.assertEqual(m.imports, [])
        self.assertIn("add", m)
        self.assertNotIn("sub", m)
        self.assertIsNone(m.get_function("sub"))
        with self.assertRaises(AttributeError) as cm:
            m["sub"]
        self.assertIn("sub", str(cm.exception))

    def test_missing_file(self):
        with self.assertRaises(ValueError) as cm:
            tvmrt.load_module("/nonexistent/lib.so")
        self.assertIn("/nonexistent/lib.so", str(cm.exception))
        self.assertEqual(cm.exception.kind, "ValueError")

    def test_missing_global(self):
        self.assertIsNone(tvmrt.get_global_func("no.such.function", allow_missing=True))
        with self.assertRaises(ValueError):
            tvmrt.get_global_func("no.such.function")


@needs_numpy
class KernelTests(unittest.TestCase):
    def test_add_matches_tvm_bit_for_bit(self):
        add = load("add_dyn.so")["add"]
        a, b = npy("add_dyn.add.n1000.in0.npy"), npy("add_dyn.add.n1000.in1.npy")
        c = np.empty_like(a)
        self.assertIsNone(add(a, b, c))
        np.testing.assert_array_equal(c, npy("add_dyn.add.n1000.out0.npy"))

    def test_main_is_the_entry(self):
        m = load("add_dyn.so")
        a = np.arange(5, dtype="float32")
        c = np.zeros(5, dtype="float32")
        m["main"](a, a, c)
        np.testing.assert_array_equal(c, 2 * a)

    def test_dtypes(self):
        m = load("dtypes.so")
        for fn, dtype in [
            ("add_float16", "float16"),
            ("add_int8", "int8"),
            ("add_uint8", "uint8"),
            ("add_int64", "int64"),
            ("or_bool", "bool"),
        ]:
            with self.subTest(fn=fn):
                case = f"dtypes.{fn}.n17"
                a, b = npy(f"{case}.in0.npy"), npy(f"{case}.in1.npy")
                self.assertEqual(a.dtype, np.dtype(dtype))
                c = np.empty_like(a)
                m[fn](a, b, c)
                np.testing.assert_array_equal(c, npy(f"{case}.out0.npy"))

    def test_non_contiguous_input_is_made_compact(self):
        add = load("add_dyn.so")["add"]
        base = np.arange(20, dtype="float32")
        a = base[::2]
        c = np.empty(10, dtype="float32")
        add(a, a, c)
        np.testing.assert_array_equal(c, 2 * a)

    def test_parallel_kernel_with_workspace(self):
        f = load("workspace.so")["rows_reverse_parallel"]
        a = npy("workspace.rows_reverse_parallel.8x1024.in0.npy")
        c = np.empty_like(a)
        f(a, c)
        np.testing.assert_array_equal(c, npy("workspace.rows_reverse_parallel.8x1024.out0.npy"))

    def test_kernel_errors_have_tvm_kinds(self):
        add = load("add_dyn.so")["add"]
        a = np.zeros(4, "float32")
        with self.assertRaises(ValueError) as cm:
            add(a, np.zeros(5, "float32"), np.zeros(4, "float32"))
        self.assertTrue(
            str(cm.exception).startswith("Mismatched B.shape[0] on argument #1 when calling:"),
            str(cm.exception),
        )
        with self.assertRaises(TypeError) as cm:
            add(a, a)
        self.assertTrue(str(cm.exception).startswith("Expected 3 arguments"), str(cm.exception))
        add_i32 = load("dtypes.so")["add_int32"]
        with self.assertRaises(TypeError) as cm:
            add_i32(np.zeros(4, "int64"), np.zeros(4, "int32"), np.zeros(4, "int32"))
        self.assertIn("Mismatched A.dtype on argument #0", str(cm.exception))
        self.assertEqual(cm.exception.kind, "TypeError")
        with self.assertRaises(TypeError) as cm:
            add(1, a, a)
        self.assertIn("Mismatched type on argument #0", str(cm.exception))


class CallbackTests(unittest.TestCase):
    def test_values_round_trip_through_c(self):
        @tvmrt.register_func("tvmrt_test.echo", override=True)
        def echo(x):
            return x

        f = tvmrt.get_global_func("tvmrt_test.echo")
        for v in [0, -7, 2**62, 2.5, -0.0, True, False, None, "", "short", "héllo wörld, longer"]:
            with self.subTest(v=v):
                out = f(v)
                self.assertEqual(out, v)
                self.assertIs(type(out), type(v))
        self.assertEqual(f(b"\x00\x01bytes"), b"\x00\x01bytes")
        with self.assertRaises(OverflowError):
            f(2**63)
        if np is not None:
            self.assertEqual(f(np.int32(-5)), -5)
            self.assertEqual(f(np.float32(0.5)), 0.5)

    def test_several_arguments_and_result(self):
        tvmrt.register_func("tvmrt_test.sum", lambda *xs: sum(xs), override=True)
        self.assertEqual(tvmrt.get_global_func("tvmrt_test.sum")(1, 2, 3.5), 6.5)
        self.assertIn("tvmrt_test.sum", tvmrt.list_global_funcs())

    def test_python_callable_as_argument(self):
        @tvmrt.register_func("tvmrt_test.apply", override=True)
        def apply(f, x):
            return f(x)

        self.assertEqual(tvmrt.get_global_func("tvmrt_test.apply")(lambda v: v * 2, 21), 42)

    def test_errors_cross_c_with_their_kind(self):
        class MyCustomError(Exception):
            pass

        @tvmrt.register_func("tvmrt_test.fail", override=True)
        def fail(kind):
            if kind == "value":
                raise ValueError("bad value")
            if kind == "key":
                raise KeyError("k")
            raise MyCustomError("custom")

        f = tvmrt.get_global_func("tvmrt_test.fail")
        with self.assertRaises(ValueError) as cm:
            f("value")
        self.assertEqual(str(cm.exception), "bad value")
        with self.assertRaises(KeyError):
            f("key")
        with self.assertRaises(tvmrt.TVMError) as cm:
            f("custom")
        self.assertEqual(cm.exception.kind, "MyCustomError")
        self.assertEqual(type(cm.exception).__name__, "MyCustomError")
        self.assertIn("custom", str(cm.exception))

    def test_register_requires_override(self):
        tvmrt.register_func("tvmrt_test.once", lambda: 1, override=True)
        with self.assertRaises(Exception):
            tvmrt.register_func("tvmrt_test.once", lambda: 2)
        self.assertEqual(tvmrt.get_global_func("tvmrt_test.once")(), 1)

    @needs_numpy
    def test_tensor_results(self):
        @tvmrt.register_func("tvmrt_test.arange", override=True)
        def arange(n):
            return np.arange(n, dtype="float32")

        t = tvmrt.get_global_func("tvmrt_test.arange")(6)
        self.assertIsInstance(t, tvmrt.Tensor)
        self.assertEqual((t.shape, t.dtype), ((6,), "float32"))
        np.testing.assert_array_equal(np.from_dlpack(t), np.arange(6, dtype="float32"))
        np.testing.assert_array_equal(t.numpy(), np.arange(6, dtype="float32"))

    @needs_numpy
    def test_dlpack_shares_memory(self):
        a = np.arange(4, dtype="int32")
        t = tvmrt.from_dlpack(a)
        self.assertEqual((t.shape, t.dtype, t.device), ((4,), "int32", (1, 0)))
        view = np.from_dlpack(t)
        view[0] = 42
        self.assertEqual(a[0], 42)


@needs_numpy
class CompiledCodeCallsPythonTests(unittest.TestCase):
    """`outer` (compiled by TVM) calls the global function "inner" through the runtime."""

    def run_outer(self, inner):
        tvmrt.register_func("inner", inner, override=True)
        m = None
        try:
            m = load("two_funcs.so")
            a = npy("two_funcs.outer.with_global_inner.n16.in0.npy")
            b = np.zeros_like(a)
            m["outer"](a, b)
            return b
        finally:
            # Compiled code caches the function it found for as long as the library is loaded:
            # unload it so the next test looks "inner" up again.
            m = None
            gc.collect()
            tvmrt.get_global_func("ffi.FunctionRemoveGlobal")("inner")

    def test_python_inner(self):
        seen = []

        def inner(a, b):
            seen.append((type(a).__name__, a.shape, a.dtype))
            np.from_dlpack(b)[:] = 2 * np.from_dlpack(a)

        b = self.run_outer(inner)
        np.testing.assert_array_equal(b, npy("two_funcs.outer.with_global_inner.n16.out0.npy"))
        self.assertEqual(len(seen), 1)
        self.assertEqual(seen[0][1:], ((16,), "float32"))

    def test_python_error_reaches_the_caller(self):
        def inner(a, b):
            raise IndexError("inner failed on purpose")

        with self.assertRaises(IndexError) as cm:
            self.run_outer(inner)
        self.assertIn("inner failed on purpose", str(cm.exception))


@needs_numpy
class RelaxTests(unittest.TestCase):
    def setUp(self):
        if tvmrt.get_global_func(
            "ffi.Module.load_from_bytes.relax.VMExecutable", allow_missing=True
        ) is None and tvmrt.get_global_func(
            "runtime.module.loadbinary_relax.VMExecutable", allow_missing=True
        ) is None:
            self.skipTest("this libtvmrt has no Relax VM")

    def test_mlp_main(self):
        exe = load("mlp.so")
        self.assertEqual(exe.kind, "relax.VMExecutable")
        self.assertEqual([m.kind for m in exe.imports], ["library"])
        vm = tvmrt.VirtualMachine(exe)
        y = vm["main"](npy("mlp.main.in0.npy"))
        np.testing.assert_allclose(
            np.from_dlpack(y), npy("mlp.main.out0.npy"), rtol=1e-5, atol=1e-6
        )

    def test_tuple_result_is_a_list(self):
        vm = tvmrt.VirtualMachine(load("tuple_ret.so"))
        outs = vm["main"](npy("tuple_ret.main.in0.npy"), npy("tuple_ret.main.in1.npy"))
        self.assertIsInstance(outs, list)
        self.assertEqual([t.shape for t in outs], [(2, 3), (2, 3), (3, 2)])
        for i, t in enumerate(outs):
            np.testing.assert_allclose(
                t.numpy(), npy(f"tuple_ret.main.out{i}.npy"), rtol=1e-5, atol=1e-6
            )

    def test_stateful_calls_as_tvm_names_them(self):
        vm = tvmrt.VirtualMachine(load("tuple_ret.so"), tvmrt.cpu())
        a, b = npy("tuple_ret.main.in0.npy"), npy("tuple_ret.main.in1.npy")
        vm.set_input("main", a, b)
        vm.invoke_stateful("main")
        outs = vm.get_outputs("main")
        self.assertEqual(len(outs), 3)
        for i, t in enumerate(outs):
            np.testing.assert_allclose(
                np.from_dlpack(t), npy(f"tuple_ret.main.out{i}.npy"), rtol=1e-5, atol=1e-6
            )
        np.testing.assert_allclose(
            np.from_dlpack(vm.get_output("main", 2)), npy("tuple_ret.main.out2.npy"),
            rtol=1e-5, atol=1e-6,
        )
        with self.assertRaises(ValueError):
            tvmrt.VirtualMachine(load("mlp.so"), (10, 0))  # ROCm: no back end in tvmrt
        with self.assertRaises(ValueError):
            vm.get_outputs("nope")

    def test_kernel_through_imports(self):
        exe = load("mlp.so")
        out = np.empty((1, 32), "float32")
        exe["relu"](npy("mlp.kernel.relu.in0.npy"), out)
        np.testing.assert_allclose(out, npy("mlp.kernel.relu.out0.npy"), rtol=1e-5, atol=1e-6)


if __name__ == "__main__":
    unittest.main()
