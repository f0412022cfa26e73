# bench/gpu/attention_peers.py - the checks, the peer and the table of
# bench/gpu/attention.sh. FUSE_RESULTS has one line per fuse run:
#   NAME TYPE D S CAUSAL B H US KERNELS PLAN DIR
# (PLAN: flash when the kernel is the flash-attention one; DIR holds the
# run's input_0..2.npy (q, k, v) and output_0.npy). For each workload:
# fuse's output compared with torch's attention computed in f32 on the
# same inputs (f16: rtol 5e-3 atol 4e-3, bf16: rtol 2e-2 atol 2e-2), then
# torch's F.scaled_dot_product_attention with the flash backend
# (sdpa_kernel(SDPBackend.FLASH_ATTENTION)) timed as fuse-run --bench
# times fuse: CUDA events around one call, median of REPS after 3 warm-up
# calls. Prints the table; exits 1 when a check failed. Without torch or
# a GPU, fuse's columns only.
#     python3 bench/gpu/attention_peers.py FUSE_RESULTS [REPS]
import math
import os
import sys

import numpy as np

lines = [l.split() for l in open(sys.argv[1]) if l.strip()]
REPS = int(sys.argv[2]) if len(sys.argv) > 2 else 50
try:
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    assert torch.cuda.is_available()
    dev = "cuda"
except Exception as e:  # no torch, no GPU
    print(f"torch unavailable ({e}): fuse's columns only", file=sys.stderr)
    torch = None


def med_us(fn):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(REPS):
        a, b = torch.cuda.Event(True), torch.cuda.Event(True)
        a.record(); fn(); b.record(); b.synchronize()
        ts.append(a.elapsed_time(b) * 1e3)
    ts.sort()
    return ts[len(ts) // 2]


def load(path, dt):
    """A .npy as a torch tensor of dtype dt (bf16 arrays are stored as
    their 16-bit patterns, or as f32 where numpy writes them)."""
    a = np.load(path)
    if a.dtype == np.uint16 or a.dtype.kind == "V":
        t = torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16)
    else:
        t = torch.from_numpy(np.ascontiguousarray(a))
    return t.to(dev).to(dt)


def flops(b, h, s, d, causal):
    f = 4.0 * b * h * s * s * d
    return f / 2 if causal else f


fail = 0
rows = []
for r in lines:
    name, ty, d, s, c, b, h, us, kernels, plan, dir_ = r
    d, s, c, b, h, us = int(d), int(s), c == "1", int(b), int(h), float(us)
    check, t_us, err = "-", float("nan"), float("nan")
    if torch:
        dt = torch.bfloat16 if ty == "bf16" else torch.float16
        rtol, atol = (2e-2, 2e-2) if ty == "bf16" else (5e-3, 4e-3)
        try:
            q, k, v = (load(os.path.join(dir_, f"input_{i}.npy"), dt)
                       for i in range(3))
            out = load(os.path.join(dir_, "output_0.npy"), torch.float32)
            ref = F.scaled_dot_product_attention(q.float(), k.float(),
                                                 v.float(), is_causal=c)
            diff = (out - ref).abs()
            err = diff.max().item()
            ok = bool((diff <= atol + rtol * ref.abs()).all().item())
            check = "ok" if ok and us == us else "FAIL"
            del out, ref, diff
            with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
                t_us = med_us(lambda: F.scaled_dot_product_attention(
                    q, k, v, is_causal=c))
        except Exception as e:
            print(f"{name}: {e}", file=sys.stderr)
            check = "FAIL"
        if check == "FAIL":
            fail += 1
    fl = flops(b, h, s, d, c)
    tf = lambda t: fl / (t * 1e-6) / 1e12 if t == t and t > 0 else float("nan")
    rows.append((ty, d, s, "yes" if c else "no", f"{b}x{h}", us, tf(us), t_us,
                 tf(t_us), t_us / us if us == us and us > 0 else float("nan"),
                 kernels, plan, err, check))

f = lambda v, fmt="%.1f": "-" if v != v else fmt % v
hdr = ("type", "D", "S", "causal", "BxH", "fuse us", "TFLOP/s", "torch us",
       "TFLOP/s", "torch/fuse", "kernels", "plan", "max err", "check")
print("%-5s %4s %5s %6s %8s %10s %8s %10s %8s %10s %7s %6s %9s %5s" % hdr)
for r in rows:
    print("%-5s %4d %5d %6s %8s %10s %8s %10s %8s %10s %7s %6s %9s %5s" % (
        r[0], r[1], r[2], r[3], r[4], f(r[5]), f(r[6]), f(r[7]), f(r[8]),
        f(r[9], "%.2f"), r[10], r[11], f(r[12], "%.2e"), r[13]))
print(f"{len(rows)} workloads, {fail} failed checks")
sys.exit(1 if fail else 0)
