"""Calls from Python with every kind of argument and result, and object lifetimes: the same
behaviour through the compiled extension (tvmrt._core) and through ctypes. run_tests.sh runs
this suite both ways (TVMRT_PYTHON_EXTENSION=0 for ctypes); the extension must be the one in
use when it is built (wheels ship it)."""

import gc
import os
import sys
import threading
import unittest
from pathlib import Path

import numpy as np

import tvmrt
from tvmrt import _ffi

FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "fixtures"
WANT_EXTENSION = os.environ.get("TVMRT_PYTHON_EXTENSION", "1") != "0"


def echo():
    tvmrt.register_func("tvmrt_test.echo2", lambda x: x, override=True)
    return tvmrt.get_global_func("tvmrt_test.echo2")


def size_of():
    tvmrt.register_func("tvmrt_test.size_of", lambda *xs: len(xs[0]) + 100 * len(xs),
                        override=True)
    return tvmrt.get_global_func("tvmrt_test.size_of")


class ExtensionTests(unittest.TestCase):
    def test_the_extension_is_used_when_built(self):
        built = any((Path(tvmrt.__file__).parent).glob("_core*.so"))
        if WANT_EXTENSION and built:
            self.assertIsNotNone(_ffi._core, "the extension is built but not loaded")
            self.assertTrue(issubclass(tvmrt.Function, _ffi._core.Function))
            self.assertTrue(issubclass(tvmrt.Tensor, _ffi._core.Tensor))
        if not WANT_EXTENSION:
            self.assertIsNone(_ffi._core)
        # Either way the classes keep their names and the handle.
        f = tvmrt.get_global_func("ffi.FunctionListGlobalNames")
        self.assertIsInstance(f, tvmrt.Function)
        self.assertIsInstance(f, tvmrt.Object)
        self.assertGreater(f.handle, 0)
        self.assertEqual(f.type_index, _ffi.FUNCTION)


class ArgumentTests(unittest.TestCase):
    def test_plain_values(self):
        f = echo()
        for v in [0, 1, -(2**63), 2**63 - 1, 1.25, float("inf"), True, False, None, "x" * 100,
                  "ünïcode", b"", b"\x00raw\xff"]:
            with self.subTest(v=v):
                out = f(v)
                self.assertEqual(out, v)
                self.assertIs(type(out), type(v))
        with self.assertRaises(OverflowError):
            f(2**64)
        with self.assertRaises(OverflowError):
            f(-(2**63) - 1)
        # A NUL inside a string is kept (a string object carries the length).
        self.assertEqual(f("nul\x00inside, long enough"), "nul\x00inside, long enough")
        self.assertEqual(f("a\x00b"), "a\x00b")

    def test_values_the_package_converts(self):
        f = echo()
        self.assertEqual(f(np.int64(7)), 7)
        self.assertEqual(f(np.float32(0.5)), 0.5)
        self.assertEqual(f(bytearray(b"ab")), b"ab")
        self.assertEqual(size_of()((2, 3, 4)), 103)  # a tuple of ints travels as a shape
        self.assertEqual(f(tvmrt.cpu(0)), tvmrt.cpu(0))
        self.assertEqual(f(lambda: 5)(), 5)
        with self.assertRaises(TypeError):
            f(object())
        with self.assertRaises(TypeError):
            f(1, x=2)  # keyword arguments

    def test_many_arguments(self):
        args = [(5, 6, 7)] + list(range(19)) + [np.ones(3, "float32")] * 3
        self.assertEqual(size_of()(*args), 3 + 2300)
        args = list(range(20)) + [np.ones(3, "float32")] * 3
        arr = tvmrt.get_global_func("ffi.Array")(*args)
        self.assertEqual(arr[:20], list(range(20)))
        self.assertEqual(np.from_dlpack(arr[21]).tolist(), [1.0, 1.0, 1.0])

    def test_numpy_arrays_travel_without_copies(self):
        add = tvmrt.load_module(FIXTURES / "add_dyn.so")["add"]
        a = np.arange(8, dtype="float32")
        c = np.zeros(8, "float32")
        add(a, a, c)
        self.assertEqual(c.tolist(), (2 * a).tolist())
        # A strided view is made compact first (the kernel sees contiguous data).
        big = np.arange(16, dtype="float32")
        out = np.zeros(8, "float32")
        add(big[::2], big[::2], out)
        self.assertEqual(out.tolist(), (2 * big[::2]).tolist())
        # A read-only array still goes in (DLPack 1.x keeps the flag).
        ro = np.arange(8, dtype="float32")
        ro.flags.writeable = False
        add(ro, ro, c)
        self.assertEqual(c.tolist(), (2 * ro).tolist())

    def test_runtime_objects_and_views(self):
        t = tvmrt.from_dlpack(np.arange(4, dtype="int32"))
        f = echo()
        back = f(t)
        self.assertIsInstance(back, tvmrt.Tensor)
        self.assertEqual(back.handle, t.handle)
        self.assertEqual(np.from_dlpack(back).tolist(), [0, 1, 2, 3])

        seen = []

        @tvmrt.register_func("tvmrt_test.view_shape", override=True)
        def view_shape(x):
            seen.append(x.shape)

        # A DLTensorView (what kernels pass to callbacks) can be passed on.
        @tvmrt.register_func("tvmrt_test.forward", override=True)
        def forward(x):
            tvmrt.get_global_func("tvmrt_test.view_shape")(x)

        caller = tvmrt.get_global_func("tvmrt_test.forward")
        caller(t)
        self.assertEqual(seen, [(4,)])


class ResultTests(unittest.TestCase):
    def test_strings_bytes_and_containers(self):
        f = echo()
        self.assertEqual(f("a" * 7), "a" * 7)  # small string
        self.assertEqual(f("b" * 40), "b" * 40)  # string object
        self.assertEqual(f(b"c" * 40), b"c" * 40)
        self.assertEqual(tvmrt.get_global_func("ffi.Array")(1, "two", 3.0), [1, "two", 3.0])
        names = tvmrt.get_global_func("ffi.FunctionListGlobalNames")()
        self.assertIn("runtime.NumThreads", names)
        self.assertIsInstance(tvmrt.get_global_func("runtime.NumThreads")(), int)

    def test_errors_keep_their_kind(self):
        with self.assertRaises(ValueError):
            tvmrt.load_module(FIXTURES / "no_such.so")
        add = tvmrt.load_module(FIXTURES / "add_dyn.so")["add"]
        with self.assertRaises(TypeError) as cm:
            add(1, 2, 3)
        self.assertEqual(cm.exception.kind, "TypeError")


class LifetimeTests(unittest.TestCase):
    def test_results_release_their_objects(self):
        vm = tvmrt.VirtualMachine(tvmrt.load_module(FIXTURES / "mlp.so"))
        x = np.load(FIXTURES / "data" / "mlp.main.in0.npy")
        f = vm["main"]
        ys = [f(x) for _ in range(50)]
        refs = [sys.getrefcount(y) for y in ys]
        self.assertTrue(all(r == refs[0] for r in refs))
        # Each result is its own tensor; freeing the wrappers releases them (no crash, and the
        # memory of a numpy array taken from a result outlives the wrapper).
        arr = np.from_dlpack(ys[0])
        want = arr.copy()
        del ys
        gc.collect()
        self.assertEqual(arr.tolist(), want.tolist())

    def test_dlpack_capsules_unconsumed_and_versions(self):
        t = tvmrt.from_dlpack(np.arange(3, dtype="float32"))
        for _ in range(100):
            t.__dlpack__()  # dropped unconsumed: the export is released
            t.__dlpack__(max_version=(1, 0))
        self.assertEqual(t.__dlpack_device__(), (1, 0))
        with self.assertRaises(BufferError):
            t.__dlpack__(copy=True)
        self.assertEqual(np.from_dlpack(t).tolist(), [0.0, 1.0, 2.0])

    def test_calls_release_the_gil(self):
        # A callback called from a thread the call started would deadlock if the caller held
        # the GIL during the call.
        results = []

        @tvmrt.register_func("tvmrt_test.from_thread", override=True)
        def from_thread(v):
            results.append(v)

        @tvmrt.register_func("tvmrt_test.spawn", override=True)
        def spawn(n):
            t = threading.Thread(target=lambda: tvmrt.get_global_func("tvmrt_test.from_thread")(n))
            t.start()
            t.join(10)
            return not t.is_alive()

        self.assertTrue(tvmrt.get_global_func("tvmrt_test.spawn")(9))
        self.assertEqual(results, [9])


if __name__ == "__main__":
    unittest.main()
