#!/usr/bin/python3
"""Inputs and expected outputs of the opset 18-21 models in this folder.

    ref.py DIR   writes DIR/<model>/input_N.npy and output_N.npy

The expected outputs are computed here with numpy from the ONNX operator
definitions (docs/Changelog.md of ONNX), independently of fuse; lit runs
each model with fuse-run --compare against them. Inputs are fixed
formulas, so the files are the same on every run.
"""
import math
import os
import sys

import numpy as np

F = np.float32


def vals(shape, scale=3.0, phase=0.0):
    """Deterministic values in [-scale, scale]."""
    n = int(np.prod(shape))
    return (scale * np.sin(np.arange(n) * 1.7 + phase)).reshape(shape).astype(F)


# ---- reductions, Split, Pad ------------------------------------------------

def reduce_case():
    x = np.array([[1, -2, 3], [4, 5, -6]], F)
    b = np.array([[True, False], [True, True], [False, False]])
    m = x.max(axis=-1, keepdims=True)
    lse = np.log(np.exp(x - m).sum(axis=-1, keepdims=True)) + m
    outs = [x.max(axis=-1), x, np.sqrt((x * x).sum(axis=0, keepdims=True)),
            lse, (x * x).sum(), b.any(axis=1), b.all(axis=1)]
    return [x, b], outs


def split_case():
    x = np.arange(14, dtype=F).reshape(2, 7)
    return [x], [x[:, 0:3], x[:, 3:6], x[:, 6:7]]


def pad_case():
    x = np.arange(1, 7, dtype=F).reshape(2, 3)
    # Wrap pads the data as a torus: output j reads (j - begin) mod dim.
    # (np.pad's wrap mode is not periodic when a pad exceeds the dim in
    # numpy before 2.0: [1 2 3] padded by (2, 4) ends ... 3 2.)
    wrap = np.take(x, (np.arange(3 + 2 + 4) - 2) % 3, axis=1)
    return [x], [np.pad(x, ((0, 0), (1, 2)), constant_values=9), wrap,
                 np.pad(x, ((1, 1), (0, 0)), mode="edge"), x.astype(np.int64)]


# ---- Resize ----------------------------------------------------------------

def keys(t, a=-0.75):
    t = abs(t)
    if t <= 1:
        return (a + 2) * t ** 3 - (a + 3) * t ** 2 + 1
    if t < 2:
        return a * t ** 3 - 5 * a * t ** 2 + 8 * a * t - 4 * a
    return 0.0


def resize_1d(v, out, scale, mode, coord, antialias):
    """One axis of ONNX Resize: out samples of the 1-D array v."""
    n = len(v)
    res = np.zeros(out)
    for j in range(out):
        if coord == "half_pixel":
            x = (j + 0.5) / scale - 0.5
        else:  # half_pixel_symmetric
            x = n / 2 * (1 - out / (n * scale)) + (j + 0.5) / scale - 0.5
        s = min(scale, 1.0) if antialias else 1.0
        support = (1.0 if mode == "linear" else 2.0) / s
        lo, hi = math.floor(x - support) + 1, math.ceil(x + support)
        idx = [i for i in range(lo, hi) if abs(i - x) * s < support]
        if mode == "linear":
            w = [max(0.0, 1 - abs(i - x) * s) for i in idx]
        else:
            w = [keys((i - x) * s) for i in idx]
        w = np.array(w) / sum(w)
        res[j] = sum(wi * v[min(max(i, 0), n - 1)] for wi, i in zip(w, idx))
    return res


def resize_axis(x, axis, out, scale, mode, coord="half_pixel",
                antialias=False):
    return np.apply_along_axis(resize_1d, axis, x, out, scale, mode, coord,
                               antialias).astype(F)


def resize_case():
    x = vals((1, 1, 4, 6))
    keep = resize_axis(resize_axis(x, 2, 3, 0.75, "linear"), 3, 5, 0.75,
                       "linear")
    sym = resize_axis(x, 3, 10, 1.7, "linear", "half_pixel_symmetric")
    aal = resize_axis(x, 3, 3, 0.5, "linear", antialias=True)
    aac = resize_axis(x, 2, 2, 0.5, "cubic", antialias=True)
    return [x], [keep, sym, aal, aac]


# ---- new ops ---------------------------------------------------------------

def group_norm(x, groups, scale, bias, eps, per_channel):
    n, c = x.shape[:2]
    g = x.reshape(n, groups, -1).astype(np.float64)
    mean = g.mean(axis=2, keepdims=True)
    var = ((g - mean) ** 2).mean(axis=2, keepdims=True)
    y = (g - mean) / np.sqrt(var + eps)
    if per_channel:
        y = y.reshape(x.shape)
        shape = (1, c) + (1,) * (x.ndim - 2)
    else:
        shape = (1, groups, 1)
    y = y * scale.reshape(shape) + bias.reshape(shape)
    return y.reshape(x.shape).astype(F)


def lp_pool(x, k, s, p, ceil_mode):
    n, c, h, w = x.shape

    def count(d):
        o = (d - k + (s - 1 if ceil_mode else 0)) // s + 1
        if ceil_mode and (o - 1) * s >= d:
            o -= 1
        return o

    oh, ow = count(h), count(w)
    y = np.zeros((n, c, oh, ow))
    a = np.abs(x.astype(np.float64)) ** p
    for i in range(oh):
        for j in range(ow):
            win = a[:, :, i * s:i * s + k, j * s:j * s + k]
            y[:, :, i, j] = win.sum(axis=(2, 3)) ** (1.0 / p)
    return y.astype(F)


def affine_grid(theta, h, w, align):
    def coords(d):
        if align:
            return np.linspace(-1, 1, d) if d > 1 else np.array([-1.0])
        return (2 * np.arange(d) + 1) / d - 1

    ys, xs = np.meshgrid(coords(h), coords(w), indexing="ij")
    base = np.stack([xs, ys, np.ones_like(xs)], axis=-1).reshape(-1, 3)
    grid = np.einsum("pk,nik->npi", base, theta.astype(np.float64))
    return grid.reshape(theta.shape[0], h, w, 2).astype(F)


def dilated_avg_pool(x, k, d):
    """AveragePool-19: a k x k window with dilation d, stride 1, no pads."""
    n, c, h, w = x.shape
    span = (k - 1) * d + 1
    y = np.zeros((n, c, h - span + 1, w - span + 1))
    for a in range(k):
        for b in range(k):
            y += x[:, :, a * d:a * d + y.shape[2], b * d:b * d + y.shape[3]]
    return (y / (k * k)).astype(F)


def newops_case():
    x = vals((2, 5))
    i = np.array([0, 5, -7, 2147483647], np.int32)
    g = vals((2, 4, 3), 2.0, 0.3)
    p = vals((1, 2, 6, 6), 1.5, 0.7)
    theta = vals((2, 2, 3), 1.0, 0.2)
    erf = np.vectorize(math.erf)
    xd = x.astype(np.float64)
    gelu = 0.5 * xd * (1 + erf(xd / math.sqrt(2)))
    gelu_tanh = 0.5 * xd * (1 + np.tanh(math.sqrt(2 / math.pi) *
                                        (xd + 0.044715 * xd ** 3)))
    mish = xd * np.tanh(np.log1p(np.exp(xd)))
    gscale = np.array([1, 2, 0.5, -1], F)
    gbias = np.array([0, 1, -1, 0.25], F)
    crop = np.zeros((4, 2), F)
    crop[1:3] = x[:, 1:3]
    outs = [gelu.astype(F), gelu_tanh.astype(F), mish.astype(F), ~i,
            group_norm(g, 2, gscale, gbias, 1e-3, True),
            lp_pool(p, 2, 2, 2, False), lp_pool(p, 3, 2, 3, True), crop,
            np.pad(x, ((0, 0), (1, 2))),
            affine_grid(theta, 2, 3, False), affine_grid(theta, 2, 3, True),
            dilated_avg_pool(p, 2, 2)]
    return [x, i, g, p, theta], outs


def col2im(x, image, block, s=(1, 1), d=(1, 1), p=(0, 0, 0, 0)):
    n, ck, _ = x.shape
    c = ck // (block[0] * block[1])
    size = [image[i] + p[i] + p[2 + i] for i in range(2)]
    pos = [(size[i] - (block[i] - 1) * d[i] - 1) // s[i] + 1 for i in range(2)]
    xv = x.reshape(n, c, block[0], block[1], pos[0], pos[1])
    y = np.zeros((n, c, size[0], size[1]))
    for i in range(block[0]):
        for j in range(block[1]):
            for a in range(pos[0]):
                for b in range(pos[1]):
                    y[:, :, a * s[0] + i * d[0], b * s[1] + j * d[1]] += \
                        xv[:, :, i, j, a, b]
    return y[:, :, p[0]:p[0] + image[0], p[1]:p[1] + image[1]].astype(F)


def col2im_case():
    x = vals((1, 12, 9), 2.0, 0.1)
    x2 = vals((2, 8, 6), 1.0, 0.4)
    return [x, x2], [col2im(x, (5, 6), (2, 3), (2, 1), (1, 2), (1, 0, 0, 1)),
                     col2im(x2, (3, 4), (2, 2))]


def groupnorm18_case():
    g = vals((2, 4, 3), 2.0, 0.3)
    return [g], [group_norm(g, 2, np.array([2, -0.5], F),
                            np.array([1, 0.25], F), 1e-5, False)]


CASES = {
    "reduce": reduce_case,
    "split": split_case,
    "pad": pad_case,
    "resize": resize_case,
    "newops": newops_case,
    "groupnorm18": groupnorm18_case,
    "col2im": col2im_case,
}


def main():
    out_dir = sys.argv[1]
    for name, fn in CASES.items():
        d = os.path.join(out_dir, name)
        os.makedirs(d, exist_ok=True)
        ins, outs = fn()
        for k, a in enumerate(ins):
            np.save(os.path.join(d, "input_%d.npy" % k), a)
        for k, a in enumerate(outs):
            np.save(os.path.join(d, "output_%d.npy" % k), np.asarray(a))


if __name__ == "__main__":
    main()
