#!/usr/bin/python3
"""Measures the error of the CPU code generator's inline math (lowering/
llvm/math.c) against the C library, through fuse-run: for each function
and range, 2^20 f32 points (evenly or log spaced), the CPU result against
the reference interpreter (libm in double, rounded to f32).

  math_accuracy.py [FUSE_RUN] [--exact-math]

Prints one line per function and range: max relative error, and the same
in units of 2^-24 (half an f32 ulp at 1 is 2^-24; one ulp is 2^-23 to
2^-24 of the value), plus max absolute error.
"""
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

N = 1 << 20
CASES = [
    # name, graph op text (%x: tensor<Nxf32>), inputs
    ("exp", "graph.exp %x", lambda: np.linspace(-87.0, 88.7, N)),
    ("exp (subnormal results)", "graph.exp %x", lambda: np.linspace(-103.9, -87.4, N)),
    ("log", "graph.log %x", lambda: np.geomspace(1e-37, 3e38, N)),
    ("log near 1", "graph.log %x", lambda: np.linspace(0.5, 2.0, N)),
    ("tanh", "graph.tanh %x", lambda: np.linspace(-10.0, 10.0, N)),
    ("tanh near 0", "graph.tanh %x", lambda: np.linspace(-0.01, 0.01, N)),
    ("erf", "graph.erf %x", lambda: np.linspace(-6.0, 6.0, N)),
    ("gelu (1 + erf as erfc)", "graph.gelu %x", lambda: np.linspace(-6.0, 6.0, N)),
    ("sigmoid", "graph.sigmoid %x", lambda: np.linspace(-30.0, 30.0, N)),
    ("softplus (log1p)", "graph.softplus %x", lambda: np.linspace(-20.0, 20.0, N)),
]


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    extra = [a for a in sys.argv[1:] if a.startswith("--")]
    fuse_run = args[0] if args else "build/bin/fuse-run"
    t = f"tensor<{N}xf32>"
    print(f"{'function (range)':34} {'max rel err':>12} {'x 2^-24':>8} {'max abs err':>12}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, op, gen in CASES:
            x = gen().astype(np.float32)
            np.save(os.path.join(tmp, "x.npy"), x)
            src = os.path.join(tmp, "f.fuse")
            with open(src, "w") as f:
                f.write(f"func.func @main(%x: {t}) -> {t} {{\n"
                        f"  %0 = {op} : {t}\n  return %0 : {t}\n}}\n")
            out = subprocess.run(
                [fuse_run, src, "--device", "cpu", "--input",
                 os.path.join(tmp, "x.npy"), "--check-interp", "--rtol", "1",
                 "--atol", "1e30", "--print-limit", "0"] + extra,
                capture_output=True, text=True)
            m = re.search(r"max abs error ([0-9.e+-]+), max rel error ([0-9.e+-]+)",
                          out.stdout)
            if not m:
                print(f"{name:34} failed: {out.stderr.strip()[:200]}")
                continue
            ab, rel = float(m.group(1)), float(m.group(2))
            print(f"{name:34} {rel:12.3g} {rel * 2**24:8.2f} {ab:12.3g}")


if __name__ == "__main__":
    main()
