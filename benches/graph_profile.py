"""The classic debug executor on TVM 0.19's runtime and on tvmrt, same model, same program
(the classic C API through ctypes, tests/fixtures/graph/record.py's runtime wrapper):
`run_individual` per-node times side by side, alternating runtimes per round.

    python3 benches/graph_profile.py TVM_RUNTIME.so TVMRT.so [MODEL] [ROUNDS]

MODEL defaults to parallel_conv (tests/fixtures/graph); TVM_NUM_THREADS applies to both.
Prints one markdown row per node: its name, the median over ROUNDS of each runtime's
run_individual(number=200, repeat=3) best repeat, in microseconds.
"""

import ctypes
import json
import os
import statistics
import struct
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
GRAPH = os.path.join(ROOT, "tests", "fixtures", "graph")
sys.path.insert(0, GRAPH)
import record  # noqa: E402


def node_times(lib, model):
    rt = record.Runtime(lib)
    mod = rt.load(os.path.join(GRAPH, model + ".so"))
    ret, _ = rt.call(rt.func(mod, "debug_create"), (record.K_STR, "default"),
                     (record.K_DEVICE, record.Device(1, 0)))
    g = ctypes.c_void_p(ret.v_handle)
    keep = record.set_inputs(rt, g, model)
    ret, code = rt.call(rt.func(g, "run_individual"), (record.K_INT, 200), (record.K_INT, 3),
                        (record.K_INT, 0), (record.K_INT, 100), (record.K_INT, 0),
                        (record.K_INT, 1))
    data, size = ctypes.cast(ret.v_handle, ctypes.POINTER(ctypes.c_size_t * 2)).contents
    blob = ctypes.string_at(data, size)
    (n,) = struct.unpack_from("<q", blob, 0)
    t = struct.unpack_from("<%dd" % (3 * n), blob, 8)
    del keep
    return [min(t[3 * i:3 * i + 3]) * 1e6 for i in range(n)]


def main():
    tvm_lib, rt_lib = sys.argv[1], sys.argv[2]
    model = sys.argv[3] if len(sys.argv) > 3 else "parallel_conv"
    rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 5
    nodes = json.load(open(os.path.join(GRAPH, model + ".json")))["nodes"]
    got = {"tvm": [], "tvmrt": []}
    for i in range(rounds):
        for which in ("tvm", "tvmrt") if i % 2 == 0 else ("tvmrt", "tvm"):
            lib = tvm_lib if which == "tvm" else rt_lib
            # A fresh process per measurement: both runtimes export the same C names.
            line = subprocess.run([sys.executable, __file__, "--child", lib, model], check=True,
                                  capture_output=True, text=True).stdout
            got[which].append(json.loads(line.strip().splitlines()[-1]))
    print(f"| node ({model}) | kernel | TVM 0.19 (us) | tvmrt (us) | tvmrt/TVM |")
    print("|---|---|---:|---:|---:|")
    for i, node in enumerate(nodes):
        if node["op"] == "null":
            continue
        tm = statistics.median(r[i] for r in got["tvm"])
        rm = statistics.median(r[i] for r in got["tvmrt"])
        name = node["attrs"]["func_name"]
        print(f"| {node['name']} | `{name}` | {tm:.2f} | {rm:.2f} | {rm / tm:.2f} |")


if __name__ == "__main__":
    if sys.argv[1] == "--child":
        print(json.dumps(node_times(sys.argv[2], sys.argv[3])))
    else:
        main()
