#!/usr/bin/env python3
"""bench/cpu/conv_gen.py - one-conv .fuse files with constant weights, as
the convolutions of an imported model are (the weights are graph.constant
hex blobs, batch_norm folded into them: a per-channel bias), for
`fuse-run F --device cpu --bench N`.

  python3 bench/cpu/conv_gen.py OUTDIR [NAME ...]

NAME is one of SHAPES below (default: all). Each file's function @conv is
relu(conv2d(x, w) + b) [+ a residual input r before the relu when the
name ends in _res], x random at run time (--random-inputs). The flops of
each file: 2 N M OH OW (C / groups) KH KW, printed by this script and by
fuse-run --bench (GFLOP/s).
"""
import os
import struct
import sys
import random

# name: (C, H, W, M, K, stride, pad)
SHAPES = {
    "r18_3x3_64_56": (64, 56, 56, 64, 3, 1, 1),
    "r18_3x3_128_28": (128, 28, 28, 128, 3, 1, 1),
    "r18_3x3_256_14": (256, 14, 14, 256, 3, 1, 1),
    "r18_3x3_512_7": (512, 7, 7, 512, 3, 1, 1),
    "r18_3x3s2_64_56": (64, 56, 56, 128, 3, 2, 1),
    "r18_3x3s2_128_28": (128, 28, 28, 256, 3, 2, 1),
    "r18_3x3s2_256_14": (256, 14, 14, 512, 3, 2, 1),
    "r18_1x1s2_64_56": (64, 56, 56, 128, 1, 2, 0),
    "r18_1x1s2_128_28": (128, 28, 28, 256, 1, 2, 0),
    "r18_1x1s2_256_14": (256, 14, 14, 512, 1, 2, 0),
    "r18_stem_7x7s2": (3, 224, 224, 64, 7, 2, 3),
    "r50_1x1_64to256_56": (64, 56, 56, 256, 1, 1, 0),
    "r50_1x1_256to64_56": (256, 56, 56, 64, 1, 1, 0),
    "r50_1x1_1024to256_14": (1024, 14, 14, 256, 1, 1, 0),
    "r50_1x1s2_256to512_56": (256, 56, 56, 512, 1, 2, 0),
    "r50_1x1_512to128_28": (512, 28, 28, 128, 1, 1, 0),
    "r50_1x1_2048to512_7": (2048, 7, 7, 512, 1, 1, 0),
}


def hexblob(vals):
    return "0x" + b"".join(struct.pack("<f", v) for v in vals).hex().upper()


def gen(name, shape, res=False):
    C, H, W, M, K, s, p = shape
    OH = (H + 2 * p - K) // s + 1
    OW = (W + 2 * p - K) // s + 1
    rnd = random.Random(hash(name) & 0xFFFF)
    scale = (2.0 / (C * K * K)) ** 0.5
    w = [rnd.uniform(-scale, scale) for _ in range(M * C * K * K)]
    b = [rnd.uniform(-0.1, 0.1) for _ in range(M)]
    xt = f"tensor<1x{C}x{H}x{W}xf32>"
    wt = f"tensor<{M}x{C}x{K}x{K}xf32>"
    bt = f"tensor<{M}xf32>"
    yt = f"tensor<1x{M}x{OH}x{OW}xf32>"
    args = f"%x: {xt}" + (f", %r: {yt}" if res else "")
    lines = [
        f"func.func @conv({args}) -> {yt} {{",
        f'  %w = graph.constant dense<"{hexblob(w)}"> : {wt}',
        f'  %b = graph.constant dense<"{hexblob(b)}"> : {bt}',
        f"  %0 = graph.conv2d %x, %w, %b {{strides = array<i64: {s}, {s}>, "
        f"pads = array<i64: {p}, {p}, {p}, {p}>}} : {xt}, {wt}, {bt} -> {yt}",
    ]
    last = "%0"
    if res:
        lines.append(f"  %1 = graph.add %0, %r : {yt}, {yt} -> {yt}")
        last = "%1"
    lines.append(f"  %2 = graph.relu {last} : {yt}")
    lines.append(f"  return %2 : {yt}")
    lines.append("}")
    flops = 2 * M * OH * OW * C * K * K
    return "\n".join(lines) + "\n", flops


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    names = sys.argv[2:] or list(SHAPES)
    os.makedirs(out, exist_ok=True)
    for n in names:
        res = n.endswith("_res")
        text, flops = gen(n, SHAPES[n[:-4] if res else n], res)
        with open(os.path.join(out, n + ".fuse"), "w") as f:
            f.write(text)
        print(f"{n}\t{flops}")


if __name__ == "__main__":
    main()
