"""Expected output of Inputs/qdq-conv.textproto, computed by numpy the way
ONNX's reference implementation defines the QDQ ops: quantize =
saturate(rint(x / scale) + zero_point) (f32 division, ties to even),
dequantize = (q - zero_point) * scale in f32, the conv in f32 (float64
accumulation rounded once: with the model's power-of-two scales every
product and sum is exact, so the order does not matter).

usage: qdq_ref.py MODEL.textproto DIR   (reads DIR/input_0.npy, writes
DIR/exp/output_0.npy)
"""
import os
import re
import sys

import numpy as np


def initializers(text):
    out = {}
    for block in re.findall(r"initializer \{(.*?)\n  \}", text, re.S):
        name = re.search(r'name: "([^"]+)"', block).group(1)
        dims = [int(d) for d in re.findall(r"dims: (-?\d+)", block)]
        dt = int(re.search(r"data_type: (\d+)", block).group(1))
        vals = re.findall(r"(?:float_data|int32_data): (\S+)", block)
        dtype = {1: np.float32, 2: np.uint8, 3: np.int8}[dt]
        arr = np.array([float(v) for v in vals]).astype(dtype)
        out[name] = arr.reshape(dims)
    return out


def quantize(x, s, z, axis=1):
    s, z = per_axis(s, x, axis), per_axis(z, x, axis)
    info = np.iinfo(z.dtype)
    q = np.rint(x.astype(np.float32) / s.astype(np.float32))
    return np.clip(q + z.astype(np.float32), info.min, info.max).astype(z.dtype)


def dequantize(q, s, z, axis=1):
    s, z = per_axis(s, q, axis), per_axis(z, q, axis)
    d = q.astype(np.int32) - z.astype(np.int32)
    return (d.astype(np.float32) * s.astype(np.float32)).astype(np.float32)


def per_axis(p, x, axis):
    if p.size == 1:
        return p.reshape(())
    shape = [1] * x.ndim
    shape[axis] = p.size
    return p.reshape(shape)


def conv(x, w, b, pad):
    n, c, h, wd = x.shape
    m, _, kh, kw = w.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = h + 2 * pad - kh + 1, wd + 2 * pad - kw + 1
    y = np.zeros((n, m, oh, ow))
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i:i + oh, j:j + ow]
            y += np.einsum("nchw,mc->nmhw", patch, w[:, :, i, j].astype(np.float64))
    return (y + b.astype(np.float64)[None, :, None, None]).astype(np.float32)


def main():
    model, d = sys.argv[1], sys.argv[2]
    t = initializers(open(model).read())
    x = np.load(os.path.join(d, "input_0.npy"))
    xd = dequantize(quantize(x, t["sx"], t["zx"]), t["sx"], t["zx"])
    wd = dequantize(t["w"], t["sw"], t["zw"], axis=0)
    r = np.maximum(conv(xd, wd, t["b"], 1), np.float32(0))
    y = dequantize(quantize(r, t["sy"], t["zy"]), t["sy"], t["zy"])
    os.makedirs(os.path.join(d, "exp"), exist_ok=True)
    np.save(os.path.join(d, "exp", "output_0.npy"), y)


main()
