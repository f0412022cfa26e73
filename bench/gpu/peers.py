# bench/gpu/peers.py - torch eager and torch.compile on bench/gpu's
# workloads (the same shapes as the *.fuse files beside it), timed like
# fuse-run --bench (CUDA events, median of N after warm-up).
# Prints `name eager_GBs compile_GBs` lines (ideal bytes: inputs read
# once, outputs written once); prints nothing and exits 0 when torch or a
# GPU is missing. `peers.py N NAME...` runs only the workloads named.
# With --matmul: the matmul workloads of bench/gpu/matmul instead, as
# `name eager_TFLOPs compile_TFLOPs mm_TFLOPs`: torch eager (torch.mm,
# i.e. cuBLAS, then + bias and the exact gelu, three kernels), the same
# under torch.compile, and cuBLAS's mm alone (the limit: no epilogue).
# TFLOP/s count 2 M N K.
import sys

import cuda_timing  # bench/gpu/, the script's folder
try:
    import torch
    import torch.nn.functional as F
    assert torch.cuda.is_available()
except Exception:
    sys.exit(0)
matmul = "--matmul" in sys.argv
argv = [a for a in sys.argv if a != "--matmul"]
N = int(argv[1]) if len(argv) > 1 else 20
only = set(argv[2:])
dev = "cuda"
f32, bf16 = torch.float32, torch.bfloat16


def med(fn, args):
    return cuda_timing.median_ms(fn, args, N)


def nbytes(args, out):
    return sum(t.numel() * t.element_size() for t in list(args) + [out])


def chain10(x, a, b):
    y = torch.relu(x * a + b) * a - b
    y = -((y.abs() + a) * b)
    return torch.maximum(y, x)


def rms_norm(x, s):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-5) * s


R, C = 32768, 4096


def work():
    r = lambda *s, dt=f32: torch.randn(*s, device=dev, dtype=dt)
    sc = lambda v, dt=f32: torch.tensor(v, device=dev, dtype=dt)
    yield "01_relu_affine", lambda x, s, b: torch.relu(x * s + b), (r(R, C), sc(1.5), r(C))
    yield "02_chain10_f32", chain10, (r(R, C), sc(1.5), sc(0.5))
    yield "03_chain10_bf16", chain10, (r(R, C, dt=bf16), sc(1.5, bf16), sc(0.5, bf16))
    yield "04a_bias_gelu_f32", lambda x, b: F.gelu(x + b), (r(R, C), r(C))
    yield "04b_bias_gelu_bf16", lambda x, b: F.gelu(x + b), (r(R, C, dt=bf16), r(C, dt=bf16))
    for name, rows, n, dt in (("05_softmax_1024", 131072, 1024, f32),
                              ("06_softmax_4096", 32768, 4096, f32),
                              ("07_softmax_16384", 8192, 16384, f32),
                              ("08_softmax_65536", 2048, 65536, f32),
                              ("09_softmax_4096_bf16", 32768, 4096, bf16),
                              ("14_softmax_65536_bf16", 2048, 65536, bf16)):
        yield name, lambda x: torch.softmax(x, 1), (r(rows, n, dt=dt),)
    yield "10_layer_norm_res", lambda x, y, s, b: F.layer_norm(x + y, (C,), s, b), (r(R, C), r(R, C), r(C), r(C))
    yield "11_rms_norm", rms_norm, (r(R, C), r(C))
    yield "12_row_sum", lambda x: x.sum(1), (r(16384, 8192),)
    yield "13_col_sum", lambda x: x.sum(0), (r(16384, 8192),)
    L = 65536
    yield "15_layer_norm_res_65536", lambda x, y, s, b: F.layer_norm(x + y, (L,), s, b), (r(2048, L), r(2048, L), r(L), r(L))
    # bf16 counterparts of the f32 workloads above
    yield "16_relu_affine_bf16", lambda x, s, b: torch.relu(x * s + b), (r(R, C, dt=bf16), sc(1.5, bf16), r(C, dt=bf16))
    for name, rows, n in (("17_softmax_1024_bf16", 131072, 1024),
                          ("18_softmax_16384_bf16", 8192, 16384)):
        yield name, lambda x: torch.softmax(x, 1), (r(rows, n, dt=bf16),)
    yield "19_layer_norm_res_bf16", lambda x, y, s, b: F.layer_norm(x + y, (C,), s, b), (r(R, C, dt=bf16), r(R, C, dt=bf16), r(C, dt=bf16), r(C, dt=bf16))
    yield "20_rms_norm_bf16", rms_norm, (r(R, C, dt=bf16), r(C, dt=bf16))
    yield "21_row_sum_bf16", lambda x: x.sum(1), (r(16384, 8192, dt=bf16),)
    yield "22_col_sum_bf16", lambda x: x.sum(0), (r(16384, 8192, dt=bf16),)
    yield "23_layer_norm_res_65536_bf16", lambda x, y, s, b: F.layer_norm(x + y, (L,), s, b), (r(2048, L, dt=bf16), r(2048, L, dt=bf16), r(L, dt=bf16), r(L, dt=bf16))


def mm_bias_gelu(a, b, bias):
    return F.gelu(torch.mm(a, b) + bias)


def mm_work():
    for n in (4096, 8192):
        g = torch.Generator(device=dev).manual_seed(n)
        r = lambda *s: torch.randn(*s, device=dev, dtype=bf16, generator=g)
        yield f"mm_bias_gelu_bf16_{n}", (r(n, n), r(n, n), r(n)), 2.0 * n ** 3


if matmul:
    for name, args, flops in mm_work():
        if only and name not in only:
            continue
        tf = lambda ms: flops / (ms * 1e-3) / 1e12
        eager = med(mm_bias_gelu, args)
        try:
            comp = med(torch.compile(mm_bias_gelu), args)
        except Exception:
            comp = float("nan")
        mm = med(torch.mm, args[:2])
        print(f"{name} {tf(eager):.1f} {tf(comp):.1f} {tf(mm):.1f}", flush=True)
        del args
        torch.cuda.empty_cache()
    sys.exit(0)

for name, fn, args in work():
    if only and name not in only:
        continue
    out = fn(*args)
    nb = nbytes(args, out)
    eager = med(fn, args)
    try:
        comp = med(torch.compile(fn), args)
    except Exception:
        comp = float("nan")
    print(f"{name} {nb / (eager * 1e6):.1f} {nb / (comp * 1e6):.1f}", flush=True)
    del args, out
    torch.cuda.empty_cache()
