#!/usr/bin/env python3
"""Writes the functions of tests/lit/matmul/conv-nhwc.fuse (below its RUN
and CHECK lines): NHWC conv2d nests with constant weights (random, seeded:
the tensor-core implicit GEMM repacks them to k = (kh, kw, c)) and with
weights passed as arguments (k = (c, kh, kw)). Run from the repository
root: python3 tests/lit/matmul/Inputs/conv_nhwc_gen.py > body.fuse"""
import random
import struct

random.seed(20)


def hexdata(n, ty):
    if ty == "f16":
        b = b"".join(struct.pack("<e", random.uniform(-1, 1)) for _ in range(n))
    elif ty == "bf16":
        b = b"".join(struct.pack("<f", random.uniform(-1, 1))[2:] for _ in range(n))
    else:
        b = b"".join(struct.pack("<f", random.uniform(-1, 1)) for _ in range(n))
    return '"0x' + b.hex().upper() + '"'


def const(name, shape, ty):
    n = 1
    for d in shape:
        n *= d
    t = "tensor<%sx%s>" % ("x".join(map(str, shape)), ty)
    return "  %%%s = graph.constant dense<%s> : %s\n" % (name, hexdata(n, ty), t), t


def tt(shape, ty):
    return "tensor<%sx%s>" % ("x".join(map(str, shape)), ty)


def out_hw(h, k, s, p0, p1, d):
    return (h + p0 + p1 - d * (k - 1) - 1) // s + 1


out = []

# res (f16): 3x3 pad 1, bias, residual add, relu; constant weights, C = 16.
wc, wt = const("w", [24, 16, 3, 3], "f16")
out.append(f"""func.func @res(%x: {tt([2,9,10,16],'f16')}, %b: {tt([24],'f16')}, %r: {tt([2,9,10,24],'f16')}) -> {tt([2,9,10,24],'f16')} {{
{wc}  %0 = graph.conv2d %x, %w, %b {{layout = "nhwc", pads = array<i64: 1, 1, 1, 1>}} : {tt([2,9,10,16],'f16')}, {wt}, {tt([24],'f16')} -> {tt([2,9,10,24],'f16')}
  %1 = graph.add %0, %r : {tt([2,9,10,24],'f16')}
  %2 = graph.relu %1 : {tt([2,9,10,24],'f16')}
  return %2 : {tt([2,9,10,24],'f16')}
}}
""")

# stem (f16): 7x7 stride 2 pad 3 over 3 channels (C not a multiple of 8:
# the scalar gather), bias, relu.
wc, wt = const("w", [16, 3, 7, 7], "f16")
bc, bt = const("b", [16], "f16")
oh, ow = out_hw(15, 7, 2, 3, 3, 1), out_hw(13, 7, 2, 3, 3, 1)
yt = tt([2, oh, ow, 16], "f16")
out.append(f"""func.func @stem(%x: {tt([2,15,13,3],'f16')}) -> {yt} {{
{wc}{bc}  %0 = graph.conv2d %x, %w, %b {{layout = "nhwc", strides = array<i64: 2, 2>, pads = array<i64: 3, 3, 3, 3>}} : {tt([2,15,13,3],'f16')}, {wt}, {bt} -> {yt}
  %1 = graph.relu %0 : {yt}
  return %1 : {yt}
}}
""")

# bn (f16, written NCHW: compiled with --layout nhwc, the batch norm folded
# into the weights and bias first): conv-bn-add-relu of a ResNet block.
wc, wt = const("w", [16, 16, 3, 3], "f16")
bn = ""
for nm in ("sc", "sh", "mu"):
    c, _ = const(nm, [16], "f16")
    bn += c
vals = ", ".join("%.3f" % random.uniform(0.5, 1.5) for _ in range(16))
bn += f"  %va = graph.constant dense<[{vals}]> : {tt([16],'f16')}\n"
xt = tt([2, 16, 6, 7], "f16")
v = tt([16], "f16")
out.append(f"""func.func @bn(%x: {xt}, %r: {xt}) -> {xt} {{
{wc}{bn}  %0 = graph.conv2d %x, %w {{pads = array<i64: 1, 1, 1, 1>}} : {xt}, {wt} -> {xt}
  %1 = graph.batch_norm %0, %sc, %sh, %mu, %va {{epsilon = 1.0e-05 : f32}} : {xt}, {v}, {v}, {v}, {v} -> {xt}
  %2 = graph.add %1, %r : {xt}
  %3 = graph.relu %2 : {xt}
  return %3 : {xt}
}}
""")

# s2 (bf16): 3x3 stride 2 pad 1 over 12 channels (8-byte copies), bias.
wc, wt = const("w", [16, 12, 3, 3], "bf16")
bc, bt = const("b", [16], "bf16")
o = out_hw(9, 3, 2, 1, 1, 1)
out.append(f"""func.func @s2(%x: {tt([1,9,9,12],'bf16')}) -> {tt([1,o,o,16],'bf16')} {{
{wc}{bc}  %0 = graph.conv2d %x, %w, %b {{layout = "nhwc", strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>}} : {tt([1,9,9,12],'bf16')}, {wt}, {bt} -> {tt([1,o,o,16],'bf16')}
  return %0 : {tt([1,o,o,16],'bf16')}
}}
""")

# pw (f16): 1x1 stride 1 (a GEMM over the pixels), constant weights, bias.
wc, wt = const("w", [20, 40, 1, 1], "f16")
out.append(f"""func.func @pw(%x: {tt([2,5,5,40],'f16')}, %b: {tt([20],'f16')}) -> {tt([2,5,5,20],'f16')} {{
{wc}  %0 = graph.conv2d %x, %w, %b : {tt([2,5,5,40],'f16')}, {wt}, {tt([20],'f16')} -> {tt([2,5,5,20],'f16')}
  return %0 : {tt([2,5,5,20],'f16')}
}}
""".replace("%b : ", '%b {layout = "nhwc"} : '))

# pws2 (f16): 1x1 stride 2 (a ResNet downsample) with weights passed as an
# argument: the two k orders coincide.
out.append(f"""func.func @pws2(%x: {tt([2,8,8,16],'f16')}, %w: {tt([24,16,1,1],'f16')}) -> {tt([2,4,4,24],'f16')} {{
  %0 = graph.conv2d %x, %w {{layout = "nhwc", strides = array<i64: 2, 2>}} : {tt([2,8,8,16],'f16')}, {tt([24,16,1,1],'f16')} -> {tt([2,4,4,24],'f16')}
  return %0 : {tt([2,4,4,24],'f16')}
}}
""")

# argw (f16): 3x3 weights passed as an argument (not repacked: k = (c, kh,
# kw), the input gathered element by element), dilation 2, odd OC.
o = out_hw(10, 3, 1, 2, 2, 2)
out.append(f"""func.func @argw(%x: {tt([2,10,10,8],'f16')}, %w: {tt([7,8,3,3],'f16')}) -> {tt([2,o,o,7],'f16')} {{
  %0 = graph.conv2d %x, %w {{layout = "nhwc", pads = array<i64: 2, 2, 2, 2>, dilations = array<i64: 2, 2>}} : {tt([2,10,10,8],'f16')}, {tt([7,8,3,3],'f16')} -> {tt([2,o,o,7],'f16')}
  %1 = graph.relu %0 : {tt([2,o,o,7],'f16')}
  return %1 : {tt([2,o,o,7],'f16')}
}}
""")

# odd (f16): 5 channels (10 bytes per pixel: no copy width divides it, the
# scalar gather with k = (kh, kw, c)), 3x3 pad (1, 0, 2, 1), odd OC.
wc, wt = const("w", [9, 5, 3, 3], "f16")
oh, ow = out_hw(7, 3, 1, 1, 2, 1), out_hw(6, 3, 1, 0, 1, 1)
out.append(f"""func.func @odd(%x: {tt([3,7,6,5],'f16')}) -> {tt([3,oh,ow,9],'f16')} {{
{wc}  %0 = graph.conv2d %x, %w {{layout = "nhwc", pads = array<i64: 1, 0, 2, 1>}} : {tt([3,7,6,5],'f16')}, {wt} -> {tt([3,oh,ow,9],'f16')}
  return %0 : {tt([3,oh,ow,9],'f16')}
}}
""")

# tf (f32, tf32 kernels): 3x3 pad 1 over 8 channels, constant weights,
# bias and relu.
wc, wt = const("w", [16, 8, 3, 3], "f32")
out.append(f"""func.func @tf(%x: {tt([2,6,6,8],'f32')}, %b: {tt([16],'f32')}) -> {tt([2,6,6,16],'f32')} {{
{wc}  %0 = graph.conv2d %x, %w, %b {{layout = "nhwc", pads = array<i64: 1, 1, 1, 1>}} : {tt([2,6,6,8],'f32')}, {wt}, {tt([16],'f32')} -> {tt([2,6,6,16],'f32')}
  %1 = graph.relu %0 : {tt([2,6,6,16],'f32')}
  return %1 : {tt([2,6,6,16],'f32')}
}}
""")

print("\n".join(out), end="")
