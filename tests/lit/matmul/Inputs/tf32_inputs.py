#!/usr/bin/env python3
"""Seeded f32 .npy inputs for the tf32 matmul tests (no numpy needed).

usage: tf32_inputs.py DIR SEED MODE SHAPE [SHAPE ...]
  writes DIR/input_N.npy, one per SHAPE (e.g. 80x40), little-endian f32.
  MODE exact: multiples of 1/64 in [-2, 2] (at most 8 significant bits,
              so exactly representable in tf32's 10-bit mantissa: a tf32
              product equals the f32 one);
  MODE full:  uniform in [-1, 1) with all 23 mantissa bits random (tf32
              rounding changes them).
"""
import os
import random
import struct
import sys


def write_npy(path, shape, values):
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }" % (
        "".join("%d, " % d for d in shape) if len(shape) > 1 else
        "%d," % shape[0])
    # Magic, version 1.0, header padded with spaces to a multiple of 64.
    pad = 64 - (10 + len(header) + 1) % 64
    header = header + " " * pad + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00")
        f.write(struct.pack("<H", len(header)))
        f.write(header.encode("ascii"))
        f.write(struct.pack("<%df" % len(values), *values))


def main():
    if len(sys.argv) < 5 or sys.argv[3] not in ("exact", "full"):
        sys.stderr.write(__doc__)
        return 2
    out, seed, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    rng = random.Random(seed)
    os.makedirs(out, exist_ok=True)
    for n, text in enumerate(sys.argv[4:]):
        shape = [int(d) for d in text.split("x")]
        count = 1
        for d in shape:
            count *= d
        if mode == "exact":
            vals = [rng.randint(-128, 128) / 64.0 for _ in range(count)]
        else:
            vals = [rng.uniform(-1.0, 1.0) for _ in range(count)]
        write_npy(os.path.join(out, "input_%d.npy" % n), shape, vals)
    return 0


if __name__ == "__main__":
    sys.exit(main())
