# bench/gpu/wgmma_peers.py - torch on bench/gpu/wgmma.sh's bf16 shapes,
# timed like fuse-run --bench (CUDA events, median of N after warm-up).
# Arguments: N, then NAME:M:N:K:EPI for each shape (EPI gelu: mm + bias +
# gelu, bias: mm + bias). Prints `NAME eager compile mm` per shape in
# TFLOP/s (2 M N K / time; mm: cuBLAS's torch.mm alone, no epilogue).
# Prints nothing and exits 0 when torch or a GPU is missing.
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


def mm_bias(a, b, bias):
    return torch.mm(a, b) + bias


for spec in sys.argv[2:]:
    name, m, n, k, epi = spec.split(":")
    m, n, k = int(m), int(n), int(k)
    g = torch.Generator(device=dev).manual_seed(m + n + k)
    args = tuple(torch.randn(*s, device=dev, dtype=torch.bfloat16,
                             generator=g) for s in ((m, k), (k, n), (n,)))
    fn = mm_bias_gelu if epi == "gelu" else mm_bias
    tf = lambda ms: 2.0 * m * n * k / (ms * 1e-3) / 1e12
    torch._dynamo.reset()
    eager = med(fn, args)
    try:
        comp = med(torch.compile(fn), args)
    except Exception:
        comp = float("nan")
    mm = med(torch.mm, args[:2])
    print(f"{name} {tf(eager):.1f} {tf(comp):.1f} {tf(mm):.1f}", flush=True)
