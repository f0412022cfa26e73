#!/usr/bin/env python3
"""Writes an ONNX model (argv[1], about 100 bytes) with one initializer 'w'
that declares 2^20 x 2^20 f32 elements (4 TiB) stored as external data in
argv[2] (a location relative to the model), for
regressions/onnx-huge-external-data.fuse. The protobuf is encoded by hand,
so that the test needs no onnx package."""
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


def field(num, payload):          # length-delimited
    return varint((num << 3) | 2) + varint(len(payload)) + payload


def number(num, n):               # varint
    return varint(num << 3) + varint(n)


entry = field(1, b"location") + field(2, sys.argv[2].encode())
tensor = (number(1, 1 << 20) + number(1, 1 << 20) + number(2, 1) +  # dims, FLOAT
          field(8, b"w") + field(13, entry) + number(14, 1))         # EXTERNAL
output = field(1, b"w")
graph = field(2, b"g") + field(5, tensor) + field(12, output)
opset = field(1, b"") + number(2, 17)
model = number(1, 8) + field(8, opset) + field(7, graph)
with open(sys.argv[1], "wb") as f:
    f.write(model)
