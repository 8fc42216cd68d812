"""What lm-evaluation-harness (0.4.13, `local-completions`) should report for the tasks of this
folder against `tvmrt serve` on the MLC-LLM fixture, computed on TVM's own runtime (apache-tvm
0.27.0.post1) driving the same library, with the fixture's tokenizer (the `tokenizers`
package):

    python reference.py MODEL_DIR LIB MAX_LENGTH > expected.json

Every request lm-eval makes is rebuilt here from its rules and scored as a fresh sequence
(tests/fixtures/mlc/tvm_model.py), the prompt prefilled with `batch_verify` (every position's
logits) in chunks of `prefill_chunk_size`, log-softmax in float64:
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
Run by hand with the venv of tests/fixtures/mlc/requirements.txt (build.sh runs it);
tests/serve/test_lm_eval.py compares lm-eval's samples with it.
"""

import json
import os
import re
import sys

import numpy as np
import tvm
from tokenizers import Tokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "fixtures", "mlc"))
from tvm_model import TvmModel, log_softmax  # noqa: E402  (the fixture's TVM driver)


def docs(name):
    with open(os.path.join(HERE, name), encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def score(model, inp, ctxlen):
    """lm-eval's (loglikelihood, is_greedy) of inp[ctxlen:] given what precedes it."""
    logits = model.every_position(inp)
    logp = log_softmax(logits)
    total = sum(logp[j - 1, inp[j]] for j in range(ctxlen, len(inp)))
    greedy = all(int(np.argmax(logits[j - 1])) == inp[j] for j in range(ctxlen, len(inp)))
    return float(total), greedy


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
    model = TvmModel(model_dir, lib_path)

    choice_scores = []
    for d in docs("multiple_choice.jsonl"):
        per = []
        for c in d["choices"]:
            context, cont = d["question"], " " + c
            n_spaces = len(context) - len(context.rstrip())
            if n_spaces:
                context, cont = context[:-n_spaces], context[-n_spaces:] + cont
            whole, ctx = enc(context + cont), enc(context)
            per.append(list(score(model, whole, len(ctx))))
        choice_scores.append(per)

    rolling = []
    for d in docs("rolling.jsonl"):
        reqs = rolling_requests(enc(d["text"]), prefix, max_length)
        rolling.append({"windows": len(reqs),
                        "loglikelihood": sum(score(model, i, c)[0] for i, c in reqs)})

    with open(os.path.join(HERE, "tvmrt_generate.yaml"), encoding="utf-8") as f:
        max_gen = int(re.search(r"max_gen_toks: (\d+)", f.read()).group(1))
    generated = [tok.decode(model.greedy(enc(d["prompt"]), max_gen, eos),
                            skip_special_tokens=True)
                 for d in docs("generate.jsonl")]

    json.dump({"tvm": tvm.__version__, "max_length": max_length_arg,
               "multiple_choice": choice_scores, "rolling": rolling, "generate": generated},
              sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
