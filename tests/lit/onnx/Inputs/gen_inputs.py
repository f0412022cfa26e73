#!/usr/bin/python3
"""Writes the small .onnx files that the lit tests in tests/lit/onnx read.

Run with Debian's Python (python3-onnx) from anywhere:
    /usr/bin/python3 tests/lit/onnx/Inputs/gen_inputs.py
The outputs are committed; rerun this after changing it.
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
F = TensorProto.FLOAT


def save(name, nodes, inputs, outputs, inits=(), opset=13, value_info=()):
    graph = helper.make_graph(nodes, name, inputs, outputs,
                              initializer=list(inits), value_info=value_info)
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", opset)],
        producer_name="fuse-lit")
    model.ir_version = 8
    onnx.save(model, os.path.join(HERE, name + ".onnx"))
    return model


def vi(name, shape, dtype=F):
    return helper.make_tensor_value_info(name, dtype, shape)


def main():
    rng = np.random.default_rng(0)
    # Add + Relu, with named nodes.
    save("add_relu",
         [helper.make_node("Add", ["a", "b"], ["s"], name="add1"),
          helper.make_node("Relu", ["s"], ["y"], name="relu1")],
         [vi("a", [2, 3]), vi("b", [3])], [vi("y", [2, 3])])

    # Gemm with every attribute, weights as initializers.
    w = numpy_helper.from_array(rng.standard_normal((5, 4)).astype(np.float32), "w")
    c = numpy_helper.from_array(rng.standard_normal((5,)).astype(np.float32), "c")
    save("gemm",
         [helper.make_node("Gemm", ["x", "w", "c"], ["y"], name="fc",
                           alpha=0.5, beta=2.0, transB=1)],
         [vi("x", [3, 4])], [vi("y", [3, 5])], inits=[w, c])

    # A shape subgraph: y = Reshape(x, Concat(Gather(Shape(x), 0), [-1])).
    minus1 = numpy_helper.from_array(np.array([-1], np.int64), "minus1")
    zero = numpy_helper.from_array(np.array(0, np.int64), "zero")
    save("shape_subgraph",
         [helper.make_node("Shape", ["x"], ["shape"], name="shape"),
          helper.make_node("Gather", ["shape", "zero"], ["n"], name="batch"),
          helper.make_node("Unsqueeze", ["n", "axes0"], ["n1"], name="unsq"),
          helper.make_node("Concat", ["n1", "minus1"], ["target"], axis=0,
                           name="target"),
          helper.make_node("Reshape", ["x", "target"], ["y"], name="flatten")],
         [vi("x", [2, 3, 4])], [vi("y", [2, 12])],
         inits=[minus1, zero,
                numpy_helper.from_array(np.array([0], np.int64), "axes0")])

    # Conv with auto_pad SAME_UPPER and a stride: pads come from the size.
    wc = numpy_helper.from_array(rng.standard_normal((4, 2, 3, 3)).astype(np.float32), "wc")
    save("conv_same",
         [helper.make_node("Conv", ["x", "wc"], ["y"], name="conv1",
                           auto_pad="SAME_UPPER", strides=[2, 2])],
         [vi("x", [1, 2, 6, 5])], [vi("y", [1, 4, 3, 3])], inits=[wc])

    # Squeeze in opset 11 (axes attribute) and 13 (axes input).
    save("squeeze11",
         [helper.make_node("Squeeze", ["x"], ["y"], axes=[1], name="sq")],
         [vi("x", [3, 1, 4])], [vi("y", [3, 4])], opset=11)
    save("squeeze13",
         [helper.make_node("Squeeze", ["x", "axes"], ["y"], name="sq")],
         [vi("x", [3, 1, 4])], [vi("y", [3, 4])], opset=13,
         inits=[numpy_helper.from_array(np.array([1], np.int64), "axes")])

    # Errors: a malformed NonMaxSuppression (2-D boxes; it was an
    # unsupported op type when the model was made), an unsupported attribute value, an
    # unknown attribute, and a consumer of a failed node (no second error).
    save("errors",
         [helper.make_node("Add", ["x", "x"], ["a"], name="ok_add"),
          helper.make_node("NonMaxSuppression", ["a", "a"], ["b"], name="nms"),
          helper.make_node("Conv", ["x4", "w4"], ["c"], name="conv1",
                           auto_pad="BOGUS"),
          helper.make_node("Relu", ["x"], ["d"], name="relu1", color=3),
          helper.make_node("Neg", ["b"], ["e"], name="after_nms")],
         [vi("x", [2, 2]), vi("x4", [1, 1, 4, 4]), vi("w4", [1, 1, 3, 3])],
         [vi("a", [2, 2]), vi("c", None), vi("d", [2, 2]), vi("e", None)])

    # A symbolic batch dim.
    save("dynamic_batch",
         [helper.make_node("Relu", ["x"], ["y"], name="relu")],
         [vi("x", ["N", 4])], [vi("y", ["N", 4])])

    # An unsupported dtype on a graph input.
    save("uint8_input",
         [helper.make_node("Neg", ["x"], ["y"], name="neg")],
         [vi("x", [2], TensorProto.UINT8)], [vi("y", [2], TensorProto.UINT8)])

    # External data: the weight lives in external_weight.bin.
    wx = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "wx")
    m = save("external",
             [helper.make_node("MatMul", ["x", "wx"], ["y"], name="mm")],
             [vi("x", [1, 2])], [vi("y", [1, 3])], inits=[wx])
    onnx.save_model(m, os.path.join(HERE, "external.onnx"),
                    save_as_external_data=True, all_tensors_to_one_file=True,
                    location="external_weight.bin", size_threshold=0)
    # The same model pointing at a file that does not exist.
    m.graph.initializer[0].external_data[0].value = "missing.bin"
    onnx.save_model(m, os.path.join(HERE, "external_missing.onnx"))

    # Not ONNX, and a truncated model.
    with open(os.path.join(HERE, "not_onnx.onnx"), "w") as f:
        f.write("this is not a protobuf\n")
    whole = open(os.path.join(HERE, "gemm.onnx"), "rb").read()
    with open(os.path.join(HERE, "truncated.onnx"), "wb") as f:
        f.write(whole[: len(whole) // 2])


if __name__ == "__main__":
    main()
