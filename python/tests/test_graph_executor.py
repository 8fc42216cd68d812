"""tvmrt.graph_executor on the classic model fixtures (tests/fixtures/graph, outputs recorded on
TVM v0.19.0's runtime)."""

import json
import sys
import unittest
from pathlib import Path

import numpy as np

import tvmrt
from tvmrt import graph_executor

GRAPH = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "graph"
sys.path.insert(0, str(GRAPH))
import record  # noqa: E402  (the fixtures' own reader of save_param_dict blobs)

NUMPY = {(2, 32): "float32", (2, 64): "float64", (0, 32): "int32", (0, 8): "int8",
         (1, 1): "bool"}  # TVM 0.19's uint1, one byte per element


def inputs(model):
    out = {}
    for name, dtype, shape, raw in record.read_params((GRAPH / f"{model}.inputs.bin").read_bytes()):
        out[name] = np.frombuffer(raw, dtype=NUMPY[dtype]).reshape(shape).copy()
    return out


def expected(model):
    return json.loads((GRAPH / f"{model}.expected.json").read_text())


def as_record(t):
    a = np.from_dlpack(t)
    return {"dtype": str(a.dtype), "shape": list(a.shape), "values": a.ravel().tolist()}


class GraphExecutorTests(unittest.TestCase):
    def module(self, model):
        lib = tvmrt.load_module(GRAPH / f"{model}.so")
        self.assertEqual(lib.kind, "GraphExecutorFactory")
        return graph_executor.GraphModule(lib["default"](graph_executor.CPU, 0))

    def test_every_model_matches_tvm_0_19(self):
        for model in record.MODELS:
            m = self.module(model)
            m.run(**inputs(model))
            got = [as_record(m.get_output(i)) for i in range(m.get_num_outputs())]
            self.assertEqual(got, expected(model)["outputs"], model)

    def test_load_params_and_output_into_an_array(self):
        m = self.module("mlp")
        m.set_input("x", inputs("mlp")["x"])
        m.load_params((GRAPH / "mlp.override.params").read_bytes())
        m.run()
        out = np.empty((1, 3), "float32")
        m.get_output(0, out)
        self.assertEqual(out.ravel().tolist(), expected("mlp")["after_load_params"][0]["values"])

    def test_input_info_and_indexes(self):
        m = self.module("mlp")
        shapes, dtypes = m.get_input_info()
        self.assertEqual(list(shapes), ["x", "w1", "b1", "w2", "b2"])
        self.assertEqual(shapes["w1"], (8, 4))
        self.assertEqual(dtypes["x"], "float32")
        self.assertEqual(m.get_input_index("b1"), 2)
        self.assertEqual(m.get_input_index("nope"), -1)
        self.assertEqual(m.get_num_inputs(), 5)
        w1 = np.from_dlpack(m.get_input("w1"))
        self.assertEqual(w1.shape, (8, 4))

    def test_create_from_json_and_library(self):
        lib = tvmrt.load_module(GRAPH / "two_outputs.so")
        graph = (GRAPH / "two_outputs.json").read_text()
        m = graph_executor.create(graph, lib.imports[0])
        m.run(**inputs("two_outputs"))
        self.assertEqual(as_record(m.get_output(1)), expected("two_outputs")["outputs"][1])

    def test_bad_input_raises_tvm_error_kinds(self):
        m = self.module("mlp")
        with self.assertRaises(ValueError) as e:
            m.set_input("x", np.zeros((1, 4), "int32"))
        self.assertIn("dtype int32 differs", str(e.exception))
        with self.assertRaises(IndexError):
            m.get_output(3)
        with self.assertRaises(ValueError):
            m.load_params(b"\x00" * 5)


if __name__ == "__main__":
    unittest.main()
