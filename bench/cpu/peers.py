#!/usr/bin/python3
"""numpy and PyTorch (CPU) on the CPU benchmark's workloads.

  peers.py NAME ELEMENTS COLUMNS RUNS THREADS
  peers.py mmgelu M RUNS THREADS [DTYPE]     gelu(x @ w + b), M^3
  peers.py conv SHAPE RUNS THREADS [DTYPE]   relu(conv2d(x, w, b)), SHAPE
                                             as workloads.py conv takes it

prints one line per peer: `peer NAME median_ms cpu_ms` (or `peer NAME n/a
why`): the median wall time of a call and the process CPU time per call
(all threads; what counts on a machine shared with other work).
mmgelu: numpy computes x @ w (its BLAS: OpenBLAS where python3-numpy is
linked to libopenblas) + b, then gelu with the same rational erf as
below; PyTorch F.gelu(torch.addmm(b, x, w)) (bf16: numpy n/a).
conv: PyTorch F.relu(F.conv2d(x, w, b, stride, padding)) under
torch.no_grad() (its CPU convolution: oneDNN where PyTorch has it);
numpy has no convolution (n/a).
The workloads are those of workloads.py, written as a user of each library
would: numpy evaluates op by op (a temporary per op; it has no erf, so gelu
uses the Abramowitz-Stegun 7.1.26 rational erf, five more ops); PyTorch
calls torch.relu / F.gelu / torch.softmax / F.layer_norm with
torch.set_num_threads(THREADS). Inputs are uniform in +-[0.125, 2], in
as many sets as fuse-run --bench rotates through (1 GiB in all, at most 8:
no call finds its inputs in the caches); one warm-up call per set, then
the median of RUNS timed calls (outputs allocated by the library, as in
normal use).
"""
import statistics
import sys
import time


def timeit(fns, runs):
    """Median ms of runs calls, rotating through fns (one per input set),
    and the process CPU ms per call."""
    for fn in fns:
        fn()
    ts = []
    c0 = time.process_time()
    for k in range(runs):
        fn = fns[k % len(fns)]
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    cpu = (time.process_time() - c0) / runs
    return "%.4f %.4f" % (statistics.median(ts) * 1e3, cpu * 1e3)


def rotation(nbytes):
    """Input sets to rotate through: enough for 1 GiB (the data of one call
    is out of the caches when it comes round again), at most 8, as
    fuse-run --bench does."""
    want = (1 << 30) / max(nbytes, 1)
    return 8 if want >= 8 else 1 if want <= 1 else int(want) + 1


def inputs(np, name, r, c, seed=1):
    rng = np.random.default_rng(seed)

    def full(*shape):
        a = rng.uniform(0.125, 2.0, size=shape).astype(np.float32)
        return a * np.where(rng.integers(0, 2, size=shape) == 1, 1, -1).astype(np.float32)

    return {"relu": lambda: (full(r, c), full(c), full(c)),
            "gelu": lambda: (full(r, c), full(c)),
            "softmax": lambda: (full(r, c),),
            "layernorm": lambda: (full(r, c), full(r, c), full(c), full(c))}[name]()


def numpy_fn(np, name, args):
    if name == "relu":
        x, s, b = args
        return lambda: np.maximum(x * s + b, 0)
    if name == "gelu":
        x, b = args

        def erf(z):
            # Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7).
            a = np.abs(z)
            t = 1.0 / (1.0 + 0.3275911 * a)
            y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t
                        - 0.284496736) * t + 0.254829592) * t * np.exp(-a * a)
            return np.copysign(y, z)

        def gelu():
            h = x + b
            return 0.5 * h * (1.0 + erf(h * np.float32(0.7071067811865476)))
        return gelu
    if name == "softmax":
        (x,) = args

        def softmax():
            e = np.exp(x - x.max(axis=1, keepdims=True))
            return e / e.sum(axis=1, keepdims=True)
        return softmax
    (x, r, g, b) = args

    def layernorm():
        h = x + r
        mu = h.mean(axis=1, keepdims=True)
        d = h - mu
        var = (d * d).mean(axis=1, keepdims=True)
        return d / np.sqrt(var + np.float32(1e-5)) * g + b
    return layernorm


def torch_fn(torch, name, args):
    F = torch.nn.functional
    t = [torch.from_numpy(a) for a in args]
    if name == "relu":
        x, s, b = t
        return lambda: torch.relu(x * s + b)
    if name == "gelu":
        x, b = t
        return lambda: F.gelu(x + b)
    if name == "softmax":
        (x,) = t
        return lambda: torch.softmax(x, dim=1)
    x, r, g, b = t
    return lambda: F.layer_norm(x + r, (x.shape[1],), g, b, 1e-5)


def erf_as(np, z):
    # Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7).
    a = np.abs(z)
    t = 1.0 / (1.0 + 0.3275911 * a)
    y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t
                - 0.284496736) * t + 0.254829592) * t * np.exp(-a * a)
    return np.copysign(y, z)


def main_mm(argv):
    m, runs, threads = map(int, argv[:3])
    dt = argv[3] if len(argv) > 3 else "f32"
    try:
        import numpy as np
    except ImportError as e:
        print("peer numpy n/a", e)
        print("peer torch n/a", e)
        return
    rng = np.random.default_rng(1)

    def full(*shape):
        return rng.uniform(-1.0, 1.0, size=shape).astype(np.float32)

    x, w, b = full(m, m), full(m, m), full(m)
    if dt == "f32":
        def np_fn():
            h = x @ w + b
            return 0.5 * h * (1.0 + erf_as(np, h * np.float32(0.7071067811865476)))
        print("peer numpy %s" % timeit([np_fn], runs), flush=True)
    else:
        print("peer numpy n/a no bf16 matmul")
    try:
        import torch
        torch.set_num_threads(threads)
        tdt = torch.float32 if dt == "f32" else torch.bfloat16
        tx, tw, tb = (torch.from_numpy(a).to(tdt) for a in (x, w, b))
        F = torch.nn.functional
        with torch.no_grad():
            print("peer torch %s" % timeit([lambda: F.gelu(torch.addmm(tb, tx, tw))],
                                           runs))
    except Exception as e:  # not installed, or failed to load
        print("peer torch n/a", str(e).splitlines()[0] if str(e) else type(e).__name__)


def main_conv(argv):
    spec, runs, threads = argv[0], int(argv[1]), int(argv[2])
    dt = argv[3] if len(argv) > 3 else "f32"
    print("peer numpy n/a no conv2d")
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    from workloads import conv_shape
    n, c, h, w, m, k, s, p, oh, ow = conv_shape(spec)
    try:
        import numpy as np
        import torch
        torch.set_num_threads(threads)
        rng = np.random.default_rng(1)

        def full(*shape):
            return rng.uniform(-1.0, 1.0, size=shape).astype(np.float32)

        tdt = torch.float32 if dt == "f32" else torch.bfloat16
        tx, tw, tb = (torch.from_numpy(a).to(tdt)
                      for a in (full(n, c, h, w), full(m, c, k, k), full(m)))
        F = torch.nn.functional
        with torch.no_grad():
            print("peer torch %s" % timeit(
                [lambda: F.relu(F.conv2d(tx, tw, tb, stride=s, padding=p))], runs))
    except Exception as e:  # not installed, or failed to load
        print("peer torch n/a", str(e).splitlines()[0] if str(e) else type(e).__name__)


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "mmgelu":
        return main_mm(sys.argv[2:])
    if len(sys.argv) >= 2 and sys.argv[1] == "conv":
        return main_conv(sys.argv[2:])
    if len(sys.argv) != 6:
        raise SystemExit(__doc__)
    name, n, c, runs, threads = sys.argv[1], *map(int, sys.argv[2:])
    try:
        import numpy as np
    except ImportError as e:
        print("peer numpy n/a", e)
        print("peer torch n/a", e)
        return
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    from workloads import nbytes
    sets = [inputs(np, name, n // c, c, seed=1 + k)
            for k in range(rotation(nbytes(name, n, c)))]
    print("peer numpy %s" % timeit([numpy_fn(np, name, a) for a in sets], runs),
          flush=True)
    try:
        import torch
        torch.set_num_threads(threads)
        with torch.no_grad():
            print("peer torch %s" % timeit([torch_fn(torch, name, a) for a in sets],
                                           runs))
    except Exception as e:  # not installed, or failed to load
        print("peer torch n/a", str(e).splitlines()[0] if str(e) else type(e).__name__)


if __name__ == "__main__":
    main()
