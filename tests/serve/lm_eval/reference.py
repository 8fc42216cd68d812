"""What lm-evaluation-harness (0.4.13, `local-completions`) should report for the tasks of this
folder against `tvmrt serve` on the MLC-LLM fixture, computed on TVM's own runtime (apache-tvm
0.27.0.post1) driving the same library, with the fixture's tokenizer (the `tokenizers`
package):

    python reference.py MODEL_DIR LIB MAX_LENGTH > expected.json

Every request lm-eval makes is rebuilt here from its documented rules and scored as a fresh
sequence, the prompt prefilled with `batch_verify` (every position's logits) in chunks of
`prefill_chunk_size`, log-softmax in float64:
- multiple choice: context = the question, continuation = " " + choice; the pair is encoded
  whole and split at the length of the context's own encoding (trailing spaces of the context
  move to the continuation); the loglikelihood is the sum of the continuation tokens'
  log-probabilities, greedy when each is its position's argmax;
- rolling loglikelihood (lm-eval's API models work to MAX_LENGTH - 1 tokens, one being kept for
  the generated token: call it L): the text's tokens in disjoint windows of at most L - 1
  predicted tokens, the first conditioned on the prefix token (the BOS, else the EOS), each
  later one on the tokens before it that fit in L; the document's loglikelihood is the sum;
- generation: the prompt's greedy tokens (at most max_gen_toks, up to the EOS), decoded with
  special tokens skipped.
Run by hand (it needs TVM); tests/serve/test_lm_eval.py compares lm-eval's samples with it.
"""

import json
import os
import re
import sys

import numpy as np
import tvm
from tokenizers import Tokenizer
from tvm import relax
from tvm.runtime import ShapeTuple

HERE = os.path.dirname(os.path.abspath(__file__))


def docs(name):
    with open(os.path.join(HERE, name), encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


class Scorer:
    def __init__(self, model_dir, lib_path):
        dev = tvm.cpu()
        self.dev = dev
        self.vm = relax.VirtualMachine(tvm.runtime.load_module(lib_path), dev)
        self.meta = json.loads(self.vm["_metadata"]())
        tvm.get_global_func("vm.builtin.tensor_cache.load")(
            model_dir, dev.dlpack_device_type(), 0)
        self.params = tvm.get_global_func("vm.builtin.param_array_from_cache_by_name")(
            [p["name"] for p in self.meta["params"]])
        self.kv = self.vm["create_tir_paged_kv_cache"](
            ShapeTuple([4]), ShapeTuple([self.meta["context_window_size"]]),
            ShapeTuple([self.meta["prefill_chunk_size"]]), ShapeTuple([16]), ShapeTuple([0]))
        g = tvm.get_global_func
        self.begin, self.end = g("vm.builtin.kv_state_begin_forward"), g("vm.builtin.kv_state_end_forward")
        self.add, self.remove = g("vm.builtin.kv_state_add_sequence"), g("vm.builtin.kv_state_remove_sequence")

    def embed(self, ids):
        e = self.vm["embed"](tvm.runtime.tensor(np.array(ids, dtype="int32"), self.dev), self.params)
        return tvm.runtime.tensor(e.numpy().reshape(1, len(ids), -1), self.dev)

    def logits(self, ids):
        """Every position's logits of `ids` prefilled as a fresh sequence."""
        self.add(self.kv, 0)
        rows, chunk = [], self.meta["prefill_chunk_size"]
        for at in range(0, len(ids), chunk):
            part = ids[at:at + chunk]
            self.begin(self.kv, ShapeTuple([0]), ShapeTuple([len(part)]))
            rows.append(self.vm["batch_verify"](self.embed(part), self.kv, self.params)[0].numpy()[0])
            self.end(self.kv)
        self.remove(self.kv, 0)
        return np.concatenate(rows).astype(np.float64)

    def score(self, inp, ctxlen):
        """lm-eval's (loglikelihood, is_greedy) of inp[ctxlen:] given what precedes it."""
        logits = self.logits(inp)
        lse = logits.max(axis=1) + np.log(np.exp(logits - logits.max(axis=1, keepdims=True)).sum(axis=1))
        total, greedy = 0.0, True
        for j in range(ctxlen, len(inp)):
            total += logits[j - 1, inp[j]] - lse[j - 1]
            greedy &= int(np.argmax(logits[j - 1])) == inp[j]
        return total, greedy

    def greedy(self, ids, n, stop):
        """Up to n greedy tokens after `ids` (TVM's batch_prefill / batch_decode), cut before `stop`."""
        self.add(self.kv, 0)
        chunk = self.meta["prefill_chunk_size"]
        for at in range(0, len(ids), chunk):
            part = ids[at:at + chunk]
            self.begin(self.kv, ShapeTuple([0]), ShapeTuple([len(part)]))
            pos = tvm.runtime.tensor(np.array([len(part) - 1], dtype="int32"), self.dev)
            logits, _ = self.vm["batch_prefill"](self.embed(part), pos, self.kv, self.params)
            self.end(self.kv)
        out = []
        while True:
            t = int(np.argmax(logits.numpy()[0, -1]))
            if t == stop or len(out) == n:
                break
            out.append(t)
            self.begin(self.kv, ShapeTuple([0]), ShapeTuple([1]))
            logits, _ = self.vm["batch_decode"](self.embed([t]), self.kv, self.params)
            self.end(self.kv)
        self.remove(self.kv, 0)
        return out


def rolling_requests(tokens, prefix, max_length):
    """lm-eval's disjoint rolling windows of `tokens`, as (input, ctxlen) requests."""
    max_seq_len = max_length - 1
    out, predicted = [], 0
    first = min(max_seq_len, len(tokens))
    windows = [([prefix] + tokens[:first - 1], tokens[:first])]
    predicted = first
    while predicted < len(tokens):
        n = min(len(tokens) - predicted, max_seq_len)
        end = predicted + n
        windows.append((tokens[max(0, end - max_seq_len - 1):end - 1], tokens[end - n:end]))
        predicted += n
    for inp, pred in windows:
        ctx = inp[:len(inp) - (len(pred) - 1)]
        whole = (ctx + pred)[-max_length:]
        out.append((whole, len(ctx) - max(0, len(ctx) + len(pred) - max_length)))
    return out


def main():
    model_dir, lib_path, max_length_arg = sys.argv[1], sys.argv[2], int(sys.argv[3])
    # lm-eval keeps a token for the generated one: its API models work to max_length - 1.
    max_length = max_length_arg - 1
    tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    enc = lambda s: tok.encode(s, add_special_tokens=False).ids
    with open(os.path.join(model_dir, "tokenizer_config.json"), encoding="utf-8") as f:
        config = json.load(f)
    eos = enc(config["eos_token"])[0]
    # lm-eval's prefix token with a remote tokenizer: the BOS (as /tokenizer_info names it)
    # when it has a nonzero id, else the EOS.
    prefix = (enc(config["bos_token"])[0] if config.get("bos_token") else 0) or eos
    s = Scorer(model_dir, lib_path)

    choice_scores = []
    for d in docs("multiple_choice.jsonl"):
        per = []
        for c in d["choices"]:
            context, cont = d["question"], " " + c
            n_spaces = len(context) - len(context.rstrip())
            if n_spaces:
                context, cont = context[:-n_spaces], context[-n_spaces:] + cont
            whole, ctx = enc(context + cont), enc(context)
            per.append(list(s.score(whole, len(ctx))))
        choice_scores.append(per)

    rolling = []
    for d in docs("rolling.jsonl"):
        reqs = rolling_requests(enc(d["text"]), prefix, max_length)
        rolling.append({"windows": len(reqs), "loglikelihood": sum(s.score(i, c)[0] for i, c in reqs)})

    with open(os.path.join(HERE, "tvmrt_generate.yaml"), encoding="utf-8") as f:
        max_gen = int(re.search(r"max_gen_toks: (\d+)", f.read()).group(1))
    generated = [tok.decode(s.greedy(enc(d["prompt"]), max_gen, eos), skip_special_tokens=True)
                 for d in docs("generate.jsonl")]

    json.dump({"tvm": tvm.__version__, "max_length": max_length_arg,
               "multiple_choice": choice_scores, "rolling": rolling, "generate": generated},
              sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
