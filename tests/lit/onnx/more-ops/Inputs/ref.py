#!/usr/bin/python3
"""Inputs and expected outputs of the models in this folder.

    ref.py DIR   writes DIR/<model>/input_N.npy and output_N.npy

The expected outputs are computed with numpy from the ONNX operator
definitions, independently of fuse (direct sums over the kernel window,
scatters for the transposed convolution), in float64. Inputs are fixed
formulas, so the files are the same on every run.
"""
import itertools
import math
import os
import sys

import numpy as np

F = np.float32


def vals(shape, scale=1.0, phase=0.0):
    """Deterministic values in [-scale, scale]."""
    n = int(np.prod(shape))
    return (scale * np.sin(np.arange(n) * 1.7 + phase)).reshape(shape).astype(F)


def conv(x, w, b, strides, pads, dil, group):
    """ONNX Conv of any spatial rank: a sum over the kernel offsets."""
    x, w = x.astype(np.float64), w.astype(np.float64)
    sp = x.ndim - 2
    n, c = x.shape[:2]
    m, cg = w.shape[:2]
    x = np.pad(x, [(0, 0), (0, 0)] + [(pads[i], pads[sp + i]) for i in range(sp)])
    k = w.shape[2:]
    o = [(x.shape[2 + i] - ((k[i] - 1) * dil[i] + 1)) // strides[i] + 1
         for i in range(sp)]
    y = np.zeros([n, group, m // group] + o)
    wg = w.reshape((group, m // group, cg) + tuple(k))
    for kk in itertools.product(*[range(v) for v in k]):
        sl = tuple(slice(kk[i] * dil[i], kk[i] * dil[i] + (o[i] - 1) * strides[i] + 1,
                         strides[i]) for i in range(sp))
        xs = x[(slice(None), slice(None)) + sl].reshape([n, group, cg] + o)
        wk = wg[(slice(None), slice(None), slice(None)) + kk]
        y += np.einsum("ngc...,gmc->ngm...", xs, wk)
    y = y.reshape([n, m] + o)
    if b is not None:
        y += b.reshape([1, m] + [1] * sp)
    return y


def conv_transpose(x, w, b, strides, pads, outpad, group):
    """ONNX ConvTranspose: every input element scatters w times itself."""
    x, w = x.astype(np.float64), w.astype(np.float64)
    sp = x.ndim - 2
    n, c = x.shape[:2]
    cg, mg = c // group, w.shape[1]
    k = w.shape[2:]
    ins = x.shape[2:]
    full = [(ins[i] - 1) * strides[i] + k[i] + outpad[i] for i in range(sp)]
    y = np.zeros([n, group, mg] + full)
    xg = x.reshape([n, group, cg] + list(ins))
    wg = w.reshape((group, cg, mg) + tuple(k))
    for kk in itertools.product(*[range(v) for v in k]):
        sl = tuple(slice(kk[i], kk[i] + (ins[i] - 1) * strides[i] + 1, strides[i])
                   for i in range(sp))
        y[(slice(None),) * 3 + sl] += np.einsum(
            "ngc...,gcm->ngm...", xg, wg[(slice(None),) * 3 + kk])
    crop = tuple(slice(pads[i], full[i] - pads[sp + i]) for i in range(sp))
    y = y.reshape([n, group * mg] + full)[(slice(None),) * 2 + crop]
    if b is not None:
        y += b.reshape([1, -1] + [1] * sp)
    return y


def conv_nd_case():
    x = vals((2, 4, 5, 6, 4))
    w = vals((6, 2, 3, 2, 2), 0.5, 1.0)
    b = vals((6,), 1.0, 2.0)
    x4 = vals((1, 2, 3, 4, 3, 4), 1.0, 0.3)
    w4 = vals((3, 2, 2, 2, 2, 3), 0.5, 0.7)
    wt = vals((4, 3, 2, 3, 2), 0.5, 1.3)
    bt = vals((6,), 1.0, 0.4)
    y = conv(x, w, b, [2, 1, 2], [1, 0, 1, 0, 1, 1], [1, 2, 1], 2)
    y4 = conv(x4, w4, None, [1, 1, 1, 1], [0, 1, 0, 1, 0, 0, 1, 0], [1] * 4, 1)
    yt = conv_transpose(x, wt, bt, [2, 1, 3], [1, 0, 1, 0, 1, 2], [1, 0, 1], 2)
    return [x, w, b, x4, w4, wt, bt], [a.astype(F) for a in (y, y4, yt)]


def datadep_case():
    x = vals((2, 4), 2.0, 0.5)
    v = np.array([10, 20, 30, 40], F)
    cond = np.array([1, 0, 1], bool)
    c = x[:, :3][:, cond]
    m = np.array([[0, 2, 0], [-1, 0, 3]], F)
    nz = np.array(np.nonzero(m), np.int64)
    # Unique columns in order of first occurrence (sorted = 0).
    u = np.array([[3, 1, 3, 2, 1], [0, 5, 0, 4, 5]], np.int64)
    cols, first, inv, cnt = [], [], [], []
    for j in range(u.shape[1]):
        col = tuple(u[:, j])
        if col not in cols:
            cols.append(col)
            first.append(j)
            cnt.append(0)
        inv.append(cols.index(col))
        cnt[inv[-1]] += 1
    uy = u[:, first]
    # NMS by hand: box 1 (0.95) first; box 0 overlaps it (IoU 0.82) and
    # is suppressed; box 3 (0.8) is inside box 0 only; box 2 (0.3) apart.
    sel = np.array([[0, 0, 1], [0, 0, 3], [0, 0, 2]], np.int64)
    outs = [c, nz, uy, np.array(first, np.int64), np.array(inv, np.int64),
            np.array(cnt, np.int64), sel, v[sel[:, 2]]]
    return [x, v], outs



def datadep_error_case():
    x = np.array([[0, 1, 0], [2, 0, 3]], F)
    return [x], [np.array(np.nonzero(x), np.int64)]


def reflect(v, lo2, hi2):
    """PyTorch's reflect_coordinates: v reflected into [lo2/2, hi2/2]."""
    if lo2 == hi2:
        return 0.0
    lo, span = lo2 / 2, (hi2 - lo2) / 2
    v = abs(v - lo)
    extra, flips = math.fmod(v, span), math.floor(v / span)
    return extra + lo if flips % 2 == 0 else span - extra + lo


def grid_sample(x, grid, mode, padding, align):
    """GridSample-16/20 on 4-D inputs, pixel by pixel (PyTorch's
    grid_sample, which ONNX's definition follows)."""
    x = x.astype(np.float64)
    n, c, h, w = x.shape
    ho, wo = grid.shape[1:3]
    y = np.zeros((n, c, ho, wo))

    def unnorm(g, size):
        return (g + 1) / 2 * (size - 1) if align else ((g + 1) * size - 1) / 2

    def pad(v, size):
        if padding == "border":
            return min(max(v, 0), size - 1)
        if padding == "reflection":
            v = reflect(v, 0, 2 * (size - 1)) if align else reflect(v, -1, 2 * size - 1)
            return min(max(v, 0), size - 1)
        return v

    def at(b, yy, xx):
        if 0 <= xx <= w - 1 and 0 <= yy <= h - 1:
            return x[b, :, int(yy), int(xx)]
        return np.zeros(c)

    def cc(t):
        a, t = -0.75, abs(t)
        if t <= 1:
            return ((a + 2) * t - (a + 3)) * t * t + 1
        return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a

    for b in range(n):
        for i in range(ho):
            for j in range(wo):
                gx = unnorm(float(grid[b, i, j, 0]), w)
                gy = unnorm(float(grid[b, i, j, 1]), h)
                if mode == "cubic":
                    fx, fy = math.floor(gx), math.floor(gy)
                    acc = np.zeros(c)
                    for q in range(4):
                        for p in range(4):
                            tx, ty = fx - 1 + p, fy - 1 + q
                            acc += (at(b, pad(ty, h), pad(tx, w)) *
                                    cc(gx - tx) * cc(gy - ty))
                    y[b, :, i, j] = acc
                    continue
                gx, gy = pad(gx, w), pad(gy, h)
                if mode == "nearest":
                    y[b, :, i, j] = at(b, np.round(gy), np.round(gx))
                    continue
                x0, y0 = math.floor(gx), math.floor(gy)
                wx, wy = gx - x0, gy - y0
                y[b, :, i, j] = (at(b, y0, x0) * (1 - wx) * (1 - wy) +
                                 at(b, y0, x0 + 1) * wx * (1 - wy) +
                                 at(b, y0 + 1, x0) * (1 - wx) * wy +
                                 at(b, y0 + 1, x0 + 1) * wx * wy)
    return y


def gridsample_case():
    x = vals((2, 3, 4, 5), 2.0, 0.1)
    grid = vals((2, 3, 6, 2), 1.7, 0.9)
    outs = [grid_sample(x, grid, "cubic", "reflection", False),
            grid_sample(x, grid, "nearest", "border", True),
            grid_sample(x, grid, "linear", "reflection", True),
            grid_sample(x, grid, "cubic", "zeros", True)]
    return [x, grid], [a.astype(F) for a in outs]


def trig_case():
    mag = np.logspace(-4, 6, 200)
    t = np.concatenate([-mag[::-1], [0.0], mag, [np.inf, -np.inf]])
    s = np.linspace(-1, 1, 401)
    outs = [np.arctan(t.astype(F)), np.arcsin(s.astype(F)),
            np.arccos(s.astype(F)), np.arctan(t), np.arccos(s)]
    return [t.astype(F), s.astype(F), t, s], outs


def training_case(t=0):
    """Adam and Nesterov Momentum as their ONNX definitions write them."""
    r, tt = np.array(0.1, F), np.array(t, np.int64)
    x, g = vals((3,), 1.0, 0.2), vals((3,), 1.0, 0.4)
    v, h = vals((3,), 0.5, 0.6), np.abs(vals((3,), 0.5, 0.8))
    x2, g2, v2 = vals((2, 2), 1.0, 1.0), vals((2, 2), 1.0, 1.2), vals((2, 2), 0.5, 1.4)
    d = np.float64
    # Adam: alpha 0.8, beta 0.999, epsilon 0.01, post 0.1.
    a, b = 0.8, 0.999
    vn = a * d(v) + (1 - a) * d(g)
    hn = b * d(h) + (1 - b) * d(g) * d(g)
    ra = d(r) * np.sqrt(1 - b ** t) / (1 - a ** t) if t > 0 else d(r)
    xn = (1 - 0.1) * (d(x) - ra * (vn / (np.sqrt(hn) + 0.01)))
    outs = [xn, vn, hn]
    # Nesterov: alpha 0.9, beta 0.5, norm_coefficient 0.01.
    ys, ws = [], []
    for xx, gg, vv in ((x, g, v), (x2, g2, v2)):
        gr = 0.01 * d(xx) + d(gg)
        beta = 0.5 if t > 0 else 1.0
        vnew = 0.9 * d(vv) + beta * gr
        ys.append(d(xx) - d(r) * (gr + 0.9 * vnew))
        ws.append(vnew)
    outs += ys + ws
    return [r, tt, x, g, v, h, x2, g2, v2], [o.astype(F) for o in outs]


def cplx(z):
    return np.stack([z.real, z.imag], axis=-1)


def mel(bins, dft_length, rate, lo, hi):
    """MelWeightMatrix as ONNX's definition computes it."""
    spec = dft_length // 2 + 1
    f = np.arange(0, bins + 2)
    mlo, mhi = 2595 * np.log10(1 + lo / 700), 2595 * np.log10(1 + hi / 700)
    f = f * ((mhi - mlo) / (bins + 2)) + mlo
    f = 700 * (np.power(10, f / 2595) - 1)
    f = ((dft_length + 1) * f) // rate
    f = f.astype(int)
    out = np.zeros((spec, bins))
    for i in range(bins):
        l, c, h = f[i], f[i + 1], f[i + 2]
        if c == l:
            out[c, i] = 1
        else:
            for j in range(l, c + 1):
                out[j, i] = (j - l) / (c - l)
        for j in range(c, h):
            out[j, i] = (h - j) / (h - c)
    return out


def signal_case():
    x = vals((2, 6, 3, 1), 1.0, 0.1)
    xc = vals((2, 5, 2), 1.0, 0.5)
    s = vals((1, 20, 2), 1.0, 0.9)
    a = cplx(np.fft.fft(x[..., 0].astype(np.float64), n=8, axis=1)[:, :5])
    z = xc[..., 0].astype(np.float64) + 1j * xc[..., 1]
    b = cplx(np.fft.ifft(z, n=4, axis=1))
    zs = s[0, :, 0].astype(np.float64) + 1j * s[0, :, 1]
    frames = [np.fft.fft(zs[f * 3:f * 3 + 6]) for f in range(5)]
    c = cplx(np.array(frames))[None]
    d = mel(5, 16, 8000, 100.0, 3000.0)
    return [x, xc, s], [o.astype(F) for o in (a, b, c, d)]


def uint8_case():
    """uint8 Max, Min, Div, Mod, Greater, ArgMax, ReduceMax, MaxPool (pads
    1 at the top and left) and BitShift; the files hold the bits as int8, as
    fuse-run's .npy reader takes no unsigned dtypes."""
    a = np.array([[200, 3, 255, 128], [7, 90, 130, 0]], np.uint8)
    b = np.array([[100, 250, 1, 129], [7, 200, 3, 5]], np.uint8)
    p = np.array([[[[140, 2, 9], [255, 130, 4], [6, 200, 127]]]], np.uint8)
    pp = np.pad(p, [(0, 0), (0, 0), (1, 0), (1, 0)])
    mp = np.zeros((1, 1, 3, 3), np.uint8)
    for i in range(3):
        for j in range(3):
            cells = [pp[0, 0, i + u, j + v] for u in range(2) for v in range(2)
                     if i + u >= 1 and j + v >= 1]
            mp[0, 0, i, j] = max(cells)
    # Shift amounts past the byte (8, 9, 255) give 0.
    s = np.array([[0, 1, 3, 7], [8, 9, 255, 2]], np.uint8)
    wide = s.astype(np.int64)
    shl = np.where(wide < 8, (a.astype(np.int64) << np.minimum(wide, 8)) & 255, 0)
    shr = np.where(wide < 8, a.astype(np.int64) >> np.minimum(wide, 8), 0)
    outs = [np.maximum(a, b), np.minimum(a, b), a // b, a % b, a > b,
            np.argmax(a, axis=1).astype(np.int64), a.max(axis=1), mp,
            shl.astype(np.uint8), shr.astype(np.uint8)]
    i8 = lambda v: v.view(np.int8) if v.dtype == np.uint8 else v
    return [i8(a), i8(b), i8(p), i8(s)], [i8(o) for o in outs]


def cumsum_axis_case(axis):
    """CumSum exclusive and reverse along a run-time axis (2: out of
    range, no expected output)."""
    x = vals((2, 3, 4), 2.0, 0.3)
    if not -3 <= axis < 3:
        return [x, np.array(axis, np.int64)], []
    f = np.flip(x.astype(np.float64), axis)
    c = np.cumsum(f, axis) - f
    return [x, np.array(axis, np.int64)], [np.flip(c, axis).astype(F)]


def max_pool_indices(x, k, s, d, pads, ceil, col_major=False):
    """MaxPool-12 and its Indices by direct loops over each window (the
    first maximum in window order; flat positions in x)."""
    n, c = x.shape[:2]
    ins = x.shape[2:]
    sp = len(ins)
    o = []
    for a in range(sp):
        span = ins[a] + pads[a] + pads[sp + a] - ((k[a] - 1) * d[a] + 1)
        o.append((-(-span // s[a]) if ceil else span // s[a]) + 1)
    y = np.zeros([n, c] + o, F)
    ind = np.zeros([n, c] + o, np.int64)
    for b in range(n):
        for ch in range(c):
            for out in itertools.product(*[range(v) for v in o]):
                best, arg = None, None
                for kk in itertools.product(*[range(v) for v in k]):
                    pos = [out[a] * s[a] + kk[a] * d[a] - pads[a] for a in range(sp)]
                    if not all(0 <= pos[a] < ins[a] for a in range(sp)):
                        continue
                    v = x[(b, ch) + tuple(pos)]
                    if best is None or v > best:
                        best = v
                        if col_major:
                            flat = pos[1] * ins[0] + pos[0]
                        else:
                            flat = int(np.ravel_multi_index(pos, ins))
                        arg = (b * c + ch) * int(np.prod(ins)) + flat
                y[(b, ch) + out] = best
                ind[(b, ch) + out] = arg
    return y, ind


def unpool_case():
    # Rounded values, so that windows hold ties.
    x = np.round(vals((2, 3, 5, 6), 3.0, 0.2))
    t = vals((1, 2, 7), 1.0, 0.9)
    y, i = max_pool_indices(x, [3, 2], [2, 1], [1, 2], [1, 0, 1, 1], True)
    y2, i2 = max_pool_indices(x, [2, 2], [2, 2], [1, 1], [0, 0, 0, 0], False, True)
    y3, i3 = max_pool_indices(t, [3], [2], [1], [1, 1], False)
    z = np.round(vals((2, 3, 4, 6), 3.0, 1.1))
    y4, i4 = max_pool_indices(z, [2, 2], [2, 2], [1, 1], [0, 0, 0, 0], False)
    u = np.zeros(2 * 3 * 4 * 6, F)
    u[i4.ravel()] = y4.ravel()
    u = u.reshape(2, 3, 4, 6)
    u2 = np.zeros((2, 3, 7, 8), F)
    u2[:, :, :4, :6] = u
    return [x, z, t], [y, i, i2, y3, i3, u, u2]


def einsum_case():
    """numpy.einsum in float64 on the same equations."""
    a, b = vals((2, 1, 3, 4), 1.0, 0.1), vals((5, 4, 2), 1.0, 0.2)
    c, d = vals((3, 4, 4), 1.0, 0.3), vals((5, 5), 1.0, 0.4)
    e, f = vals((2, 3, 4), 1.0, 0.5), vals((2, 4, 3), 1.0, 0.6)
    g = vals((3, 3, 2), 1.0, 0.7)
    D = lambda v: v.astype(np.float64)
    outs = [np.einsum("...ij,...jk->...ik", D(a), D(b)),
            np.einsum("...ii->...i", D(c)), np.einsum("ii", D(d)),
            np.einsum("bij,bjk", D(e), D(f)), np.einsum("i...->...", D(c)),
            np.einsum("iij->ji", D(g)), np.einsum("...ji", D(a))]
    return [a, b, c, d, e, f, g], [np.asarray(o).astype(F) for o in outs]


def roi_align(x, rois, bi, mode, oh, ow, ratio, scale, half):
    """RoiAlign as ONNX's reference computes it, sample by sample."""
    n, c, h, w = x.shape
    y = np.zeros((len(rois), c, oh, ow))
    off = 0.5 if half else 0.0

    def bilinear(img, yy, xx):
        if yy < -1 or yy > h or xx < -1 or xx > w:
            return [(0.0, 0, 0)] * 4
        yy, xx = max(yy, 0.0), max(xx, 0.0)
        yl, xl = int(yy), int(xx)
        if yl >= h - 1:
            yl = yh = h - 1
            yy = float(yl)
        else:
            yh = yl + 1
        if xl >= w - 1:
            xl = xh = w - 1
            xx = float(xl)
        else:
            xh = xl + 1
        ly, lx = yy - yl, xx - xl
        hy, hx = 1 - ly, 1 - lx
        return [(hy * hx, yl, xl), (hy * lx, yl, xh), (ly * hx, yh, xl),
                (ly * lx, yh, xh)]

    for r, (x1, y1, x2, y2) in enumerate(rois.astype(np.float64)):
        sx, sy = x1 * scale - off, y1 * scale - off
        rw, rh = x2 * scale - off - sx, y2 * scale - off - sy
        if not half:
            rw, rh = max(rw, 1.0), max(rh, 1.0)
        bh, bw = rh / oh, rw / ow
        img = x[bi[r]].astype(np.float64)
        for ph in range(oh):
            for pw in range(ow):
                vals_ = []
                for iy in range(ratio):
                    for ix in range(ratio):
                        yy = sy + ph * bh + (iy + 0.5) * bh / ratio
                        xx = sx + pw * bw + (ix + 0.5) * bw / ratio
                        corners = bilinear(img, yy, xx)
                        terms = np.array([wt * img[:, a, b] for wt, a, b in corners])
                        vals_.append(terms.max(0) if mode == "max" else terms.sum(0))
                vals_ = np.array(vals_)
                y[r, :, ph, pw] = vals_.max(0) if mode == "max" else vals_.mean(0)
    return y.astype(F)


def roialign_case():
    x = vals((2, 3, 6, 7), 2.0, 0.4)
    rois = np.array([[0, 0, 9, 11], [2.5, 1, 13, 7.5], [-3, -2, 4, 5],
                     [5, 4, 5.5, 4.2]], F)
    bi = np.array([0, 1, 1, 0], np.int64)
    return [x, rois, bi], [roi_align(x, rois, bi, "avg", 3, 2, 2, 0.5, True),
                           roi_align(x, rois, bi, "max", 2, 3, 3, 1.0, False)]


def det_case():
    """numpy.linalg.det in float64 (quadratic phases: vals alone gives
    rank-2 matrices)."""
    full = lambda shape, ph: (2.0 * np.sin(np.arange(int(np.prod(shape))) ** 2
                                           * 0.37 + ph)).reshape(shape).astype(F)
    a = full((4, 5, 5), 0.8)
    a[1, 4] = a[1, 0] + a[1, 2]  # singular (up to rounding)
    a[2, 0, 0] = 0                # the first pivot needs a swap
    b = np.array([[-3.5]], F)
    c = full((2, 2, 3, 3), 1.3)
    d = lambda v: np.linalg.det(v.astype(np.float64)).astype(F)
    return [a, b, c], [d(a), d(b), d(c)]


def unsigned_case():
    """uint16, uint32 and uint64 Max, Min, Div, Mod, Greater, ArgMax,
    ReduceMax, BitShift, Sub (wrapping), Cast to f32 and f64, Cast from f32
    (truncated toward zero, saturated, NaN to 0), and Cast between widths;
    the files hold the bits as signed integers, as fuse-run's .npy reader
    takes no unsigned dtypes."""
    big = 2 ** 63
    raw = {
        16: ([65535, 3, 40000, 32768, 7, 90, 130, 0],
             [100, 65000, 1, 32769, 7, 200, 3, 5],
             [0, 1, 15, 16, 17, 65535, 8, 2]),
        32: ([2 ** 32 - 1, 3, 3000000000, 2 ** 31, 7, 90, 130, 0],
             [100, 4000000000, 1, 2 ** 31 + 1, 7, 200, 3, 5],
             [0, 1, 31, 32, 33, 2 ** 32 - 1, 8, 2]),
        64: ([2 ** 64 - 1, 3, 15000000000000000000, big, 7, 90, big + 12345, 0],
             [100, 18000000000000000000, 1, big + 1, 7, 2 ** 62 + 3, 3, big - 1],
             [0, 1, 63, 64, 65, 2 ** 64 - 1, 8, 2]),
    }
    f = np.array([[-1.5, 0.0, 3.7, 65535.9], [7e4, np.nan, np.inf, 4294967296.0]], F)
    ut = {16: np.uint16, 32: np.uint32, 64: np.uint64}
    st = {16: np.int16, 32: np.int32, 64: np.int64}
    ins, outs = [], []
    for n in (16, 32, 64):
        a, b, s = [np.array(v, dtype=object).reshape(2, 4) for v in raw[n]]
        u = lambda v: np.array(v.tolist(), ut[n])
        m = 2 ** n
        shl = np.vectorize(lambda x, y: (x << y) % m if y < n else 0, otypes=[object])(a, s)
        shr = np.vectorize(lambda x, y: x >> y if y < n else 0, otypes=[object])(a, s)
        def from_float(v):
            if np.isnan(v):
                return 0
            if v <= 0:
                return 0
            if v >= m:
                return m - 1 if n < 64 else int(np.float64(18446744073709549568.0))
            return int(np.trunc(np.float64(v)))
        ff = np.array([from_float(v) for v in f.ravel()], dtype=object).reshape(2, 4)
        ins += [u(a), u(b), u(s)]
        outs += [u(np.maximum(a, b)), u(np.minimum(a, b)), u(a // b), u(a % b),
                 np.array((a > b).tolist(), bool),
                 np.array([int(np.argmax(r)) for r in a.tolist()], np.int64),
                 u(np.array([max(r) for r in a.tolist()], dtype=object)),
                 u(shl), u(shr), u((b - a) % m),
                 u(a).astype(F), u(a).astype(np.float64), u(ff)]
    a16, a32, a64 = ins[0], ins[3], ins[6]
    b32, b64 = ins[4], ins[7]
    outs += [a16.astype(np.uint64), a64.astype(np.uint16), a32.astype(np.int64)]
    where64 = np.where(a64 > b64, b64, a64)
    gather32 = a32[[1, 0]]
    slice16 = a16[0:2, 1:3]
    outs += [np.concatenate([a64, b64]), where64, np.maximum(where64, b64),
             gather32, gather32 > b32, slice16, np.array(slice16.min(), np.uint16),
             np.broadcast_to(a64.max(axis=1), (3, 2)).copy()]
    bits = lambda v: v.view(st[v.itemsize * 8]) if v.dtype.kind == "u" else v
    return [bits(v) for v in ins] + [f], [bits(v) for v in outs]


def unsigned_const_case():
    """unsigned-const.textproto: UINT32/UINT64/UINT16 initializers from their
    typed fields against inputs at the top of their ranges."""
    x32 = np.array([2 ** 32 - 2, 2 ** 32 - 1], np.uint32)
    x64 = np.array([2 ** 64 - 2, 2 ** 63 + 2], np.uint64)
    x16 = np.array([65534, 65535], np.uint16)
    d32 = np.array([2 ** 32 - 1, 3], np.uint32)
    d64 = np.array([2 ** 64 - 1, 2 ** 63 + 1], np.uint64)
    d16 = np.array([65535, 2], np.uint16)
    outs = [(x32 // d32).astype(np.int64), x64 > d64, (x16 % d16).astype(np.int64)]
    return [x32.view(np.int32), x64.view(np.int64), x16.view(np.int16)], outs


def tfidf_ref(x, mode, mn, mx, skips, counts, indexes, pool, weights=None):
    """TfIdfVectorizer by direct loops over rows, skips and positions: an
    n-gram of size n in [mn, mx] counts at i with skip s when its token j
    is x[i + j (s + 1)]; unigrams count once, longer n-grams for every s."""
    grams = []
    for i, start in enumerate(counts):
        end = counts[i + 1] if i + 1 < len(counts) else len(pool)
        n = i + 1
        grams += [tuple(pool[k:k + n]) for k in range(start, end, n)]
    rows = x.reshape(-1, x.shape[-1])
    y = np.zeros((rows.shape[0], max(indexes) + 1), F)
    for r, row in enumerate(rows):
        for k, g in enumerate(grams):
            n = len(g)
            if not mn <= n <= mx:
                continue
            f = 0
            for s in range(1 if n == 1 else skips + 1):
                d = s + 1
                f += sum(all(row[i + j * d] == g[j] for j in range(n))
                         for i in range(len(row) - (n - 1) * d))
            w = 1.0 if weights is None else weights[k]
            y[r, indexes[k]] = {"TF": f, "IDF": w if f > 0 else 0,
                                "TFIDF": np.float32(f) * np.float32(w)}[mode]
    return y.reshape(x.shape[:-1] + (y.shape[1],)) if x.ndim == 2 else y[0]


def tfidf_case():
    """tfidf.textproto: TF, IDF and TFIDF."""
    x = np.array([[1, 2, 9, 1, 2, 1, 1, 2], [2, 2, 1, 2, 3, 1, 2, 3],
                  [9, 9, 9, 5, 1, 2, 2, 1]], np.int32)
    v = np.array([4, 5, 4, 4, 5, 5, 4, 5, 0, 5], np.int64)
    counts, pool = [0, 3, 7], [1, 2, 9, 1, 2, 2, 1, 1, 2, 3]
    idx = [0, 1, 2, 4, 5, 7]
    w = [0.5, 2, 3, 0.25, 1.5, 7]
    return [x, v], [tfidf_ref(x, "TF", 1, 3, 2, counts, idx, pool),
                    tfidf_ref(x, "IDF", 2, 3, 1, counts, idx, pool, w),
                    tfidf_ref(v, "TFIDF", 1, 2, 3, [0, 2], [3, 0, 1, 2],
                              [4, 5, 4, 5, 5, 4], [0.1, 2.5, 0.3, 4])]


CASES = {"tfidf": tfidf_case, "unsigned_const": unsigned_const_case, "unsigned": unsigned_case, "uint8": uint8_case, "det": det_case, "roialign": roialign_case, "einsum": einsum_case, "unpool": unpool_case,
         "cumsum_axis1": lambda: cumsum_axis_case(1),
         "cumsum_axis_neg3": lambda: cumsum_axis_case(-3),
         "cumsum_axis3": lambda: cumsum_axis_case(3), "signal": signal_case, "training": training_case, "training_t3": lambda: training_case(3), "trig": trig_case, "gridsample": gridsample_case, "conv_nd": conv_nd_case, "datadep": datadep_case,
         "datadep_error": datadep_error_case}

for name, make in CASES.items():
    ins, outs = make()
    dd = os.path.join(sys.argv[1], name)
    os.makedirs(dd, exist_ok=True)
    for i, a in enumerate(ins):
        np.save(os.path.join(dd, f"input_{i}.npy"), a)
    for i, a in enumerate(outs):
        np.save(os.path.join(dd, f"output_{i}.npy"), np.require(a, requirements="C"))
