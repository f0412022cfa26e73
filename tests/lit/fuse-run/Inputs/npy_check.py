#!/usr/bin/env python3
"""Helpers of npy.fuse: `make DIR` writes .npy inputs in every layout the
reader must accept; `check DIR` reads fuse-run's outputs back with numpy
and prints what it finds."""
import sys

import numpy as np


def make(d):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.save(d + "/f32.npy", a)
    np.save(d + "/fortran.npy", np.asfortranarray(a))
    np.save(d + "/bigendian.npy", a.astype(">f4"))
    with open(d + "/v2.npy", "wb") as f:
        np.lib.format.write_array(f, a, version=(2, 0))
    with open(d + "/v3.npy", "wb") as f:
        np.lib.format.write_array(f, a, version=(3, 0))
    np.save(d + "/f16.npy", a.astype(np.float16))
    np.save(d + "/f64.npy", a.astype(np.float64))
    np.save(d + "/i8.npy", np.array([-128, 5, 127], np.int8))
    np.save(d + "/i16.npy", np.array([-300, 5, 300], np.int16))
    np.save(d + "/i32.npy", np.array([-70000, 5, 70000], np.int32))
    np.save(d + "/i64.npy", np.array([-2**40, 5, 2**40], np.int64))
    np.save(d + "/b1.npy", np.array([True, False, True]))
    np.save(d + "/scalar.npy", np.float32(2.5))
    # bf16 as 2-byte void: the bits of 1.0, -2.0, 0.5.
    bits = np.array([0x3F80, 0xC000, 0x3F00], np.uint16)
    np.save(d + "/bf16.npy", bits.view("V2"))
    np.save(d + "/fortran3d.npy",
            np.asfortranarray(np.arange(24, dtype=np.int32).reshape(2, 3, 4)))


def check(d):
    for i in range(9):
        y = np.load(d + "/output_%d.npy" % i)
        if y.dtype.kind == "V":
            y = y.view(np.uint16)
            print("output_%d: V2 bits %s" % (i, [hex(v) for v in y.ravel()]))
        else:
            print("output_%d: %s %s %s" % (i, y.dtype, y.shape,
                                           y.ravel().tolist()))


if __name__ == "__main__":
    {"make": make, "check": check}[sys.argv[1]](sys.argv[2])
