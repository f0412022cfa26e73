# bench/gpu/channel_ln_peers.py - the peers of bench/gpu/channel_ln.sh and
# its table: for each row of fuse's results (the file FUSE_RESULTS:
# "pattern type NxCxHxW us kernels plan..." per line), torchvision's code
# in torch eager and torch.compile (default mode: inductor):
#   nhwc  F.layer_norm(x.permute(0, 2, 3, 1), (C,), g, b, 1e-6)
#   ln2d  the same, .permute(0, 3, 1, 2) (LayerNorm2d; a view, as the
#         model leaves it for the next convolution)
# timed as fuse-run --bench --bench-cold times fuse (CUDA events around one
# call, median of REPS after 3 warm-up calls, a 256 MiB buffer overwritten
# before each timed call), and a device-to-device copy of x's bytes timed
# the same way: the copy rate (read + write) that the fractions use.
# Without torch or a GPU the table has fuse's columns only.
#     python3 bench/gpu/channel_ln_peers.py FUSE_RESULTS [REPS]
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cuda_timing  # noqa: E402

rows = [l.split(None, 5) for l in open(sys.argv[1]) if l.strip()]
REPS = int(sys.argv[2]) if len(sys.argv) > 2 else 50
torch = cuda_timing.torch_on_gpu()
if torch:
    import torch.nn.functional as F
dev = "cuda"
flush = torch.empty(256 << 20, dtype=torch.uint8, device=dev) if torch else None


def med(fn):
    """us, L2-cold (cuda_timing.median_ms with the flush buffer)."""
    return cuda_timing.median_ms(fn, (), REPS, flush) * 1e3


def nhwc(x, g, b):
    return F.layer_norm(x.permute(0, 2, 3, 1), (x.shape[1],), g, b, 1e-6)


def ln2d(x, g, b):
    return nhwc(x, g, b).permute(0, 3, 1, 2)


FNS = {"nhwc": nhwc, "ln2d": ln2d}
compiled = {}
if torch:
    import torch._dynamo
    torch._dynamo.config.cache_size_limit = 256
    compiled = {k: torch.compile(f, dynamic=False) for k, f in FNS.items()}

print("pattern type  N x C x H x W     fuse_us  GB/s  copy_frac  torch_us "
      "t/fuse  compile_us c/fuse  kernels plan")
copy_us = {}
bad = False
for r in rows:
    pat, ty, shape, us, nkern = r[:5]
    plan = r[5].strip() if len(r) > 5 else "?"
    n, c, h, w = (int(v) for v in shape.split("x"))
    us = float(us)
    nbytes = n * c * h * w * cuda_timing.ELT_BYTES[ty]
    tus = cus = cp = float("nan")
    if torch:
        gen = torch.Generator(device=dev).manual_seed(n + c + h)
        dt = getattr(torch, cuda_timing.TORCH_DTYPES[ty])
        x = torch.randn(n, c, h, w, device=dev, generator=gen).to(dt)
        g = torch.rand(c, device=dev, generator=gen).to(dt) + 0.5
        b = torch.randn(c, device=dev, generator=gen).to(dt) * 0.1
        tus = med(lambda: FNS[pat](x, g, b))
        try:
            cfn = compiled[pat]
            cfn(x, g, b)
            cus = med(lambda: cfn(x, g, b))
        except Exception as e:
            print(f"# torch.compile failed: {e}", file=sys.stderr)
        cp = cuda_timing.copy_us(nbytes, REPS, flush, copy_us)
    gbs = 2 * nbytes / (us * 1e3) if us == us else float("nan")
    copy_gbs = 2 * nbytes / (cp * 1e3) if cp == cp else float("nan")
    frac = gbs / copy_gbs if copy_gbs == copy_gbs else float("nan")
    f = lambda v, p=1: "-" if v != v else f"{v:.{p}f}"
    print(f"{pat:7} {ty:4} {shape:16} {f(us):>8} {f(gbs, 0):>5} "
          f"{f(frac, 2):>9} {f(tus):>9} {f(tus / us, 2):>6} {f(cus):>10} "
          f"{f(cus / us, 2):>6}  {nkern:>2} {plan}", flush=True)
    bad |= us != us
print(f"(GB/s: (x + y bytes) / time; copy_frac: that over a device copy of "
      f"x's bytes (read + write) [{cuda_timing.copy_rates(copy_us)}]; "
      f"t/fuse, c/fuse: torch eager and torch.compile time over fuse's; all "
      f"L2-cold, median of {REPS}; {cuda_timing.device_text(torch)})")
sys.exit(1 if bad else 0)
