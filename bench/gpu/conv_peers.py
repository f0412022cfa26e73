# bench/gpu/conv_peers.py - PyTorch on bench/gpu/conv's workloads:
# relu(conv2d(x, w, b)) in bf16, NCHW (channels-first, contiguous), cuDNN
# with torch.backends.cudnn.benchmark on (its fastest algorithm per
# shape), eager and torch.compile, timed like fuse-run --bench (CUDA
# events, median of N after warm-up). Prints one line per workload:
#   NAME eager_TFLOPs compile_TFLOPs
# (2 * N * OH * OW * OC * C * KH * KW / time). Prints nothing and exits 0
# when torch or a GPU is missing. CONV_COMPILE=0: no torch.compile (nan).
#     python3 bench/gpu/conv_peers.py REPS NAME:N:C:H:OC:K:S:P ...
import os
import sys

import cuda_timing  # bench/gpu/, the script's folder
try:
    import torch
    import torch.nn.functional as F
    assert torch.cuda.is_available()
except Exception:
    sys.exit(0)
REPS = int(sys.argv[1]) if len(sys.argv) > 1 else 20
dev = "cuda"
torch.backends.cudnn.benchmark = True


def med(fn, args):
    return cuda_timing.median_ms(fn, args, REPS)


for spec in sys.argv[2:]:
    name, n, c, h, oc, k, s, p = spec.split(":")
    n, c, h, oc, k, s, p = map(int, (n, c, h, oc, k, s, p))
    oh = (h + 2 * p - k) // s + 1
    flops = 2.0 * n * oh * oh * oc * c * k * k
    g = torch.Generator(device=dev).manual_seed(1)
    x = torch.randn(n, c, h, h, device=dev, dtype=torch.bfloat16, generator=g)
    w = torch.randn(oc, c, k, k, device=dev, dtype=torch.bfloat16, generator=g)
    b = torch.randn(oc, device=dev, dtype=torch.bfloat16, generator=g)

    def conv(x, w, b):
        return F.relu(F.conv2d(x, w, b, stride=s, padding=p))

    eager = med(conv, (x, w, b))
    comp = float("nan")
    if os.environ.get("CONV_COMPILE", "1") != "0":
        torch._dynamo.reset()
        try:
            comp = med(torch.compile(conv), (x, w, b))
        except Exception:
            pass
    tf = lambda ms: flops / (ms * 1e-3) / 1e12
    print(f"{name} {tf(eager):.1f} {tf(comp):.1f}", flush=True)
