#!/usr/bin/env python3
"""bench/python/overhead.py - what calling a compiled model from Python
costs above the C runtime (issue 26's target: under 10 us per call).

    FZ_BUILD_DIR=build /usr/bin/python3 bench/python/overhead.py [--calls N] [--repeats R]

For each model, compiled once for the CPU (one thread, so that the pool
adds nothing to either side), and checked against the interpreter
first, it times, interleaved R times:
  C      model._bench(*inputs): fzCpuFunctionCall on the same buffers in
         a C loop (the runtime alone, no Python);
  numpy  model(*inputs): numpy arrays in, a new numpy array out;
  out=   model(*inputs, out=[...]): the output written in place;
  torch  model(*tensors, out=[...]) on torch CPU tensors (DLPack), when
         PyTorch is installed;
and prints the median microseconds per call of each, the overhead above
C (median of the per-repeat differences) and the spread (min..max of
those differences). The machine's load is printed with them: time on a
shared machine is noisy.
"""
import argparse
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
BUILD = os.path.abspath(os.environ.get("FZ_BUILD_DIR",
                                       os.path.join(ROOT, "build")))
sys.path.insert(0, os.path.join(BUILD, "python"))

import numpy as np  # noqa: E402

import fuse  # noqa: E402

ADD = """func.func @main(%a: tensor<2x4xf32>, %b: tensor<4xf32>) -> tensor<2x4xf32> {
  %0 = graph.add %a, %b : tensor<2x4xf32>, tensor<4xf32> -> tensor<2x4xf32>
  %1 = graph.relu %0 : tensor<2x4xf32>
  return %1 : tensor<2x4xf32>
}
"""


def models():
    rng = np.random.default_rng(0)
    yield ("add+relu 2x4 (2 inputs)", fuse.Module.parse(ADD),
           [rng.standard_normal((2, 4)).astype(np.float32),
            rng.standard_normal(4).astype(np.float32)])
    mlp = os.path.join(ROOT, "examples", "models", "mlp")
    yield ("examples/models/mlp (4x32)", fuse.Module.read(
        os.path.join(mlp, "model.onnx")),
        [np.load(os.path.join(mlp, "test_data_set_0", "input_0.npy"))])


def per_call(fn, calls):
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) / calls


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        torch = None
    print("load: %s" % open("/proc/loadavg").read().strip())
    print("%-28s %8s %8s %8s %8s   %s" % ("model", "C us", "numpy", "out=",
                                         "torch", "overhead above C, us "
                                         "(median, min..max)"))
    for name, module, inputs in models():
        m = fuse.compile(module, device="cpu", threads=1)
        want = fuse.interpret(module, *inputs)
        np.testing.assert_allclose(m(*inputs), want, rtol=1e-4, atol=1e-5)
        outs = [np.empty(s, d) for d, s in m.outputs]
        variants = {
            "numpy": lambda: m(*inputs),
            "out=": lambda: m(*inputs, out=outs),
        }
        if torch is not None:
            tin = [torch.from_numpy(a) for a in inputs]
            tout = [torch.from_numpy(a) for a in outs]
            variants["torch"] = lambda: m(*tin, out=tout)
        times = {k: [] for k in ["C"] + list(variants)}
        for _ in range(args.repeats):
            times["C"].append(m._bench(*inputs, iterations=args.calls))
            for k, fn in variants.items():
                fn()
                times[k].append(per_call(fn, args.calls))
        med = {k: statistics.median(v) * 1e6 for k, v in times.items()}
        diffs = {k: sorted((t - c) * 1e6 for t, c in zip(times[k],
                                                        times["C"]))
                 for k in variants}
        cols = " ".join("%8.2f" % med.get(k, float("nan"))
                        for k in ("C", "numpy", "out=", "torch"))
        over = "; ".join("%s %.2f (%.2f..%.2f)" % (
            k, statistics.median(d), d[0], d[-1]) for k, d in diffs.items())
        print("%-28s %s   %s" % (name, cols, over))


if __name__ == "__main__":
    main()
