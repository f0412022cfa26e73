#!/usr/bin/env python3
"""Reference results for the fuse-run lit tests, computed with numpy.

    ref.py CASE IN_DIR OUT_DIR

reads IN_DIR/input_N.npy (written by `fuse-run --save-inputs`), computes
the outputs of CASE in float64 (rounded to the dtype of the result at the
end, as the interpreter does at each op boundary), and writes
OUT_DIR/output_N.npy for `fuse-run --compare`. The formulas here are
written from the ops' definitions in docs/dialects/graph.md, independently
of the interpreter's C code.
"""
import math
import sys

import numpy as np

erf = np.vectorize(math.erf)


def f64(x):
    return np.asarray(x, dtype=np.float64)


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def case_unary(x):
    x = f64(x)
    a = np.abs(x)
    s = x * 2.5
    return [
        -x, a, np.exp(x), np.log(a), np.sqrt(a), 1.0 / np.sqrt(a), 1.0 / x,
        np.tanh(x), sigmoid(x), np.maximum(x, 0),
        0.5 * x * (1 + erf(x / math.sqrt(2))),
        0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) *
                               (x + 0.044715 * x ** 3))),
        x * sigmoid(x), erf(x), np.floor(s), np.ceil(s), np.rint(s),
        np.sign(x), np.sin(x), np.cos(x), np.log1p(np.exp(x)),
        np.where(x >= 0, x, 0.2 * x),
        np.where(x > 0, x, 1.5 * (np.exp(x) - 1)),
        1.0507009873554805 * np.where(x > 0, x, 1.6732632423543772 *
                                      (np.exp(x) - 1)),
        np.clip(0.25 * x + 0.6, 0, 1), np.clip(x, -0.5, 1.0),
    ]


def case_binary(a, b, c):
    a, b = f64(a), f64(b)
    out = [a + b, a - b, a * b, a / b, np.fmod(a, b), np.abs(a) ** b,
           np.maximum(a, b), np.minimum(a, b), np.where(a >= 0, a, b * a)]
    out += [a == b, a != b, a < b, a <= b, a > b, a >= b]
    out += [np.where(a < b, a, b), np.where(c, a, 7.0)]
    return out


def case_shape(x, v):
    x = f64(x)
    idx = np.array([0, -1, 2])
    return [
        np.broadcast_to(f64(v), (2, 4, 6)),
        x.reshape(6, 4),
        np.transpose(x, (1, 0)),
        x[1:4:2, 0:6:2],
        x[3::-1, 5:0:-2],
        np.concatenate([x, x[:, :2]], axis=1),
        np.take(x, np.where(idx < 0, idx + 4, idx), axis=0),
        np.take(x, np.where(idx < 0, idx + 6, idx), axis=1),
        np.pad(x, ((1, 0), (0, 2)), constant_values=0.5),
        x[1:, :-1] + 0,
        np.array([[1.0, 2.0, 3.0]]) * x[:1, :3],
    ]


def reduce(fn, x, axes, keep):
    return fn(x, axis=axes, keepdims=keep)


def softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def log_softmax(x, axis):
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


def layer_norm(x, axes, eps, scale=1.0, bias=0.0):
    m = x.mean(axis=axes, keepdims=True)
    v = ((x - m) ** 2).mean(axis=axes, keepdims=True)
    return (x - m) / np.sqrt(v + eps) * scale + bias


def case_reduce(x, s, b, bx, c1, c2, c3, c4):
    x, s, b, bx = f64(x), f64(s), f64(b), f64(bx)
    c1, c2, c3, c4 = f64(c1), f64(c2), np.abs(f64(c3)), np.abs(f64(c4))
    ch = (1, 3, 1, 1)
    return [
        reduce(np.sum, x, (1,), False), reduce(np.mean, x, (0, 2), True),
        reduce(np.max, x, None, False), reduce(np.min, x, (2,), False),
        reduce(np.prod, x, (1,), True),
        softmax(x, 2), softmax(x, 0), log_softmax(x, 2),
        layer_norm(x, (2,), 1e-5, s, b), layer_norm(x, (1, 2), 1e-3),
        x / np.sqrt((x ** 2).mean(axis=2, keepdims=True) + 1e-5) * s,
        (bx - c3.reshape(ch)) / np.sqrt(c4.reshape(ch) + 1e-3) *
        c1.reshape(ch) + c2.reshape(ch),
    ]


def matmul(a, b, ta=False, tb=False):
    if ta:
        a = np.swapaxes(a, -1, -2)
    if tb:
        b = np.swapaxes(b, -1, -2)
    return np.matmul(a, b)


def conv2d(x, w, bias, strides, pads, dil, groups):
    n, c, h, wd = x.shape
    m, cg, kh, kw = w.shape
    xp = np.zeros((n, c, h + pads[0] + pads[2], wd + pads[1] + pads[3]))
    xp[:, :, pads[0]:pads[0] + h, pads[1]:pads[1] + wd] = x
    oh = (xp.shape[2] - dil[0] * (kh - 1) - 1) // strides[0] + 1
    ow = (xp.shape[3] - dil[1] * (kw - 1) - 1) // strides[1] + 1
    y = np.zeros((n, m, oh, ow))
    mg = m // groups
    for o in range(m):
        g = o // mg
        for i in range(oh):
            for j in range(ow):
                r0, c0 = i * strides[0], j * strides[1]
                win = xp[:, g * cg:(g + 1) * cg,
                         r0:r0 + dil[0] * (kh - 1) + 1:dil[0],
                         c0:c0 + dil[1] * (kw - 1) + 1:dil[1]]
                y[:, o, i, j] = (win * w[o]).sum(axis=(1, 2, 3))
    if bias is not None:
        y += bias.reshape(1, m, 1, 1)
    return y


def pool(x, k, strides, pads, avg, ceil_mode=False, cip=False):
    n, c, h, w = x.shape

    def out_size(d, i):
        num = d + pads[i] + pads[i + 2] - k[i]
        o = num // strides[i] + 1
        if ceil_mode and num % strides[i]:
            o = num // strides[i] + 2
            if (o - 1) * strides[i] >= d + pads[i]:
                o -= 1
        return o

    oh, ow = out_size(h, 0), out_size(w, 1)
    y = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            r0, c0 = i * strides[0] - pads[0], j * strides[1] - pads[1]
            r1, c1 = r0 + k[0], c0 + k[1]
            win = x[:, :, max(r0, 0):min(r1, h), max(c0, 0):min(c1, w)]
            if not avg:
                y[:, :, i, j] = win.max(axis=(2, 3))
                continue
            if cip:
                cnt = ((min(r1, h + pads[2]) - r0) *
                       (min(c1, w + pads[3]) - c0))
            else:
                cnt = win.shape[2] * win.shape[3]
            y[:, :, i, j] = win.sum(axis=(2, 3)) / cnt
    return y


def case_nn(a, b, v, bm, x, w, bias, wg):
    a, b, v, bm = f64(a), f64(b), f64(v), f64(bm)
    x, w, bias, wg = f64(x), f64(w), f64(bias), f64(wg)
    return [
        matmul(a, b), matmul(b, b, ta=True), matmul(a, b.T, tb=True),
        matmul(a, v), matmul(v, b), matmul(bm, a),
        conv2d(x, w, bias, (1, 1), (0, 0, 0, 0), (1, 1), 1),
        conv2d(x, w, None, (2, 1), (1, 0, 2, 1), (1, 2), 1),
        conv2d(x, wg, None, (1, 2), (1, 1, 1, 1), (1, 1), 2),
        pool(x, (3, 3), (2, 2), (0, 0, 0, 0), False),
        pool(x, (2, 3), (2, 2), (1, 1, 1, 1), False, ceil_mode=True),
        pool(x, (3, 3), (2, 2), (1, 1, 1, 1), True),
        pool(x, (3, 3), (2, 2), (1, 1, 1, 1), True, cip=True),
        pool(x, (2, 2), (2, 2), (0, 0, 0, 0), True, ceil_mode=True),
        x.mean(axis=(2, 3), keepdims=True), x.max(axis=(2, 3), keepdims=True),
    ]


def case_nn_nhwc(x, w, bias, wg, wd, bd):
    """conv2d and the pools with layout = "nhwc": the NCHW reference on
    x transposed to NCHW, its results transposed back."""
    x, w, bias, wg, wd, bd = (f64(t) for t in (x, w, bias, wg, wd, bd))
    xc = x.transpose(0, 3, 1, 2)
    ys = [
        conv2d(xc, w, bias, (1, 1), (0, 0, 0, 0), (1, 1), 1),
        conv2d(xc, w, None, (2, 1), (1, 0, 2, 1), (1, 2), 1),
        conv2d(xc, wg, None, (1, 2), (1, 1, 1, 1), (1, 1), 2),
        conv2d(xc, wd, bd, (2, 2), (1, 1, 1, 1), (1, 1), 4),
        pool(xc, (3, 3), (2, 2), (0, 0, 0, 0), False),
        pool(xc, (2, 3), (2, 2), (1, 1, 1, 1), False, ceil_mode=True),
        pool(xc, (3, 3), (2, 2), (1, 1, 1, 1), True),
        pool(xc, (3, 3), (2, 2), (1, 1, 1, 1), True, cip=True),
    ]
    return [y.transpose(0, 2, 3, 1) for y in ys] + [
        x.mean(axis=(1, 2), keepdims=True), x.max(axis=(1, 2), keepdims=True)]


CASES = {"unary": case_unary, "binary": case_binary, "shape": case_shape,
         "reduce": case_reduce, "nn": case_nn, "nn_nhwc": case_nn_nhwc}


def main():
    case, in_dir, out_dir = sys.argv[1:4]
    inputs = []
    while True:
        try:
            inputs.append(np.load("%s/input_%d.npy" % (in_dir, len(inputs))))
        except FileNotFoundError:
            break
    outputs = CASES[case](*inputs)
    for i, y in enumerate(outputs):
        y = np.asarray(y)
        dtype = np.bool_ if y.dtype == np.bool_ else np.float32
        np.save("%s/output_%d.npy" % (out_dir, i), y.astype(dtype))


if __name__ == "__main__":
    main()
