#!/usr/bin/env python3
"""The tiny LLM of tests/fixtures/llm on cuda:0 and on the CPU, same run, through the tvmrt
Python package: greedy decoding of greedy.txt's prompt with each, the way MLC-LLM's driver does
it (weights from the tensor cache on the model's device, the model's
create_tir_paged_kv_cache, and per step embed, vm.builtin.reshape,
vm.builtin.kv_state_begin_forward, prefill or decode, vm.builtin.kv_state_end_forward).

    python benches/cuda/llm.py [--library PATH/libtvmrt.so] [--fake] [--tolerance 1e-3]

Libraries: tests/fixtures/llm/model.so (llvm, the CPU run) and tests/fixtures/cuda/llm_model.so
(TVM's CUDA source, compiled by tvmrt with NVRTC at first use) and llm_model_ptx.so (NVRTC's PTX)
(tests/fixtures/cuda/gen_llm.py); weights tests/fixtures/llm/weights. Prints one PASS/FAIL line
per check:
- each run's greedy tokens equal the ones TVM's runtime recorded (greedy.txt);
- each CUDA run's tokens equal the CPU run's;
- each CUDA run's logits (every row of every step) within `tolerance * max |logit|` of the CPU
  run's, with the figure printed.
Exits nonzero on any failure.

--fake runs against the test double of the driver (TVMRT_CUDA_LIBRARY names it): its "device"
computes only elementwise kernels and matmuls, so the CUDA runs are fed TVM's recorded tokens
and only their running without error is checked; values are reported as not compared.
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

from tally import Tally

ROOT = Path(__file__).resolve().parents[2]
LLM = ROOT / "tests" / "fixtures" / "llm"
CUDA = ROOT / "tests" / "fixtures" / "cuda"


def read_ids(line):
    return [int(t) for t in line.strip().split(",") if t]


def param_names(weights):
    meta = json.loads((weights / "tensor-cache.json").read_text())
    return [r["name"] for shard in meta["records"] for r in shard["records"]]


def greedy(tvmrt, np, library, dev, prompt, count, forced=None):
    """Greedy decoding of `prompt` for `count` tokens on `dev`; returns (tokens, logits per step
    as float32 [n, vocab] host arrays, seconds). With `forced`, each step's input is that token
    list's instead of the model's own argmax (the test double computes no real values)."""
    g = tvmrt.get_global_func
    vm = tvmrt.VirtualMachine(tvmrt.load_module(library), dev)
    g("vm.builtin.tensor_cache.load")(str(LLM / "weights"), dev[0], dev[1])
    params = g("vm.builtin.param_array_from_cache_by_name_unpacked")(
        *param_names(LLM / "weights"))
    # The parameter array holds its tensors; the cache is global, cleared for the next run.
    g("vm.builtin.tensor_cache.clear")()
    begin, end = g("vm.builtin.kv_state_begin_forward"), g("vm.builtin.kv_state_end_forward")
    reshape = g("vm.builtin.reshape")
    # max batch 1, context 64, prefill chunk 64, page size 16, no sliding window
    cache = vm["create_tir_paged_kv_cache"]((1,), (64,), (64,), (16,), (0,))
    g("vm.builtin.kv_state_add_sequence")(cache, 0)
    tokens, logits = [], []
    step_in = list(prompt)
    t0 = time.perf_counter()
    for step in range(count):
        n = len(step_in)
        ids = tvmrt.tensor(np.array(step_in, dtype="int32"), dev)
        emb = vm["embed"](ids, params)
        decode = step > 0
        emb = reshape(emb, (1, 1, emb.shape[-1]) if decode else (1, n, emb.shape[-1]))
        begin(cache, (0,), (1 if decode else n,))
        out = vm["decode" if decode else "prefill"](emb, cache, params)
        end(cache)
        lg = out[0].numpy().reshape(-1, out[0].shape[-1]).astype("float32")
        logits.append(lg)
        tok = int(np.argmax(lg[-1]))
        tokens.append(tok)
        step_in = [forced[step] if forced is not None else tok]
    seconds = time.perf_counter() - t0
    g("vm.builtin.kv_state_remove_sequence")(cache, 0)
    return tokens, logits, seconds


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--library", help="libtvmrt.so to test (default: target/release)")
    ap.add_argument("--fake", action="store_true", help="the driver is the test double")
    ap.add_argument("--tolerance", type=float, default=1e-3,
                    help="largest logit difference from the CPU, relative to max |logit|")
    args = ap.parse_args()
    os.environ.setdefault(
        "TVMRT_LIBRARY", args.library or str(ROOT / "target" / "release" / "libtvmrt.so"))
    sys.path.insert(0, str(ROOT / "python"))
    import numpy as np
    import tvmrt

    lines = (LLM / "greedy.txt").read_text().splitlines()
    prompt, want = read_ids(lines[0]), read_ids(lines[1])
    tally = Tally()
    report = tally.report

    def run(name, library, dev, forced=None):
        try:
            return greedy(tvmrt, np, library, dev, prompt, len(want), forced)
        except Exception as e:  # noqa: BLE001 (each run reports its own failure)
            report(False, f"llm {name} runs", str(e).splitlines()[0] if str(e) else repr(e))
            return None

    cpu = run("cpu", LLM / "model.so", tvmrt.cpu(0))
    if cpu is not None:
        report(cpu[0] == want, "llm cpu greedy tokens == TVM's (greedy.txt)",
               f"{len(want)} tokens" if cpu[0] == want else f"got {cpu[0]}, TVM's {want}")
    for fname in ("llm_model.so", "llm_model_ptx.so"):
        name = f"cuda:0 {fname}"
        gpu = run(name, CUDA / fname, tvmrt.cuda(0), want if args.fake else None)
        if gpu is None:
            continue
        tokens, logits, seconds = gpu
        report(True, f"llm {name} runs",
               f"{len(want)} steps (prompt {len(prompt)}) in {seconds * 1e3:.1f} ms")
        if args.fake:
            report(True, f"llm {name} values",
                   "not compared (the test double does not compute this model)")
            continue
        report(tokens == want, f"llm {name} greedy tokens == TVM's (greedy.txt)",
               f"{len(want)} tokens" if tokens == want else f"got {tokens}, TVM's {want}")
        if cpu is None:
            report(False, f"llm {name} vs cpu", "no CPU run to compare with")
            continue
        report(tokens == cpu[0], f"llm {name} greedy tokens == cpu's")
        # Steps are comparable while both runs were fed the same tokens.
        same = next((i for i, (a, b) in enumerate(zip(tokens, cpu[0])) if a != b), len(tokens))
        steps = min(same + 1, len(logits))
        worst = 0.0
        for a, b in zip(logits[:steps], cpu[1][:steps]):
            scale = float(np.max(np.abs(b))) or 1.0
            worst = max(worst, float(np.max(np.abs(a - b))) / scale)
        report(worst <= args.tolerance, f"llm {name} logits vs cpu",
               f"max |diff| / max |logit| = {worst:.3g} over {steps} steps "
               f"(tolerance {args.tolerance:g})")
    return tally.finish("cuda llm")


if __name__ == "__main__":
    sys.exit(main())
