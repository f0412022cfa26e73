# bench/gpu/split_k_peers.py - the peers of bench/gpu/split_k.sh and its
# table. FUSE_RESULTS has one line per fuse run:
#   NAME conv TYPE N C H OC K STRIDE PAD MODE US KERNELS S
#   NAME mm TYPE M K N MODE US KERNELS S
# (MODE auto, off or a forced count; S the plan's split-k, 1: none). For
# each workload: torch's relu(conv2d(x, w, b)) (cuDNN, cudnn.benchmark,
# TF32 allowed for f32 as fuse's default precision) or x @ w (cuBLAS,
# TF32 allowed for f32), eager and torch.compile (default mode; skipped
# with SPLITK_COMPILE=0, or past COMPILE_BUDGET_S seconds of compiling,
# default 300), timed as fuse-run --bench[-cold] times fuse: CUDA events
# around one call, median of REPS after 3 warm-up calls; with COLD=1 (the
# default, as the script's --bench-cold) a 256 MiB buffer is overwritten
# before each timed call. Prints the table: per workload the GEMM, S, fuse
# auto and off (us, TFLOP/s), off/auto, torch eager and compile (us) and
# torch/auto (above 1: fuse's auto is faster), then the forced counts.
# Without torch or a GPU the table has fuse's columns only.
#     python3 bench/gpu/split_k_peers.py FUSE_RESULTS [REPS]
import math
import os
import sys
import time

lines = [l.split() for l in open(sys.argv[1]) if l.strip()]
REPS = int(sys.argv[2]) if len(sys.argv) > 2 else 50
COLD = os.environ.get("COLD", "1") != "0"
BUDGET = float(os.environ.get("COMPILE_BUDGET_S", "300"))
try:
    import torch
    import torch.nn.functional as F
    assert torch.cuda.is_available()
    dev = "cuda"
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = True
    torch.backends.cuda.matmul.allow_tf32 = True
    import torch._dynamo
    torch._dynamo.config.cache_size_limit = 256
except Exception:
    torch = None
flush = (torch.empty(256 << 20, dtype=torch.uint8, device=dev)
         if torch and COLD else None)


def med_us(fn, args):
    for _ in range(3):
        fn(*args)
    torch.cuda.synchronize()
    ts = []
    for i in range(REPS):
        if flush is not None:
            flush.fill_(i & 0xFF)
        a, b = torch.cuda.Event(True), torch.cuda.Event(True)
        a.record(); fn(*args); b.record(); b.synchronize()
        ts.append(a.elapsed_time(b) * 1e3)
    ts.sort()
    return ts[len(ts) // 2]


# Workloads in order, their fuse runs by mode.
order, work = [], {}
for r in lines:
    name, kind, ty = r[0], r[1], r[2]
    nd = 7 if kind == "conv" else 3
    dims = list(map(int, r[3:3 + nd]))
    mode, us, kernels, S = r[3 + nd], float(r[4 + nd]), r[5 + nd], r[6 + nd]
    if name not in work:
        order.append(name)
        work[name] = {"kind": kind, "ty": ty, "dims": dims, "runs": {}}
    work[name]["runs"][mode] = (us, kernels, S)


def geometry(w):
    if w["kind"] == "conv":
        n, c, h, oc, k, s, p = w["dims"]
        oh = (h + 2 * p - k) // s + 1
        return n * oh * oh, oc, c * k * k, oh
    m, k, n = w["dims"]
    return m, n, k, None


def torch_times(w):
    """(eager_us, compile_us) of the workload; nan where unavailable."""
    global spent
    if not torch:
        return float("nan"), float("nan")
    dt = torch.float32 if w["ty"] == "f32" else torch.bfloat16
    g = torch.Generator(device=dev).manual_seed(1)
    rnd = lambda *shape: torch.randn(*shape, device=dev, dtype=dt, generator=g)
    if w["kind"] == "conv":
        n, c, h, oc, k, s, p = w["dims"]
        args = (rnd(n, c, h, h), rnd(oc, c, k, k), rnd(oc))

        def fn(x, wt, b):
            return F.relu(F.conv2d(x, wt, b, stride=s, padding=p))
    else:
        m, k, n = w["dims"]
        args = (rnd(m, k), rnd(k, n))

        def fn(x, wt):
            return x @ wt
    eager = med_us(fn, args)
    comp = float("nan")
    if os.environ.get("SPLITK_COMPILE", "1") != "0" and spent < BUDGET:
        t0 = time.time()
        try:
            torch._dynamo.reset()
            comp = med_us(torch.compile(fn, dynamic=False), args)
        except Exception as e:
            print(f"torch.compile failed on {w['dims']}: {e}", file=sys.stderr)
        spent += time.time() - t0
    return eager, comp


def tf(flops, us):
    return flops / (us * 1e-6) / 1e12 if us == us and us > 0 else float("nan")


def f(v, fmt="%.1f"):
    return "-" if v != v else fmt % v


spent = 0.0
hdr = ("%-11s %-5s %-16s %3s %9s %6s %9s %6s %7s %9s %9s %7s %7s" %
       ("workload", "type", "GEMM MxNxK", "S", "auto_us", "TF/s", "off_us",
        "TF/s", "off/aut", "eager_us", "comp_us", "eag/aut", "cmp/aut"))
print(hdr)
print("-" * len(hdr))
extra = []
for name in order:
    w = work[name]
    M, N, K, _ = geometry(w)
    flops = 2.0 * M * N * K
    a = w["runs"].get("auto", (float("nan"), "-", "1"))
    o = w["runs"].get("off", (float("nan"), "-", "1"))
    eager, comp = torch_times(w)
    ratio = lambda x, y: x / y if x == x and y == y and y > 0 else float("nan")
    print("%-11s %-5s %-16s %3s %9s %6s %9s %6s %7s %9s %9s %7s %7s" % (
        name, w["ty"], "%dx%dx%d" % (M, N, K), a[2], f(a[0]),
        f(tf(flops, a[0])), f(o[0]), f(tf(flops, o[0])),
        f(ratio(o[0], a[0]), "%.2f"), f(eager), f(comp),
        f(ratio(eager, a[0]), "%.2f"), f(ratio(comp, a[0]), "%.2f")),
        flush=True)
    for mode, (us, _, S) in w["runs"].items():
        if mode not in ("auto", "off"):
            extra.append("%s forced %s: S %s, %s us, %s TFLOP/s" % (
                name, mode, S, f(us), f(tf(flops, us))))
for e in extra:
    print(e)
dev_name = torch.cuda.get_device_name() if torch else "no torch"
print("(us: medians of %d runs%s; TF/s = 2 M N K / time; fuse: fuse-run "
      "--bench, split-k auto and FZ_GPU_SPLIT_K=off; torch %s on %s, TF32 "
      "allowed for f32)" % (REPS, ", L2 cold" if COLD else "",
                            torch.__version__ if torch else "-", dev_name))
