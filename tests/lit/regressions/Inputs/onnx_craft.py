#!/usr/bin/env python3
"""Writes one small malformed ONNX model, named by a case, for the
regression tests of the ONNX importer's checks (regressions/onnx-*.fuse):

    python3 onnx_craft.py CASE OUT.onnx [ARG...]
    python3 onnx_craft.py --all DIR     every case but 'external', as
                                        DIR/CASE.onnx (one process for a
                                        whole test file)
    python3 onnx_craft.py --list

The protobuf is encoded by hand (no onnx package needed); each model is a
few hundred bytes at most. Field numbers are onnx.proto's."""
import struct
import sys

# --- protobuf wire format ------------------------------------------------


def varint(n):
    n &= (1 << 64) - 1  # negative int64s are ten-byte varints
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field(num, payload):  # length-delimited
    if isinstance(payload, str):
        payload = payload.encode()
    return varint((num << 3) | 2) + varint(len(payload)) + payload


def number(num, n):  # varint
    return varint(num << 3) + varint(n)


def fixed32(num, f):  # a float
    return varint((num << 3) | 5) + struct.pack("<f", f)


# --- ONNX messages --------------------------------------------------------

FLOAT, INT32, INT64, BOOL, DOUBLE = 1, 6, 7, 9, 11


def tensor(name, dtype, dims, ints=None, floats=None, raw=None,
           external=None):
    t = b"".join(number(1, d) for d in dims) + number(2, dtype)
    if ints is not None:
        num = 7 if dtype == INT64 else 5  # int64_data, int32_data
        t += field(num, b"".join(varint(v) for v in ints))
    if floats is not None:
        t += field(4, struct.pack("<%df" % len(floats), *floats))
    t += field(8, name)
    if raw is not None:
        t += field(9, raw)
    if external is not None:
        for k, v in external:
            t += field(13, field(1, k) + field(2, v))
        t += number(14, 1)  # data_location EXTERNAL
    return t


def vi(name, dtype=FLOAT, dims=()):
    shape = b"".join(field(1, number(1, d)) for d in dims)
    ttype = number(1, dtype) + field(2, shape)
    return field(1, name) + field(2, field(1, ttype))


def attr_i(name, v):
    return field(1, name) + number(3, v) + number(20, 2)


def attr_f(name, v):
    return field(1, name) + fixed32(2, v) + number(20, 1)


def attr_ints(name, vs):
    return field(1, name) + b"".join(number(8, v) for v in vs) + number(20, 7)


def attr_s(name, s):
    return field(1, name) + field(4, s) + number(20, 3)


def attr_t(name, t):
    return field(1, name) + field(5, t) + number(20, 4)


def node(op, ins, outs, name, attrs=()):
    n = b"".join(field(1, i) for i in ins) + b"".join(field(2, o) for o in outs)
    n += field(3, name) + field(4, op)
    return n + b"".join(field(5, a) for a in attrs)


def model(nodes, inputs, outputs, inits=(), opset=17):
    g = b"".join(field(1, n) for n in nodes) + field(2, "g")
    g += b"".join(field(5, t) for t in inits)
    g += b"".join(field(11, v) for v in inputs)
    g += b"".join(field(12, v) for v in outputs)
    return number(1, 8) + field(8, field(1, "") + number(2, opset)) + field(7, g)


def i64(name, vals, dims=None):
    return tensor(name, INT64, [len(vals)] if dims is None else dims,
                  ints=vals)


def f32(name, vals, dims=None):
    return tensor(name, FLOAT, [len(vals)] if dims is None else dims,
                  floats=vals)


def one_node(op, ins, attrs=(), inputs=(), inits=(), opset=17, outs=("y",)):
    """A model of one node named 'n' with graph outputs `outs`."""
    return model([node(op, ins, list(outs), "n", attrs)], list(inputs),
                 [field(1, o) for o in outs], inits, opset)


X = vi("x", FLOAT, [2, 3])

# --- the cases -------------------------------------------------------------

BIG = 1 << 62
CASES = {
    # Size arithmetic.
    "onehot-depth-2^61": lambda: one_node(
        "OneHot", ["i", "d", "v"],
        inits=[i64("i", [1]), f32("d", [2.0 ** 61], []), f32("v", [0, 1])]),
    "onehot-depth-int64-max": lambda: one_node(
        "OneHot", ["i", "d", "v"],
        inits=[i64("i", [1]), i64("d", [(1 << 63) - 1], []),
               f32("v", [0, 1])]),
    "onehot-depth-nan": lambda: one_node(
        "OneHot", ["i", "d", "v"],
        inits=[i64("i", [1]), f32("d", [float("nan")], []),
               f32("v", [0, 1])]),
    "reshape-2^62": lambda: one_node(
        "Reshape", ["x", "s"], inputs=[X],
        inits=[i64("s", [BIG, BIG, -1])]),
    "reshape-huge-product": lambda: one_node(
        "Reshape", ["x", "s"], inputs=[X],
        inits=[i64("s", [1 << 40, 1 << 40, 0])]),
    "resize-scale-1e30": lambda: one_node(
        "Resize", ["x", "", "s"], inputs=[X],
        inits=[f32("s", [1.0, 1e30])]),
    "resize-scale-nan": lambda: one_node(
        "Resize", ["x", "", "s"], inputs=[X],
        inits=[f32("s", [1.0, float("nan")])]),
    "resize-sizes-huge": lambda: one_node(
        "Resize", ["x", "", "", "z"], inputs=[X],
        inits=[i64("z", [2, 1 << 40])], attrs=[attr_s("mode", "linear")]),
    "range-int-overflow": lambda: one_node(
        "Range", ["a", "b", "c"],
        inits=[i64("a", [(1 << 63) - 3], []), i64("b", [(1 << 63) - 1], []),
               i64("c", [1], [])]),
    "range-int-delta-huge": lambda: one_node(
        "Range", ["a", "b", "c"],
        inits=[i64("a", [-(1 << 62)], []), i64("b", [1 << 62], []),
               i64("c", [1 << 62], [])]),
    "range-float-nan": lambda: one_node(
        "Range", ["a", "b", "c"],
        inits=[f32("a", [0.0], []), f32("b", [float("inf")], []),
               f32("c", [float("nan")], [])]),
    "tile-overflow": lambda: one_node(
        "Tile", ["x", "r"], inputs=[X], inits=[i64("r", [BIG, BIG])]),
    "expand-huge": lambda: one_node(
        "Expand", ["x", "s"], inputs=[X],
        inits=[i64("s", [1 << 40, 1 << 40, 1, 1])]),
    "constantofshape-huge": lambda: one_node(
        "ConstantOfShape", ["s"], inits=[i64("s", [BIG, BIG])]),
    "pad-overflow": lambda: one_node(
        "Pad", ["x", "p"], inputs=[X], inits=[i64("p", [0, BIG, 0, BIG])]),
    "pad-edge-huge": lambda: one_node(
        "Pad", ["x", "p"], inputs=[X], attrs=[attr_s("mode", "edge")],
        inits=[i64("p", [0, 1 << 40, 0, 1 << 40])]),
    "slice-int64-min": lambda: one_node(
        "Slice", ["x", "s", "e", "a", "t"], inputs=[X],
        inits=[i64("s", [-(1 << 63)]), i64("e", [(1 << 63) - 1]),
               i64("a", [1]), i64("t", [-(1 << 63)])]),
    "split-overflow": lambda: one_node(
        "Split", ["x", "s"], inputs=[X], attrs=[attr_i("axis", 1)],
        inits=[i64("s", [(1 << 63) - 1, 4])], outs=("y", "z")),
    "concat-huge": lambda: model(
        [node("Concat", ["x", "x", "x"], ["y"], "n", [attr_i("axis", 0)])],
        [vi("x", FLOAT, [1 << 40, 0])], [vi("y")]),
    "concat-20-inputs": lambda: model(
        [node("Concat", ["x"] * 20, ["y"], "n", [attr_i("axis", 0)])],
        [vi("x", FLOAT, [1, 2])], [field(1, "y")]),
    "cumsum-huge": lambda: one_node(
        "CumSum", ["x", "a"], inputs=[vi("x", FLOAT, [1 << 33])],
        inits=[i64("a", [0], [])]),
    "eyelike-huge": lambda: one_node(
        "EyeLike", ["x"], inputs=[vi("x", FLOAT, [1 << 24, 1 << 24])]),
    "trilu-huge": lambda: one_node(
        "Trilu", ["x"], inputs=[vi("x", FLOAT, [1 << 24, 1 << 24])]),
    "gatherelements-huge": lambda: one_node(
        "GatherElements", ["x", "i"],
        inputs=[vi("x", FLOAT, [1 << 36, 0]), vi("i", INT64, [1, 0])]),
    "lrn-size-huge": lambda: one_node(
        "LRN", ["x"], inputs=[vi("x", FLOAT, [1, 3, 2])],
        attrs=[attr_i("size", BIG)]),
    "convtranspose-overflow": lambda: one_node(
        "ConvTranspose", ["x", "w"], inputs=[vi("x", FLOAT, [1, 1, 3, 3])],
        inits=[f32("w", [1.0], [1, 1, 1, 1])],
        attrs=[attr_ints("strides", [BIG, 1])]),
    "depthtospace-overflow": lambda: one_node(
        "DepthToSpace", ["x"], inputs=[vi("x", FLOAT, [1, 4, 2, 2])],
        attrs=[attr_i("blocksize", 1 << 32)]),
    "einsum-high-byte": lambda: model(
        [node("Einsum", ["x"], ["y"], "n",
              [attr_s("equation", b"ij->\xff")])],
        [X], [vi("y")]),
    # Constant folding that fails.
    "gather-out-of-range": lambda: one_node(
        "Gather", ["d", "i"], inits=[i64("d", [1, 2, 3]), i64("i", [7])]),
    "div-by-zero": lambda: one_node(
        "Div", ["a", "b"], inits=[i64("a", [1, 2]), i64("b", [1, 0])]),
    "mod-by-zero": lambda: one_node(
        "Mod", ["a", "b"], inits=[i64("a", [5]), i64("b", [0])]),
    # ONNX validity.
    "dup-node-output": lambda: model(
        [node("Relu", ["x"], ["y"], "r1"), node("Neg", ["x"], ["y"], "r2")],
        [X], [vi("y")]),
    "dup-graph-input": lambda: model(
        [node("Relu", ["x"], ["y"], "r1")], [X, X], [vi("y")]),
    "dup-attribute": lambda: model(
        [node("Softmax", ["x"], ["y"], "sm",
              [attr_i("axis", 0), attr_i("axis", 1)])], [X], [vi("y")]),
    "output-shadows-initializer": lambda: model(
        [node("Relu", ["x"], ["w"], "r1"), node("Add", ["x", "w"], ["y"], "a")],
        [X], [vi("y")], [f32("w", [1.0] * 6, [2, 3])]),
    "output-shadows-input": lambda: model(
        [node("Relu", ["x"], ["x"], "r1")], [X], [vi("x")]),
    # External data: ARG is the location; optional offset and length.
    "external": lambda: model(
        [], [], [vi("w")],
        [tensor("w", FLOAT, [2], external=[("location", ARGS[0])] +
                [(k, v) for k, v in zip(("offset", "length"), ARGS[1:])])]),
}


def main():
    global ARGS
    if sys.argv[1:] == ["--list"]:
        print("\n".join(sorted(CASES)))
        return
    if sys.argv[1] == "--all":
        for case, make in CASES.items():
            if case != "external":
                with open("%s/%s.onnx" % (sys.argv[2], case), "wb") as f:
                    f.write(make())
        return
    case, out, ARGS = sys.argv[1], sys.argv[2], sys.argv[3:]
    data = CASES[case]()
    with open(out, "wb") as f:
        f.write(data)


ARGS = []
if __name__ == "__main__":
    main()
