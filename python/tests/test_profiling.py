"""Per-kernel timing from Python: the Relax VM's `profile` (a VM made with profile=True) and the
classic debug executor (tvmrt.debug_executor), whose per-node outputs and profile calls match
what TVM 0.19's debug executor gave (tests/fixtures/graph/*.expected.json, "debug")."""

import json
import sys
import unittest
from pathlib import Path

import numpy as np

import tvmrt
from tvmrt import debug_executor
from tvmrt.profiling import Report

FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "fixtures"
GRAPH = FIXTURES / "graph"
sys.path.insert(0, str(GRAPH))
import record  # noqa: E402  (the fixtures' own reader of save_param_dict blobs)

NUMPY = {(2, 32): "float32", (1, 1): "bool"}


def inputs(model):
    return {name: np.frombuffer(raw, dtype=NUMPY[dt]).reshape(shape).copy()
            for name, dt, shape, raw in record.read_params((GRAPH / f"{model}.inputs.bin").read_bytes())}


class VmProfileTests(unittest.TestCase):
    def test_report_per_kernel(self):
        vm = tvmrt.VirtualMachine(tvmrt.load_module(FIXTURES / "mlp.so"), tvmrt.cpu(), profile=True)
        x = np.load(FIXTURES / "data" / "mlp.main.in0.npy")
        report = vm.profile("main", x)
        self.assertIsInstance(report, Report)
        names = [c["Name"] for c in report.calls]
        for k in ["matmul", "add", "relu", "matmul1", "add1"]:
            self.assertIn(k, names)
        self.assertTrue(all(c["Duration (us)"] > 0 for c in report.calls))
        self.assertEqual(report.configuration["Executor"], "VM")
        table = str(report)
        self.assertTrue(table.startswith("Name"), table)
        self.assertIn("matmul1", table)
        self.assertIn("Configuration", table)
        self.assertIn("Argument Shapes", report.csv().splitlines()[0])
        again = Report.from_json(report.json())
        self.assertEqual([c["Name"] for c in again.calls], names)
        # The model still gives its output afterwards.
        want = np.load(FIXTURES / "data" / "mlp.main.out0.npy")
        np.testing.assert_allclose(np.from_dlpack(vm["main"](x)), want, rtol=1e-5)

    def test_plain_vm_has_no_profile(self):
        vm = tvmrt.VirtualMachine(tvmrt.load_module(FIXTURES / "mlp.so"))
        with self.assertRaises(AttributeError):
            vm.profile("main", np.zeros((1, 16), "float32"))


class DebugExecutorTests(unittest.TestCase):
    def module(self, model):
        lib = tvmrt.load_module(GRAPH / f"{model}.so")
        m = debug_executor.GraphModuleDebug(lib["debug_create"]("default", tvmrt.cpu()))
        m.set_input(**inputs(model))
        return m

    def test_node_outputs_times_and_profile_match_tvm_0_19(self):
        model = "parallel_conv"
        want = json.loads((GRAPH / f"{model}.expected.json").read_text())["debug"]
        m = self.module(model)
        for i, node in enumerate(want["node_outputs"]):
            a = np.from_dlpack(m.debug_get_output(i))
            self.assertEqual(a.ravel().tolist(), node["values"], f"node {i}")
        times = m.run_individual(number=2, repeat=2)
        self.assertEqual(len(times), len(want["node_outputs"]))
        self.assertEqual([i for i, t in enumerate(times) if t[0] > 0], want["timed_nodes"])
        self.assertEqual(len(m.run_individual_node(6, number=1, repeat=3)), 3)
        m.execute_node(8)
        last = np.from_dlpack(m.get_node_output(8, 0))
        self.assertEqual(last.ravel().tolist(), want["last_node_output"]["values"])
        report = m.profile()
        calls = [[c["Name"], c["Argument Shapes"], c["Hash"], c["Count"]] for c in report.calls]
        self.assertEqual(calls, want["profile_calls"])
        self.assertEqual(report.configuration["Executor"], "Graph")

    def test_create_from_json_and_output_into_an_array(self):
        model = "bool_model"
        lib = tvmrt.load_module(GRAPH / f"{model}.so")
        m = debug_executor.create((GRAPH / f"{model}.json").read_text(), lib.imports[0])
        m.set_input(**inputs(model))
        out = np.zeros((2, 4), bool)
        m.debug_get_output("greater", out)
        want = json.loads((GRAPH / f"{model}.expected.json").read_text())["debug"]
        self.assertEqual(out.ravel().tolist(), want["node_outputs"][4]["values"])
        with self.assertRaises(ValueError):
            m.debug_get_output("nope")


if __name__ == "__main__":
    unittest.main()
