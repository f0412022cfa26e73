# bench/gpu/peers.py - torch eager and torch.compile on bench/gpu's
# workloads, timed like fuse-run --bench (CUDA events, median of N after
# warm-up). Prints `name eager_GBs compile_GBs` lines; prints nothing and
# exits 0 when torch or a GPU is missing.
import sys
try:
    import torch
    import torch.nn.functional as F
    assert torch.cuda.is_available()
except Exception:
    sys.exit(0)
R, C, N = 8192, 4096, int(sys.argv[1]) if len(sys.argv) > 1 else 20
dev = "cuda"

def med(fn, args):
    for _ in range(3):
        fn(*args)
    ts = []
    for _ in range(N):
        a, b = torch.cuda.Event(True), torch.cuda.Event(True)
        a.record(); fn(*args); b.record(); b.synchronize()
        ts.append(a.elapsed_time(b))
    ts.sort()
    return ts[len(ts) // 2]

def work():
    f32, bf = torch.float32, torch.bfloat16
    x = torch.randn(R, C, device=dev)
    yield ("relu_chain", lambda x, s, b: torch.relu(x * s + b),
           (x, torch.tensor(1.5, device=dev), torch.randn(C, device=dev)), 2 * R * C * 4 + C * 4 + 4)
    xb = x.to(bf)
    yield ("bias_gelu_bf16", lambda x, b: F.gelu(x + b),
           (xb, torch.randn(C, device=dev, dtype=bf)), 2 * R * C * 2 + C * 2)
    yield ("softmax_4096", lambda x: torch.softmax(x, 1), (x,), 2 * R * C * 4)
    r = torch.randn(R, C, device=dev)
    yield ("layer_norm_res", lambda x, r, s, b: F.layer_norm(x + r, (C,), s, b),
           (x, r, torch.randn(C, device=dev), torch.randn(C, device=dev)), 3 * R * C * 4 + 2 * C * 4)

for name, fn, args, nbytes in work():
    eager = med(fn, args)
    try:
        comp = med(torch.compile(fn), args)
    except Exception:
        comp = float("nan")
    print(f"{name} {nbytes / (eager * 1e6):.1f} {nbytes / (comp * 1e6):.1f}", flush=True)
