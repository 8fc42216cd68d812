"""A larger model for benches/llm/run.sh, built like the test fixture (same code,
tests/fixtures/llm/generate.py) with other sizes: hidden 256, 4 layers, 4 query heads and 2 KV
heads of 64, vocabulary 4096 (about 20 MB of float32 weights). Writes model.so and weights/
into the directory given.

    .venv/onnx/bin/python benches/llm/gen_model.py OUT_DIR
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../tests/fixtures/llm"))
import generate  # noqa: E402

generate.HIDDEN = 256
generate.INTERMEDIATE = 688
generate.HEADS = 4
generate.KV_HEADS = 2
generate.HEAD_DIM = 64
generate.LAYERS = 4
generate.VOCAB = 4096

if __name__ == "__main__":
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    generate.build_model(out)
