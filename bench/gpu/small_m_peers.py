# bench/gpu/small_m_peers.py - the peers of bench/gpu/small_m.sh and its
# table: for each row of fuse's results (the file FUSE_RESULTS: "layout
# type M K N mode us kernels plan" per line), torch's y = x @ W (layout kn:
# torch.matmul(x, W), W [K, N]; nk: F.linear(x, W), W [N, K]: cuBLAS) and
# torch.compile of the same function, timed as fuse-run --bench
# --bench-cold times fuse (CUDA events around one call, median of REPS
# after 3 warm-up calls, a 256 MiB buffer overwritten before each timed
# call so that W is not in L2), and a device-to-device copy of W's bytes
# timed the same way: the copy rate (read + write) that the fractions
# use. torch.compile compiles each shape once (default mode: inductor);
# past a budget of compile time (COMPILE_BUDGET_S, default 90 s) the
# remaining rows print "-" for it. Rows whose mode is "v:SHAPE" (part 3
# of small_m.sh: a shape forced) reuse the peers' times of their
# configuration and print the shape and fuse's plan (spaces as "_").
# Without torch or a GPU the table has fuse's columns only.
#     python3 bench/gpu/small_m_peers.py FUSE_RESULTS [REPS]
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cuda_timing  # noqa: E402

rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
REPS = int(sys.argv[2]) if len(sys.argv) > 2 else 20
BUDGET = float(os.environ.get("COMPILE_BUDGET_S", "90"))
try:
    import torch
    import torch.nn.functional as F
    assert torch.cuda.is_available()
    dev = "cuda"
except Exception:
    torch = None

DT = {"bf16": "bfloat16", "f32": "float32", "f16": "float16"}
EB = {"bf16": 2, "f16": 2, "f32": 4}
flush = torch.empty(256 << 20, dtype=torch.uint8, device=dev) if torch else None


def med(fn):
    for _ in range(3):
        fn()
    ts = []
    for i in range(REPS):
        flush.fill_(i & 0xFF)
        a, b = torch.cuda.Event(True), torch.cuda.Event(True)
        a.record(); fn(); b.record(); b.synchronize()
        ts.append(a.elapsed_time(b) * 1e3)  # us
    ts.sort()
    return ts[len(ts) // 2]


def kn(x, w):
    return torch.matmul(x, w)


def nk(x, w):
    return F.linear(x, w)


copy_us = {}
peers = {}  # (layout, type, M, K, N): (torch us, compile us, copy us)
compiled = {"kn": None, "nk": None}
spent = 0.0
if torch:
    torch.backends.cuda.matmul.allow_tf32 = False  # exact f32, as fuse's
    import torch._dynamo
    torch._dynamo.config.cache_size_limit = 256
    compiled = {"kn": torch.compile(kn, dynamic=False),
                "nk": torch.compile(nk, dynamic=False)}

hdr = ("layout type  M     K x N       fuse_us  GB/s  copy_frac  torch_us "
       "t/fuse  compile_us c/fuse  kernels plan")
print(hdr)
bad = False
for r in rows:
    lay, ty, m, k, n, mode, us, nkern, plan = r
    m, k, n, us = int(m), int(k), int(n), float(us)
    eb = EB[ty]
    wbytes = k * n * eb
    ideal = wbytes + m * k * eb + m * n * eb
    tus = cus = cp = float("nan")
    key = (lay, ty, m, k, n)
    if torch and key in peers:
        tus, cus, cp = peers[key]
    elif torch:
        g = torch.Generator(device=dev).manual_seed(m * 7 + k + n)
        dt = getattr(torch, DT[ty])
        x = torch.randn(m, k, device=dev, generator=g).to(dt)
        w = torch.randn(*((k, n) if lay == "kn" else (n, k)), device=dev,
                        generator=g).to(dt)
        fn = kn if lay == "kn" else nk
        tus = med(lambda: fn(x, w))
        if spent < BUDGET:
            t0 = time.time()
            try:
                c = compiled[lay]
                c(x, w)
                torch.cuda.synchronize()
                spent += time.time() - t0
                cus = med(lambda: c(x, w))
            except Exception as e:
                print(f"# torch.compile failed: {e}", file=sys.stderr)
        cp = cuda_timing.copy_us(wbytes, REPS, flush, copy_us)
        peers[key] = (tus, cus, cp)
    gbs = ideal / (us * 1e3) if us == us else float("nan")
    copy_gbs = 2 * wbytes / (cp * 1e3) if cp == cp else float("nan")
    frac = gbs / copy_gbs if copy_gbs == copy_gbs else float("nan")
    f = lambda v, p=1: "-" if v != v else f"{v:.{p}f}"
    label = "small-m" if mode == "small-m" else "tiles"
    if mode.startswith("v:"):
        label, plan = "small-m", f"shape {mode[2:]}: {plan.replace('_', ' ')}"
    print(f"{lay:6} {ty:4} {m:2} {k:5} x {n:<5}  {f(us):>7} {f(gbs, 0):>5} "
          f"{f(frac, 2):>9} {f(tus):>9} {f(tus / us, 2):>6} {f(cus):>10} "
          f"{f(cus / us, 2):>6}  {nkern:>2} {plan if label == 'small-m' else 'off: ' + plan}",
          flush=True)
    bad |= us != us
print(f"(GB/s: (W + x + y bytes) / time; copy_frac: that over a device copy "
      f"of W's bytes (read + write) [{cuda_timing.copy_rates(copy_us)}]; "
      f"t/fuse, c/fuse: torch and torch.compile time over fuse's; all "
      f"L2-cold, median of {REPS}; {cuda_timing.device_text(torch)}, "
      f"tf32 off)")
sys.exit(1 if bad else 0)
