"""ResNet-50 v1 as ONNX with seeded random weights, compiled by Apache TVM 0.27 (issue 14).

    python gen_resnet50.py OUT_DIR

Writes OUT_DIR/resnet50.so (TVM's Relax VM executable, exported), OUT_DIR/input.npy
(1x3x224x224 float32) and OUT_DIR/weights.txt (the bytes of the model's weights). The
architecture is torchvision's resnet50 with batch norm folded into the convolutions (conv with
bias, relu, residual add, global average pool, 1000-way dense): 25.5 M parameters, about 102 MB
of float32 weights, as the ONNX model zoo's ResNet-50 that the onnx package's backend tests
download (this machine has no network but the package registries, so the model is built here).
The compile pipeline is the ONNX conformance harness's (conformance/onnx/worker.py):
from_onnx, DecomposeOpsForInference, LegalizeOps, tvm.compile(target="llvm").
"""

import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class Builder:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes = []
        self.inits = []
        self.count = 0
        self.weight_bytes = 0

    def name(self, kind):
        self.count += 1
        return f"{kind}{self.count}"

    def param(self, shape, fan_in):
        n = self.name("w")
        # He initialisation keeps the activations in range through 50 layers.
        w = (self.rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)
        self.inits.append(numpy_helper.from_array(w, n))
        self.weight_bytes += w.nbytes
        return n

    def node(self, op, inputs, **attrs):
        out = self.name(op.lower())
        self.nodes.append(helper.make_node(op, inputs, [out], **attrs))
        return out

    def conv(self, x, cin, cout, k, stride=1, relu=True):
        w = self.param((cout, cin, k, k), cin * k * k)
        b = self.param((cout,), 1e4)
        y = self.node(
            "Conv", [x, w, b], kernel_shape=[k, k], strides=[stride, stride],
            pads=[k // 2] * 4,
        )
        return self.node("Relu", [y]) if relu else y

    def bottleneck(self, x, cin, width, stride):
        cout = width * 4
        y = self.conv(x, cin, width, 1)
        y = self.conv(y, width, width, 3, stride)
        y = self.conv(y, width, cout, 1, relu=False)
        if stride != 1 or cin != cout:
            x = self.conv(x, cin, cout, 1, stride, relu=False)
        return self.node("Relu", [self.node("Add", [y, x])])


def resnet50():
    b = Builder(seed=50)
    x = b.conv("data", 3, 64, 7, 2)
    x = b.node("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = 64
    for width, blocks, stride in [(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)]:
        for i in range(blocks):
            x = b.bottleneck(x, cin, width, stride if i == 0 else 1)
            cin = width * 4
    x = b.node("GlobalAveragePool", [x])
    x = b.node("Flatten", [x])
    w = b.param((1000, 2048), 2048)
    bias = b.param((1000,), 1e4)
    out = b.node("Gemm", [x, w, bias], transB=1)
    graph = helper.make_graph(
        b.nodes, "resnet50",
        [helper.make_tensor_value_info("data", TensorProto.FLOAT, [1, 3, 224, 224])],
        [helper.make_tensor_value_info(out, TensorProto.FLOAT, [1, 1000])],
        b.inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    return model, b.weight_bytes


def main():
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    model, weight_bytes = resnet50()

    import tvm
    from tvm import relax
    from tvm.relax.frontend.onnx import from_onnx

    mod = from_onnx(model, keep_params_in_input=False)
    mod = relax.transform.DecomposeOpsForInference()(mod)
    mod = relax.transform.LegalizeOps()(mod)
    ex = tvm.compile(mod, target="llvm")
    ex.export_library(os.path.join(out_dir, "resnet50.so"))
    x = np.random.default_rng(7).random((1, 3, 224, 224), dtype=np.float32)
    np.save(os.path.join(out_dir, "input.npy"), x)
    with open(os.path.join(out_dir, "weights.txt"), "w") as f:
        f.write(f"{weight_bytes}\n")
    print(f"resnet50.so: {weight_bytes} bytes of weights")


if __name__ == "__main__":
    main()
