"""lm-evaluation-harness, unchanged (pinned: .ci/requirements/lm_eval.txt, no torch), against
`tvmrt serve` on the MLC-LLM fixture. Started by tests/serve/run.sh:

    python tests/serve/test_lm_eval.py TVMRT_BINARY

Starts the server on 127.0.0.1 (a free port, with an API key), runs `lm_eval --model
local-completions` on the tasks of tests/serve/lm_eval/ (local JSON documents, offline: a
multiple-choice task, a rolling-loglikelihood task and a generation task), with lists of 4
prompts per request and 2 requests at a time, and checks its logged samples against TVM's
runtime driving the same library (lm_eval/expected.json, written by lm_eval/reference.py):
every choice's loglikelihood and greediness, every document's rolling loglikelihood, every
generated text. lm-eval tokenizes through the server's /tokenize (its remote tokenizer, found
through /tokenizer_info); the server is stopped by its process id.
"""

import glob
import json
import os
import subprocess
import sys
import tempfile

from server import KEY, Server

HERE = os.path.dirname(os.path.abspath(__file__))
TASKS = os.path.join(HERE, "lm_eval")


def samples(out, task):
    (path,) = glob.glob(os.path.join(out, "**", f"samples_{task}_*.jsonl"), recursive=True)
    with open(path, encoding="utf-8") as f:
        return sorted((json.loads(line) for line in f), key=lambda d: d["doc_id"])


def main():
    binary = sys.argv[1]
    with open(os.path.join(TASKS, "expected.json"), encoding="utf-8") as f:
        want = json.load(f)
    s = Server(binary, "--api-key", KEY)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            env = dict(os.environ, OPENAI_API_KEY=KEY, HF_DATASETS_OFFLINE="1",
                       HF_HUB_OFFLINE="1", HF_HOME=os.path.join(tmp, "hf"))
            args = ",".join([f"base_url={s.url}/v1/completions", "model=model",
                             f"max_length={want['max_length']}", "num_concurrent=2",
                             f"auth_token={KEY}", "max_retries=1"])
            out = os.path.join(tmp, "out")
            run = subprocess.run(
                [sys.executable, "-m", "lm_eval", "--model", "local-completions",
                 "--model_args", args, "--batch_size", "4", "--include_path", ".",
                 "--output_path", out,
                 "--log_samples", "--tasks",
                 "tvmrt_multiple_choice,tvmrt_rolling,tvmrt_generate"],
                cwd=TASKS, env=env, capture_output=True, text=True, timeout=300)
            log = run.stdout + run.stderr
            assert run.returncode == 0, log[-4000:]
            assert "Using remote tokenizer" in log, log[-4000:]

            mc = samples(out, "tvmrt_multiple_choice")
            assert len(mc) == len(want["multiple_choice"])
            correct = 0
            for doc, ref in zip(mc, want["multiple_choice"]):
                got = [(float(r[0][0]), r[0][1] == "True") for r in doc["resps"]]
                assert len(got) == len(ref), doc["doc_id"]
                for (ll, greedy), (ref_ll, ref_greedy) in zip(got, ref):
                    assert abs(ll - ref_ll) < 1e-3 and greedy == ref_greedy, (doc, ref)
                best = max(range(len(ref)), key=lambda i: ref[i][0])
                correct += best == doc["target"]
                assert doc["acc"] == float(best == doc["target"]), doc
            print(f"ok: multiple choice, {len(mc)} documents: every choice's loglikelihood is "
                  f"TVM's (acc {correct}/{len(mc)})")

            rolling = samples(out, "tvmrt_rolling")
            assert len(rolling) == len(want["rolling"])
            for doc, ref in zip(rolling, want["rolling"]):
                got = float(doc["resps"][0][0])
                assert abs(got - ref["loglikelihood"]) < 1e-2, (doc, ref)
            windows = sum(r["windows"] for r in want["rolling"])
            print(f"ok: rolling loglikelihood, {len(rolling)} documents in {windows} windows: "
                  "TVM's")

            gen = samples(out, "tvmrt_generate")
            assert [d["resps"][0][0] for d in gen] == want["generate"], \
                ([d["resps"][0][0] for d in gen], want["generate"])
            print(f"ok: generation, {len(gen)} prompts: TVM's greedy text")
    finally:
        s.stop()
    print("3 passed, 0 failed")


if __name__ == "__main__":
    main()
