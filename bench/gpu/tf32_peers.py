# bench/gpu/tf32_peers.py - torch on bench/gpu/tf32's f32 matmul + bias +
# gelu (4096^3), timed like fuse-run --bench (CUDA events, median of N
# after warm-up), with torch.backends.cuda.matmul.allow_tf32 True (cuBLAS
# on tf32 tensor cores, what --precision=tf32 compares with) and False (f32
# CUDA cores). Prints `mm_bias_gelu_f32_4096 tf32|f32 eager compile mm`
# lines in TFLOP/s (2 M N K / time; mm: cuBLAS's mm alone, no epilogue),
# and the max abs difference of the tf32 result from the f32 one. Prints
# nothing and exits 0 when torch or a GPU is missing.
import sys

import cuda_timing  # bench/gpu/, the script's folder
try:
    import torch
    import torch.nn.functional as F
    assert torch.cuda.is_available()
except Exception:
    sys.exit(0)
N = int(sys.argv[1]) if len(sys.argv) > 1 else 20
dev = "cuda"


def med(fn, args):
    return cuda_timing.median_ms(fn, args, N)


def mm_bias_gelu(a, b, bias):
    return F.gelu(torch.mm(a, b) + bias)


n = 4096
g = torch.Generator(device=dev).manual_seed(n)
args = tuple(torch.randn(*s, device=dev, dtype=torch.float32, generator=g)
             for s in ((n, n), (n, n), (n,)))
flops = 2.0 * n ** 3
tf = lambda ms: flops / (ms * 1e-3) / 1e12
outs = {}
for mode in ("tf32", "f32"):
    torch.backends.cuda.matmul.allow_tf32 = mode == "tf32"
    torch._dynamo.reset()
    eager = med(mm_bias_gelu, args)
    try:
        comp = med(torch.compile(mm_bias_gelu), args)
    except Exception:
        comp = float("nan")
    mm = med(torch.mm, args[:2])
    outs[mode] = mm_bias_gelu(*args)
    print(f"mm_bias_gelu_f32_{n} {mode} {tf(eager):.1f} {tf(comp):.1f} "
          f"{tf(mm):.1f}", flush=True)
d = (outs["tf32"] - outs["f32"]).abs().max().item()
print(f"torch tf32 vs f32: max abs difference {d:.3g} (K = {n})", flush=True)
