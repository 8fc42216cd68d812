"""The runtime library functions compiled models call, against their references: numpy for
`relax.run.nonzero/unique` (TVM registers them from Python over numpy, python/tvm/relax/op/set.py)
and numpy's stable sorts for `tvm.contrib.sort.*` (TVM's C++ sorts with std::stable_sort, ties
in input order; topk breaks ties by the smaller index)."""

import unittest

import numpy as np

import tvmrt

RNG = np.random.default_rng(7)


def fn(name):
    return tvmrt.get_global_func(name)


def ints(shape, lo=-3, hi=4, dtype="int32"):
    return RNG.integers(lo, hi, size=shape).astype(dtype)


class NonzeroTests(unittest.TestCase):
    def test_matches_numpy(self):
        cases = [ints((3, 4)), ints((2, 3, 2)), np.array([0.0, -0.0, np.nan, 2.5], "float32"),
                 np.array(5, "int64"), np.array(0, "int8"), np.zeros((2, 0, 3), "float32"),
                 np.array([True, False, True])]
        for x in cases:
            got = np.from_dlpack(fn("relax.run.nonzero")(x))
            want = np.stack(np.atleast_1d(x).nonzero(), axis=0)
            self.assertEqual(got.dtype, np.int64)
            np.testing.assert_array_equal(got, want)


class ShapeAndViewTests(unittest.TestCase):
    def test_shape_to_tensor_takes_a_tuple_as_a_shape(self):
        got = np.from_dlpack(fn("relax.run.shape_to_tensor")((2, 0, 7)))
        self.assertEqual(got.dtype, np.int64)
        np.testing.assert_array_equal(got, [2, 0, 7])
        with self.assertRaises(TypeError):
            fn("relax.run.shape_to_tensor")(3)

    def test_lists_and_dicts_pass_as_arrays_and_maps(self):
        # As tvm_ffi converts them: a list (or a tuple that is not all ints) is an ffi.Array,
        # a dict an ffi.Map, nested ones too.
        self.assertEqual(fn("ffi.ArraySize")([1, "a", [2.0, None]]), 3)
        self.assertEqual(fn("ffi.ArraySize")(("a", 1)), 2)
        self.assertEqual(fn("ffi.ArrayGetItem")([10, [20, 30]], 0), 10)
        self.assertEqual(fn("ffi.MapSize")({"a": 1, "b": [1, 2]}), 2)
        self.assertEqual(fn("ffi.MapGetItem")({"a": 1, "b": 5}, "b"), 5)
        # runtime.config_threadpool takes TVM's Array<String> of CPU ids.
        with self.assertRaisesRegex(ValueError, "CPU 9999 is not one this process may run on"):
            fn("runtime.config_threadpool")(-2, 1, ["9999"])
        with self.assertRaises(TypeError):
            fn("ffi.ArraySize")([object()])

    def test_create_view_reinterprets_bytes(self):
        halves = np.array([1.0, -2.0, 0.5, 3.0], "float16")
        raw = tvmrt.from_dlpack(halves.view("uint16"))
        view = fn("runtime.TVMTensorCreateView")(raw, (2,), "float16", 4)
        np.testing.assert_array_equal(np.from_dlpack(view), halves[2:])
        with self.assertRaises(ValueError):
            fn("runtime.TVMTensorCreateView")(raw, (4,), "float16", 2)


class UniqueTests(unittest.TestCase):
    def reference(self, x, is_sorted, ri, rinv, rc, axis):
        res = np.unique(x, return_index=True, return_inverse=True, return_counts=True, axis=axis)
        values, index, inverse, counts = res
        inverse = inverse.reshape(-1)
        if not is_sorted:
            order = np.argsort(index, kind="stable")
            values = np.take(values, order, axis=0 if axis is None else axis)
            remap = np.empty_like(order)
            remap[order] = np.arange(len(order))
            inverse = remap[inverse]
            index, counts = index[order], counts[order]
        outs = [values]
        for want, v in ((ri, index), (rinv, inverse), (rc, counts)):
            if want:
                outs.append(v)
        return outs

    def test_matches_numpy(self):
        xs = [(np.array([2, 1, 1, 3, 4, 3], "int64"), None),
              (np.array([2.5, -1.0, 2.5, 0.0, -0.0], "float32"), None),
              (ints((4, 3), 0, 2), 0), (ints((3, 4), 0, 2), 1), (ints((2, 3, 2), 0, 2), -1),
              (ints((6,), 0, 3, "int8"), None)]
        for x, axis in xs:
            for flags in [(0, 0, 0), (1, 0, 0), (0, 1, 0), (0, 0, 1), (1, 1, 1)]:
                for is_sorted in (True, False):
                    args = [x, is_sorted, *flags] + ([] if axis is None else [axis])
                    got = fn("relax.run.unique")(*args)
                    got = [got] if not isinstance(got, list) else got
                    want = self.reference(x, is_sorted, *flags, axis)
                    self.assertEqual(len(got), len(want))
                    for g, w in zip(got, want):
                        g = np.from_dlpack(g)
                        self.assertEqual(g.dtype, w.dtype if g is not got[0] else x.dtype)
                        np.testing.assert_array_equal(g, w, err_msg=f"{x} {axis} {flags} {is_sorted}")


class SortTests(unittest.TestCase):
    def test_argsort_and_sort(self):
        for x in [ints((4, 5)), RNG.standard_normal((3, 4, 2)).astype("float32").round(1),
                  ints((7,), -2, 2, "int64")]:
            for axis in range(-x.ndim, x.ndim):
                for ascend in (True, False):
                    key = x if ascend else -x.astype("float64")
                    want = np.argsort(key, axis=axis, kind="stable")
                    for out_dtype in ("int32", "int64", "float32"):
                        out = np.zeros(x.shape, out_dtype)
                        fn("tvm.contrib.sort.argsort")(x, out, axis, ascend)
                        np.testing.assert_array_equal(out, want.astype(out_dtype))
                    out = np.zeros_like(x)
                    fn("tvm.contrib.sort.sort")(x, out, axis, ascend)
                    np.testing.assert_array_equal(out, np.take_along_axis(x, want, axis))

    def test_topk(self):
        x = ints((3, 6), -2, 3, "float32")
        for k in (1, 3, 6, 0):
            kk = k if k >= 1 else 6
            for ascend in (True, False):
                key = x if ascend else -x
                order = np.argsort(key, axis=1, kind="stable")[:, :kk]
                values, indices = np.zeros((3, kk), "float32"), np.zeros((3, kk), "int64")
                fn("tvm.contrib.sort.topk")(x, values, indices, k, 1, "both", ascend)
                np.testing.assert_array_equal(indices, order)
                np.testing.assert_array_equal(values, np.take_along_axis(x, order, 1))
                only = np.zeros((3, kk), "int32")
                fn("tvm.contrib.sort.topk")(x, only, k, -1, "indices", ascend)
                np.testing.assert_array_equal(only, order)

    def test_bad_arguments(self):
        x = ints((2, 3))
        with self.assertRaises(ValueError):
            fn("tvm.contrib.sort.argsort")(x, np.zeros((3, 2), "int32"), 0, True)
        with self.assertRaises(ValueError):
            fn("tvm.contrib.sort.argsort")(x, np.zeros((2, 3), "int32"), 2, True)
        with self.assertRaises(ValueError):
            fn("tvm.contrib.sort.topk")(x, np.zeros((2, 1), "int32"), 1, 1, "bogus", True)
        with self.assertRaises(TypeError):
            fn("relax.run.unique")(x, True)


if __name__ == "__main__":
    unittest.main()
