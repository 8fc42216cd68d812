"""TVM's runtime (apache-tvm 0.27) driving the same MLC-LLM library one request after another,
as MLC's engine drives it (embed + batch_prefill, then batch_decode per token; argmax with the
stop token masked, as the server's benchmark requests ask): the reference of benches/serve.

    python tvm_reference.py MODEL_DIR LIB PROMPTS_JSON
"""

import json
import sys
import time

import numpy as np
import tvm
from tvm import relax
from tvm.runtime import ShapeTuple


def main():
    model_dir, lib, prompts_path = sys.argv[1:4]
    with open(prompts_path, encoding="utf-8") as f:
        spec = json.load(f)
    dev = tvm.cpu()
    vm = relax.VirtualMachine(tvm.runtime.load_module(lib), dev)
    meta = json.loads(vm["_metadata"]())
    tvm.get_global_func("vm.builtin.tensor_cache.load")(model_dir, dev.dlpack_device_type(), 0)
    params = tvm.get_global_func("vm.builtin.param_array_from_cache_by_name")(
        [p["name"] for p in meta["params"]])
    kv = vm["create_tir_paged_kv_cache"](ShapeTuple([16]), ShapeTuple([8704]),
                                         ShapeTuple([128]), ShapeTuple([16]), ShapeTuple([0]))
    begin = tvm.get_global_func("vm.builtin.kv_state_begin_forward")
    end = tvm.get_global_func("vm.builtin.kv_state_end_forward")
    add = tvm.get_global_func("vm.builtin.kv_state_add_sequence")
    remove = tvm.get_global_func("vm.builtin.kv_state_remove_sequence")
    embed, prefill, decode = vm["embed"], vm["batch_prefill"], vm["batch_decode"]

    def pick(logits):
        row = logits.numpy().reshape(-1)
        row[2] = -np.inf
        return int(np.argmax(row))

    def run(ids, n):
        add(kv, 0)
        begin(kv, ShapeTuple([0]), ShapeTuple([len(ids)]))
        e = embed(tvm.runtime.tensor(np.array(ids, dtype="int32"), dev), params)
        e = tvm.runtime.tensor(e.numpy().reshape(1, len(ids), -1), dev)
        pos = tvm.runtime.tensor(np.array([len(ids) - 1], dtype="int32"), dev)
        logits, _ = prefill(e, pos, kv, params)
        end(kv)
        out = [pick(logits)]
        steps = []
        while len(out) < n:
            t = time.perf_counter()
            begin(kv, ShapeTuple([0]), ShapeTuple([1]))
            e = embed(tvm.runtime.tensor(np.array([out[-1]], dtype="int32"), dev), params)
            e = tvm.runtime.tensor(e.numpy().reshape(1, 1, -1), dev)
            logits, _ = decode(e, kv, params)
            end(kv)
            out.append(pick(logits))
            steps.append(time.perf_counter() - t)
        remove(kv, 0)
        return steps

    run(spec["prompts"][0], spec["new_tokens"])  # warm up
    start = time.perf_counter()
    steps = []
    for p in spec["prompts"]:
        steps += run(p, spec["new_tokens"])
    wall = time.perf_counter() - start
    tokens = len(spec["prompts"]) * spec["new_tokens"]
    print(f"TVM runtime, {len(spec['prompts'])} requests one after another: {tokens / wall:.0f} "
          f"output tokens/s; decode step (Python driver) median "
          f"{np.median(steps) * 1e6:.1f} us")


if __name__ == "__main__":
    main()
