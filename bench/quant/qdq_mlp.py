#!/usr/bin/env python3
"""bench/quant/qdq_mlp.py - a BERT-like feed-forward block as two ONNX
models (text protos for protoc-c), no numpy needed:

  qdq: x -> Q(u8) -> DQ -> MatMul(DQ(W1 int8)) -> Add(b1) -> Relu -> Q(u8)
         -> DQ -> MatMul(DQ(W2 int8)) -> Add(b2) -> Q(u8) -> DQ -> y
  f32: the same with W1, W2 dequantized and no Q/DQ

  python3 qdq_mlp.py OUTDIR [--m 128] [--d 768] [--h 3072] [--pow2|--any]

--pow2 (default): power-of-two scales and weights small enough that every
sum stays below 2^24, so fold-qdq's default (exact) folding applies and
the integer result equals the f32 graph's bit for bit; --any: scales as
quantize_static would pick them (fold with fold-qdq{contractions inexact}).
Also writes OUTDIR/input.npy (seeded, uniform in [-4, 4)).
"""
import argparse
import os
import random
import struct


def raw(bs):
    return '"' + "".join("\\%03o" % (b & 255) for b in bs) + '"'


def tensor(name, dtype, dims, data_raw):
    d = "".join(f"    dims: {x}\n" for x in dims)
    return (f"  initializer {{\n{d}    data_type: {dtype}\n    name: \"{name}\"\n"
            f"    raw_data: {data_raw}\n  }}\n")


def scalar_f(name, v):
    return tensor(name, 1, [], raw(struct.pack("<f", v)))


def scalar_u8(name, v):
    return tensor(name, 2, [], raw([v]))


def scalar_i8(name, v):
    return tensor(name, 3, [], raw([v & 255]))


def node(op, ins, outs):
    s = "  node {\n"
    s += "".join(f'    input: "{i}"\n' for i in ins)
    s += "".join(f'    output: "{o}"\n' for o in outs)
    return s + f'    op_type: "{op}"\n  }}\n'


def io(kind, name, dims):
    d = "".join(f"          dim {{ dim_value: {x} }}\n" for x in dims)
    return (f"  {kind} {{\n    name: \"{name}\"\n    type {{\n      tensor_type {{\n"
            f"        elem_type: 1\n        shape {{\n{d}        }}\n      }}\n    }}\n  }}\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("--m", type=int, default=128)
    ap.add_argument("--d", type=int, default=768)
    ap.add_argument("--h", type=int, default=3072)
    ap.add_argument("--any", action="store_true")
    a = ap.parse_args()
    M, D, H = a.m, a.d, a.h
    rng = random.Random(7)
    wmax = 32
    w1 = [rng.randint(-wmax, wmax) for _ in range(D * H)]
    w2 = [rng.randint(-wmax, wmax) for _ in range(H * D)]
    if a.any:
        sx, s1w, s1, s2w, s2 = 0.0317, 0.00731, 0.127, 0.00513, 0.831
    else:
        sx, s1w, s1, s2w, s2 = 2**-4, 2**-7, 2**-3, 2**-7, 1.0
    b1 = [rng.uniform(-1, 1) for _ in range(H)]
    b2 = [rng.uniform(-1, 1) for _ in range(D)]
    b1 = [struct.unpack("<f", struct.pack("<f", v))[0] for v in b1]
    b2 = [struct.unpack("<f", struct.pack("<f", v))[0] for v in b2]
    head = 'ir_version: 7\nopset_import { version: 13 }\nproducer_name: "fuse-bench"\ngraph {\n'
    qdq = head + '  name: "qdq_mlp"\n'
    qdq += node("QuantizeLinear", ["x", "sx", "zx"], ["xq"])
    qdq += node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"])
    qdq += node("DequantizeLinear", ["w1", "s1w", "zw"], ["w1d"])
    qdq += node("MatMul", ["xd", "w1d"], ["h0"])
    qdq += node("Add", ["h0", "b1"], ["h1"])
    qdq += node("Relu", ["h1"], ["h2"])
    qdq += node("QuantizeLinear", ["h2", "s1", "z0"], ["hq"])
    qdq += node("DequantizeLinear", ["hq", "s1", "z0"], ["hd"])
    qdq += node("DequantizeLinear", ["w2", "s2w", "zw"], ["w2d"])
    qdq += node("MatMul", ["hd", "w2d"], ["y0"])
    qdq += node("Add", ["y0", "b2"], ["y1"])
    qdq += node("QuantizeLinear", ["y1", "s2", "zx"], ["yq"])
    qdq += node("DequantizeLinear", ["yq", "s2", "zx"], ["y"])
    qdq += scalar_f("sx", sx) + scalar_u8("zx", 128) + scalar_f("s1w", s1w)
    qdq += scalar_i8("zw", 0) + scalar_f("s1", s1) + scalar_u8("z0", 0)
    qdq += scalar_f("s2w", s2w) + scalar_f("s2", s2)
    qdq += tensor("w1", 3, [D, H], raw(w1)) + tensor("w2", 3, [H, D], raw(w2))
    fb1 = raw(struct.pack(f"<{H}f", *b1))
    fb2 = raw(struct.pack(f"<{D}f", *b2))
    qdq += tensor("b1", 1, [H], fb1) + tensor("b2", 1, [D], fb2)
    qdq += io("input", "x", [M, D]) + io("output", "y", [M, D]) + "}\n"
    f32 = head + '  name: "f32_mlp"\n'
    f32 += node("MatMul", ["x", "w1"], ["h0"]) + node("Add", ["h0", "b1"], ["h1"])
    f32 += node("Relu", ["h1"], ["h2"]) + node("MatMul", ["h2", "w2"], ["y0"])
    f32 += node("Add", ["y0", "b2"], ["y"])
    f32 += tensor("w1", 1, [D, H], raw(struct.pack(f"<{D*H}f", *[v * s1w for v in w1])))
    f32 += tensor("w2", 1, [H, D], raw(struct.pack(f"<{H*D}f", *[v * s2w for v in w2])))
    f32 += tensor("b1", 1, [H], fb1) + tensor("b2", 1, [D], fb2)
    f32 += io("input", "x", [M, D]) + io("output", "y", [M, D]) + "}\n"
    os.makedirs(a.outdir, exist_ok=True)
    with open(os.path.join(a.outdir, "qdq.textproto"), "w") as f:
        f.write(qdq)
    with open(os.path.join(a.outdir, "f32.textproto"), "w") as f:
        f.write(f32)
    seed = 12345
    xs = []
    for _ in range(M * D):
        seed = (seed * 1103515245 + 12345) % 2147483648
        xs.append(seed / 2147483648 * 8 - 4)
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }" % (M, D)
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    with open(os.path.join(a.outdir, "input.npy"), "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1"))
        f.write(struct.pack(f"<{M*D}f", *xs))


if __name__ == "__main__":
    main()
