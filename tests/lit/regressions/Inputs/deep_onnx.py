#!/usr/bin/env python3
"""Writes an ONNX model (argv[1]) whose subgraphs nest argv[2] levels deep:
Graph -> Node (If) -> Attribute 'a' (GRAPH) -> Graph -> ... (3 protobuf
messages per level), for regressions/onnx-deep-nesting.fuse. Built from the
inside out with the lengths computed first, so it takes linear time."""
import sys


def varint(n):
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def tag(num, wire=2):
    return varint((num << 3) | wire)


levels = int(sys.argv[2])
name = tag(1) + varint(1) + b"a"          # AttributeProto.name
kind = tag(20, 0) + varint(5)              # AttributeProto.type = GRAPH
op = tag(4) + varint(2) + b"If"            # NodeProto.op_type
inner, sizes = 0, []
for _ in range(levels):
    attr = len(name) + len(tag(6)) + len(varint(inner)) + inner + len(kind)
    node = len(tag(5)) + len(varint(attr)) + attr + len(op)
    sizes.append((inner, attr, node))
    inner = len(tag(1)) + len(varint(node)) + node
out = bytearray(tag(1, 0) + varint(8) + tag(7) + varint(inner))  # ir_version, graph
for inner, attr, node in reversed(sizes):
    out += tag(1) + varint(node) + tag(5) + varint(attr) + name + tag(6) + varint(inner)
for _ in sizes:
    out += kind + op
with open(sys.argv[1], "wb") as f:
    f.write(out)
