# bench/gpu/attention_peers.py - the fuse runs, checks, peer and table of
# bench/gpu/attention.sh. PLAN has one line per fuse run:
#   TYPE D S CAUSAL B H BM FUSE_FILE
# ($RUN is fuse-run). Per line: `FZ_GPU_ATTN_BM=BM $RUN FUSE_FILE --device
# cuda --random-inputs 1 --save-inputs --output-dir DIR --bench REPS`
# (its median), then fuse's output compared with torch's attention in f32
# on the same inputs (f16: rtol 5e-3 atol 4e-3, bf16: rtol 2e-2 atol
# 2e-2; DIR removed after); per workload torch's
# F.scaled_dot_product_attention under sdpa_kernel(FLASH_ATTENTION),
# timed as fuse-run --bench times fuse: CUDA events around one call,
# median of REPS after 3 warm-up calls. Prints the table; exits 1 when a
# check failed. Without torch or a GPU, fuse's times only.
#     RUN=.../fuse-run python3 bench/gpu/attention_peers.py PLAN [REPS]
import os
import re
import shutil
import subprocess
import sys
import tempfile

plan = [l.split() for l in open(sys.argv[1]) if l.strip()]
REPS = int(sys.argv[2]) if len(sys.argv) > 2 else 50
RUN = os.environ["RUN"]
try:
    import numpy as np
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    assert torch.cuda.is_available()
    dev = "cuda"
except Exception as e:  # no torch, no GPU
    print(f"torch unavailable ({e}): fuse's times only", file=sys.stderr)
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
    """A .npy as a torch tensor of dtype dt (fuse writes bf16 as 2-byte
    void elements)."""
    a = np.load(path)
    if a.dtype.kind == "V" or a.dtype == np.uint16:
        t = torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16)
    else:
        t = torch.from_numpy(np.ascontiguousarray(a))
    return t.to(dev).to(dt)


def fuse_run(path, bm, out_dir):
    env = dict(os.environ, FZ_GPU_ATTN_BM=bm)
    p = subprocess.run([RUN, path, "--device", "cuda", "--random-inputs", "1",
                        "--save-inputs", "--output-dir", out_dir, "--bench",
                        str(REPS), "--print-limit", "0"], env=env,
                       capture_output=True, text=True, timeout=900)
    out = p.stdout + p.stderr
    m = re.search(r"^bench-cuda: @main: .* median ([0-9.]+) us", out, re.M)
    k = re.search(r"^bench-cuda: kernel main_k0: (.*)$", out, re.M)
    if not m:
        err = [l for l in out.splitlines() if "error" in l.lower()][:1]
        print(f"fuse-run failed ({path}, BM {bm}): {err}", file=sys.stderr)
    return (float(m.group(1)) if m else float("nan"),
            out.count("bench-cuda: kernel "), k.group(1) if k else "")


fail = 0
work = {}  # (type, D, S, causal, B, H) -> {bm: (us, check, err)}, torch us
order = []
tdir = tempfile.mkdtemp(dir=os.environ.get("TMPDIR"))
for ty, d, s, c, b, h, bm, path in plan:
    key = (ty, int(d), int(s), c == "1", int(b), int(h))
    if key not in work:
        order.append(key)
        work[key] = {"bm": {}, "torch": float("nan"), "plans": []}
    w = work[key]
    out_dir = os.path.join(tdir, "run")
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)
    us, kernels, kplan = fuse_run(path, bm, out_dir)
    w["plans"].append(f"BM {bm}: {kernels} kernel(s), {kplan}")
    check, err = ("-" if us == us else "FAIL"), float("nan")
    if torch and us == us:
        dt = torch.bfloat16 if ty == "bf16" else torch.float16
        rtol, atol = (2e-2, 2e-2) if ty == "bf16" else (5e-3, 4e-3)
        try:
            q, k, v = (load(os.path.join(out_dir, f"input_{i}.npy"), dt)
                       for i in range(3))
            out = load(os.path.join(out_dir, "output_0.npy"), torch.float32)
            ref = F.scaled_dot_product_attention(q.float(), k.float(),
                                                 v.float(), is_causal=key[3])
            diff = (out - ref).abs()
            err = diff.max().item()
            ok = bool((diff <= atol + rtol * ref.abs()).all().item())
            check = "ok" if ok and kernels == 1 else "FAIL"
            del out, ref, diff
            if w["torch"] != w["torch"]:
                with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
                    w["torch"] = med_us(lambda: F.scaled_dot_product_attention(
                        q, k, v, is_causal=key[3]))
            del q, k, v
            torch.cuda.empty_cache()
        except Exception as e:
            print(f"{path} BM {bm}: {e}", file=sys.stderr)
            check = "FAIL"
    shutil.rmtree(out_dir, ignore_errors=True)
    if check == "FAIL":
        fail += 1
    w["bm"][bm] = (us, check, err)
shutil.rmtree(tdir, ignore_errors=True)

bms = sorted({bm for _, _, _, _, _, _, bm, _ in plan}, key=int)
f = lambda v, fmt="%.1f": "-" if v != v else fmt % v
hdr = ["type", "D", "S", "causal", "BxH"] + [f"fuse BM{bm} us" for bm in bms]
hdr += ["best TFLOP/s", "torch us", "TFLOP/s", "torch/fuse", "max err",
        "check"]
print(" | ".join(hdr))
for key in order:
    ty, d, s, c, b, h = key
    w = work[key]
    fl = 4.0 * b * h * s * s * d / (2 if c else 1)
    tf = lambda t: fl / (t * 1e-6) / 1e12 if t == t and t > 0 else float("nan")
    times = [w["bm"].get(bm, (float("nan"),))[0] for bm in bms]
    valid = [t for t in times if t == t]
    best = min(valid) if valid else float("nan")
    checks = {w["bm"][bm][1] for bm in w["bm"]}
    errs = [w["bm"][bm][2] for bm in w["bm"] if w["bm"][bm][2] == w["bm"][bm][2]]
    row = [ty, str(d), str(s), "yes" if c else "no", f"{b}x{h}"]
    row += [f(t) for t in times]
    row += [f(tf(best)), f(w["torch"]), f(tf(w["torch"])),
            f(w["torch"] / best if best == best else float("nan"), "%.2f"),
            f(max(errs) if errs else float("nan"), "%.1e"),
            "FAIL" if "FAIL" in checks else ("ok" if "ok" in checks else "-")]
    print(" | ".join(row))
print(f"{len(order)} workloads, {fail} failed checks (torch/fuse above 1: "
      "fuse's best tile is faster)")
for key in order[:2]:
    for p in work[key]["plans"]:
        print(f"{key[0]} D={key[1]} S={key[2]}: {p}")
sys.exit(1 if fail else 0)
