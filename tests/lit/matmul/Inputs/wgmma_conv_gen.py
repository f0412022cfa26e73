#!/usr/bin/env python3
"""Writes the functions of tests/lit/matmul/wgmma-conv.fuse: NHWC conv2d
with constant weights (random, seeded), which the tensor-core implicit GEMM
repacks to k = (kh, kw, c) so that the input is gathered by 16-byte copies,
one tap per copy: the form the sm_90a warp-group kernel takes. Run at test
time: python3 wgmma_conv_gen.py > in.fuse"""
import random
import struct

random.seed(19)


def hexdata(n, ty):
    if ty == "f16":
        b = b"".join(struct.pack("<e", random.uniform(-1, 1)) for _ in range(n))
    else:  # bf16: the high half of an f32
        b = b"".join(struct.pack("<f", random.uniform(-1, 1))[2:]
                     for _ in range(n))
    return '"0x' + b.hex().upper() + '"'


def tt(shape, ty):
    return "tensor<%sx%s>" % ("x".join(map(str, shape)), ty)


def conv(name, n, h, w, c, oc, ty, stride, pad, epi):
    """conv2d 3x3 (NHWC input, OIHW constant weights) + bias + epi."""
    oh = (h + 2 * pad - 3) // stride + 1
    ow = (w + 2 * pad - 3) // stride + 1
    x, wt, bt = tt([n, h, w, c], ty), tt([oc, c, 3, 3], ty), tt([oc], ty)
    o = tt([n, oh, ow, oc], ty)
    args = "%%x: %s" % x + (", %%r: %s" % o if epi == "res" else "")
    s = "func.func @%s(%s) -> %s {\n" % (name, args, o)
    s += "  %%w = graph.constant dense<%s> : %s\n" % (hexdata(oc * c * 9, ty), wt)
    s += "  %%b = graph.constant dense<%s> : %s\n" % (hexdata(oc, ty), bt)
    s += ("  %%0 = graph.conv2d %%x, %%w, %%b {layout = \"nhwc\", pads = "
          "array<i64: %d, %d, %d, %d>, strides = array<i64: %d, %d>} : %s, %s, "
          "%s -> %s\n" % (pad, pad, pad, pad, stride, stride, x, wt, bt, o))
    if epi == "relu":
        s += "  %%1 = graph.relu %%0 : %s\n" % o
    else:
        s += "  %%1 = graph.add %%0, %%r : %s, %s -> %s\n" % (o, o, o)
    s += "  return %%1 : %s\n}\n\n" % o
    return s


# @c3: 32 -> 48 channels (N ragged against 64), M = 288 (ragged against
# 128), K = 288: five k steps of 64, the last ragged.
print(conv("c3", 2, 12, 12, 32, 48, "f16", 1, 1, "relu"), end="")
# @s2: stride 2 and a residual, bf16, 16 -> 64 channels (K = 144).
print(conv("s2", 1, 15, 15, 16, 64, "bf16", 2, 1, "res"), end="")
# @deep: 32 -> 64 channels at 7x7 (M = 49), run with split-k 2.
print(conv("deep", 1, 7, 7, 32, 64, "f16", 1, 1, "relu"), end="")
