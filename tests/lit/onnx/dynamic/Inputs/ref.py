#!/usr/bin/python3
"""Inputs and expected outputs of the models in this folder.

    ref.py DIR   writes DIR/<case>/input_N.npy and output_N.npy

Computed with numpy from the ONNX definitions, independently of fuse.
"""
import os
import sys

import numpy as np

F = np.float32
W = np.array([0.5, -1, 0.25, 2, 1, 0.5, -0.5, 1, -1, 0.75, 1, 0.5, 0.25, 1,
              2, -1, 1.5, -0.25, 0.5, 1, -2, 1, 0.5, 0.25], F).reshape(6, 4)


def vals(shape, scale=3.0, phase=0.0):
    n = int(np.prod(shape))
    return (scale * np.sin(np.arange(n) * 1.7 + phase)).reshape(shape).astype(F)


def flatten_case(batch):
    x, y = vals((batch, 2, 3)), vals((batch, 4), 2.0, 1.0)
    v = x.reshape(batch, 6)
    return [x, y], [v @ W + y, v]


def shape_operands_case():
    x = vals((2, 3, 4))
    e = np.array([[1], [2], [3]], F)
    ins = [x, np.array([4, -1], np.int32), np.array([1], np.int64),
           np.array([1], np.int64), np.array([3], np.int64), e,
           np.array([2, 1, 5], np.int64), np.array([2, 3], np.int64)]
    outs = [x.reshape(4, 6), x.sum(axis=1), x[:, :, 1:3],
            np.broadcast_to(e, (2, 3, 5)), np.full((2, 3), 1.5, F)]
    return ins, outs


CASES = {"flatten_b2": lambda: flatten_case(2),
         "flatten_b5": lambda: flatten_case(5),
         "shape_operands": shape_operands_case}

for name, make in CASES.items():
    ins, outs = make()
    d = os.path.join(sys.argv[1], name)
    os.makedirs(d, exist_ok=True)
    for i, a in enumerate(ins):
        np.save(os.path.join(d, f"input_{i}.npy"), a)
    for i, a in enumerate(outs):
        np.save(os.path.join(d, f"output_{i}.npy"), np.require(a, requirements="C"))
