"""Seeds for the oip_request fuzz target: inference requests as tritonclient builds them.

Writes fuzz/corpus/oip_request/<name>: a first byte that picks the front (0 JSON, 1 binary
extension with a 2-byte header length, 2 gRPC, 3 gzip, 4 deflate), then the body tritonclient
sends for the target's stand-in models (x: float32[n, 2]; A, B: float32[m]; x: int64[n, k] and
y: uint8[n]), in every way it can send them; and the requests that once failed the server
(the venv of .ci/requirements/triton.txt):

    .venv/triton/bin/python fuzz/oip_record.py
"""

import json
import struct
import zlib
import gzip
from pathlib import Path

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.grpc._utils as grpc_utils
import tritonclient.http as httpclient
import tritonclient.http._utils as http_utils

OUT = Path(__file__).resolve().parent / "corpus" / "oip_request"


def http_body(inputs, outputs, binary):
    """The body tritonclient's HTTP client posts, and the JSON's length when binary follows."""
    mods = []
    for name, array, dtype in inputs:
        i = httpclient.InferInput(name, list(array.shape), dtype)
        i.set_data_from_numpy(array, binary_data=binary)
        mods.append(i)
    outs = [httpclient.InferRequestedOutput(o, binary_data=binary) for o in outputs]
    body, json_size = http_utils._get_inference_request(
        mods, "r1", outs or None, 0, False, False, 0, None, None)
    return body, json_size


def grpc_body(inputs, outputs):
    """A serialized ModelInferRequest, raw contents, as tritonclient's gRPC client sends it."""
    mods = []
    for name, array, dtype in inputs:
        i = grpcclient.InferInput(name, list(array.shape), dtype)
        i.set_data_from_numpy(array)
        mods.append(i)
    outs = [grpcclient.InferRequestedOutput(o) for o in outputs]
    req = grpc_utils._get_inference_request(
        "m", mods, "", "r1", outs or None, 0, False, False, 0, None, None)
    return req.SerializeToString()


def write(name, front, body):
    (OUT / name).write_bytes(bytes([front]) + body)


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    f32 = np.float32
    cases = {
        "mlp": ([("x", np.array([[1.5, -2.0]], f32), "FP32")], ["output0"]),
        "mlp_two_rows": ([("x", np.array([[1, 2], [3, 4]], f32), "FP32")], []),
        "mlp_unlucky": ([("x", np.array([[13, 2]], f32), "FP32")], []),
        "kernel": ([("A", np.arange(4, dtype=f32), "FP32"),
                    ("B", np.ones(4, f32), "FP32")], ["output0"]),
        "two_types": ([("x", np.array([[-1, 2, 3]], np.int64), "INT64"),
                       ("y", np.array([7], np.uint8), "UINT8")], ["output0", "output1"]),
        "bytes": ([("s", np.array([b"ab", b""], dtype=np.object_), "BYTES")], []),
        "fp16": ([("h", np.array([1.0, -0.5], np.float16), "FP16")], []),
    }
    for name, (inputs, outputs) in cases.items():
        body, _ = http_body(inputs, outputs, binary=False)
        write(f"{name}_json", 0, body)
        body, json_size = http_body(inputs, outputs, binary=True)
        assert json_size is not None and json_size < 1 << 16
        write(f"{name}_binary", 1, struct.pack("<H", json_size) + body)
        write(f"{name}_grpc", 2, grpc_body(inputs, outputs))
    body, _ = http_body(cases["mlp"][0], [], binary=False)
    write("mlp_gzip", 3, gzip.compress(body))
    write("mlp_deflate", 4, zlib.compress(body))
    shm = {"inputs": [{"name": "x", "shape": [1, 2], "datatype": "FP32", "parameters": {
        "shared_memory_region": "in", "shared_memory_byte_size": 8,
        "shared_memory_offset": 0}}],
        "outputs": [{"name": "output0", "parameters": {
            "shared_memory_region": "out", "shared_memory_byte_size": 8}}]}
    write("shm_json", 0, json.dumps(shm).encode())
    # Once aborted the server: 2^40 elements claimed, one sent (8 TiB asked of malloc).
    huge = {"inputs": [{"name": "x", "shape": [1 << 40], "datatype": "FP32", "data": [1]}]}
    write("huge_shape_json", 0, json.dumps(huge).encode())
    # 2^62 + 1 float32 elements wrap to 4 bytes in 64 bits.
    wraps = {"inputs": [{"name": "A", "shape": [(1 << 62) + 1], "datatype": "FP32",
                         "parameters": {"binary_data_size": 4}}]}
    head = json.dumps(wraps).encode()
    write("wrapping_shape_binary", 1, struct.pack("<H", len(head)) + head + b"\0" * 4)
    print(f"{len(list(OUT.iterdir()))} seeds in {OUT}")


if __name__ == "__main__":
    main()
