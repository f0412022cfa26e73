#!/usr/bin/python3
"""Inputs and expected outputs of the models in this folder.

    ref.py DIR   writes DIR/<case>/input_N.npy and output_N.npy

Computed with numpy from the ONNX definitions, independently of fuse.
"""
import itertools
import math
import os
import sys

import numpy as np

F = np.float32


def vals(shape, scale=3.0, phase=0.0):
    n = int(np.prod(shape))
    return (scale * np.sin(np.arange(n) * 1.7 + phase)).reshape(shape).astype(F)


def topk(x, k, axis, largest):
    """Sorted by value (NaN above every number), ties by index."""
    x = np.moveaxis(x, axis, -1)
    key = np.where(np.isnan(x), np.inf, x)
    nan = np.isnan(x)
    vs, ix = [], []
    for row, krow, nrow in zip(x.reshape(-1, x.shape[-1]),
                               key.reshape(-1, x.shape[-1]),
                               nan.reshape(-1, x.shape[-1])):
        # Python's sort is stable: ties keep their index order.
        if largest:
            order = sorted(range(len(row)), key=lambda i: (-int(nrow[i]), -krow[i]))
        else:
            order = sorted(range(len(row)), key=lambda i: (int(nrow[i]), krow[i]))
        order = order[:k]
        vs.append(row[order])
        ix.append(order)
    shape = x.shape[:-1] + (k,)
    v = np.array(vs, F).reshape(shape)
    i = np.array(ix, np.int64).reshape(shape)
    return np.moveaxis(v, -1, axis), np.moveaxis(i, -1, axis)


def index_case():
    x = np.array([[1, 3, 3, -2, 5], [np.nan, 0, 2, 2, np.nan], [4, 4, 4, 1, 0]], F)
    d = vals((2, 3, 4))
    gi = np.array([[0, 1], [1, -1], [-2, 0]], np.int64)
    gb = np.array([[[2], [0]], [[1], [-1]]], np.int64)
    si = np.array([[1], [0], [1]], np.int64)
    su = vals((3, 3, 4), 1.0, 2.0)
    ei = np.array([[[0, 3], [1, 1], [-1, 2]], [[2, 2], [0, -4], [3, 1]]], np.int64)
    eu = vals((2, 3, 2), 4.0, 0.5)
    v1, i1 = topk(x, 3, 1, True)
    v2, i2 = topk(x, 2, 0, False)
    g1 = np.stack([d[tuple(t)] for t in gi])
    g2 = np.stack([np.stack([d[b][tuple(t)] for t in gb[b]]) for b in range(2)])
    s1 = d.copy()
    for u, t in enumerate(si):
        s1[tuple(t)] += su[u]
    s2 = d.copy()
    for a, b, c in itertools.product(range(2), range(3), range(2)):
        j = ei[a, b, c] % 4
        s2[a, b, j] = max(s2[a, b, j], eu[a, b, c])
    return [x, d, gi, gb, si, su, ei, eu], [v1, i1, v2, i2, g1, g2, s1, s2]


def pool3d(x, k, s, p, d=(1, 1, 1), ceil=False, avg=False, include=False):
    n, c, *sp = x.shape
    outs = []
    for a in range(3):
        span = (k[a] - 1) * d[a] + 1
        tot = sp[a] + p[a] + p[3 + a] - span
        o = (-(-tot // s[a]) if ceil else tot // s[a]) + 1
        # ceil_mode drops a last window that starts in the end padding.
        if ceil and (o - 1) * s[a] >= sp[a] + p[a]:
            o -= 1
        outs.append(o)
    y = np.zeros((n, c, *outs), F)
    for o in itertools.product(*[range(v) for v in outs]):
        taps, count = [], 0
        for t in itertools.product(*[range(v) for v in k]):
            pos = [o[a] * s[a] - p[a] + t[a] * d[a] for a in range(3)]
            inside_padded = all(-p[a] <= pos[a] < sp[a] + p[3 + a] for a in range(3))
            if all(0 <= pos[a] < sp[a] for a in range(3)):
                taps.append(x[:, :, pos[0], pos[1], pos[2]])
                count += 1
            elif include and inside_padded:
                count += 1
        stack = np.stack(taps)
        y[(slice(None), slice(None)) + o] = (stack.sum(0) / count) if avg else stack.max(0)
    return y


def pool3d_case():
    x = vals((1, 2, 5, 6, 7))
    m = pool3d(x, (2, 3, 2), (2, 2, 1), (1, 0, 1, 0, 1, 1), ceil=True)
    a = pool3d(x, (3, 2, 2), (1, 2, 2), (1, 1, 0, 1, 0, 1), avg=True)
    ap = pool3d(x, (2, 2, 3), (1, 1, 1), (1, 1, 1, 0, 1, 1), d=(2, 1, 2),
                avg=True, include=True)
    return [x], [m, a, ap]


def control_case(cond):
    x = np.array([1.5, -2], F)
    m = vals((4, 3), 2.0)
    r = x * x if cond else -x
    a, steps = x.copy(), []
    for i in range(3):
        a = (a + F(i)) * x * x
        steps.append(a.sum())
    st, rows = F(1), []
    for t in range(4):
        st = st + m[t].sum()
        rows.append(m[t] * st)
    # scan_output_axes 1, reverse: step t lands at position 3 - t.
    rows_out = np.stack(rows[::-1], axis=1)
    return ([np.array(cond), x, m],
            [r, a, np.array(steps, F), np.array(st, F), rows_out])


def sigmoid(v):
    return 1 / (1 + np.exp(-v))


def rnn_case():
    """The ONNX equations, step by step, in float64."""
    x, w, r = vals((2, 4, 3), 1.0), vals((2, 12, 3), 0.5, 1), vals((2, 12, 3), 0.5, 2)
    b, p = vals((2, 24), 0.3, 3), vals((2, 9), 0.4, 4)
    lens = np.array([4, 2], np.int32)
    xs, gw = vals((3, 2, 3), 1.0, 5), vals((1, 12, 3), 0.5, 6)
    gr, gb = vals((1, 12, 4), 0.5, 7), vals((1, 24), 0.3, 8)
    rw, rr, h0 = vals((1, 2, 3), 0.7, 9), vals((1, 2, 2), 0.7, 10), vals((1, 2, 2), 1.0, 11)
    d = lambda a: a.astype(np.float64)
    acts = [[lambda v: np.clip(0.3 * v + 0.4, 0, 1), np.tanh,
             lambda v: 0.9 * np.tanh(1.2 * v)],
            [sigmoid, lambda v: np.where(v >= 0, v, 0.1 * v), np.tanh]]
    clip = lambda v: np.clip(v, -2.5, 2.5)
    X = d(x).transpose(1, 0, 2)  # layout 1: [seq, batch, input]
    H = 3
    Y = np.zeros((4, 2, 2, H))
    YH = np.zeros((2, 2, H))
    YC = np.zeros((2, 2, H))
    for di in range(2):
        f, g, hh = acts[di]
        W, R, B, P = d(w[di]), d(r[di]), d(b[di]), d(p[di])
        for bi in range(2):
            h, c = np.zeros(H), np.zeros(H)
            L = lens[bi]
            steps = range(L) if di == 0 else range(L - 1, -1, -1)
            for t in steps:
                z = W @ X[t, bi] + R @ h + B[:12] + B[12:]
                zi, zo, zf, zc = z[:H], z[H:2 * H], z[2 * H:3 * H], z[3 * H:]
                i = f(clip(zi + P[:H] * c))
                ft = 1 - i  # input_forget
                c = ft * c + i * g(clip(zc))
                o = f(clip(zo + P[H:2 * H] * c))
                h = o * hh(c)
                Y[t, di, bi] = h
            YH[di, bi], YC[di, bi] = h, c
    y = Y.transpose(2, 0, 1, 3)  # layout 1: [batch, seq, dir, hidden]
    yh, yc = YH.transpose(1, 0, 2), YC.transpose(1, 0, 2)
    # GRU, reverse, linear_before_reset.
    G = 4
    W, R, B = d(gw[0]), d(gr[0]), d(gb[0])
    h = np.zeros((2, G))
    GY = np.zeros((3, 1, 2, G))
    for t in range(2, -1, -1):
        xt = d(xs[t])
        xz = xt @ W.T + B[:12]
        hz = h @ R.T + B[12:]
        z = sigmoid(xz[:, :G] + hz[:, :G])
        rt = sigmoid(xz[:, G:2 * G] + hz[:, G:2 * G])
        cand = np.tanh(xz[:, 2 * G:] + rt * hz[:, 2 * G:])
        h = (1 - z) * cand + z * h
        GY[t, 0] = h
    gh = h  # reverse: the state after step 0
    # RNN, forward, tanh, with an initial state.
    h = d(h0[0])
    RY = np.zeros((3, 1, 2, 2))
    for t in range(3):
        h = np.tanh(d(xs[t]) @ d(rw[0]).T + h @ d(rr[0]).T)
        RY[t, 0] = h
    outs = [y, yh, yc, GY, gh[None], RY, h[None]]
    return ([x, w, r, b, lens, p, xs, gw, gr, gb, rw, rr, h0],
            [a.astype(F) for a in outs])


CASES = {"rnn": rnn_case, "index_ops": index_case, "pool3d": pool3d_case,
         "control_true": lambda: control_case(True),
         "control_false": lambda: control_case(False),
         "control_if_shapes": lambda: (
             [np.array(False), np.array([1.5, -2], F)],
             [np.array([1.5, -2, 1.5, -2], F)])}

for name, make in CASES.items():
    ins, outs = make()
    dd = os.path.join(sys.argv[1], name)
    os.makedirs(dd, exist_ok=True)
    for i, a in enumerate(ins):
        np.save(os.path.join(dd, f"input_{i}.npy"), a)
    for i, a in enumerate(outs):
        np.save(os.path.join(dd, f"output_{i}.npy"), np.require(a, requirements="C"))
