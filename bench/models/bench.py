"""bench/models/bench.py - whole models, fuse side by side with its peers.

Called by bench/models/run.sh (which finds the carried fuse-run); see
that file and bench/models/README.md for the commands. For every
configuration (model, dtype, batch):

 1. export: the model (bench/models/models.py, seeded) to ONNX opset 17,
    its input as .npy, and the reference output: the same weights and
    input run by PyTorch in float64 (on the GPU when there is one);
 2. fuse: `fuse-run model.onnx --device D --input input.npy --output-dir
    OUT --bench REPS --bench-lock LOCK`: the output is checked against
    the reference, then the time (median of REPS; on the GPU one CUDA
    graph replay per call, timed with events), the kernel count and the
    time from the start of the process to the first result (import,
    fusion, code generation, the driver's load, one run: fuse's whole
    compile). fuse runs with `--precision default`: on the GPU, f32
    matmuls and convolutions on tf32 tensor cores (the policy PyTorch's
    cuDNN convolutions, TensorRT and ONNX Runtime's CUDA provider
    follow by default), exact f32 on the CPU. On the GPU the fuse
    processes run JOBS at a time, so that their compiles overlap, and
    time one at a time under LOCK; f32 models also run with
    `--precision ieee` (exact f32 on CUDA cores: the "fuse ieee" column);
    with --alt ARGS, every configuration also runs with those extra
    fuse-run arguments (the "fuse alt" column, and alt/fuse: an option's
    A/B on whole models in one run, e.g. --alt '--gpu-arch sm_90a');
 3. peers, under the same lock while timing: GPU: torch eager,
    torch.compile (default) and torch.compile(mode="reduce-overhead")
    (CUDA graphs: the fair peer for fuse's graph replay), each checked
    against the reference, and torch.compile's first call timed as its
    compile time; CPU: ONNX Runtime's CPU provider (the Python package,
    else Node.js's onnxruntime-node through ort_node.js) and PyTorch
    eager, with fuse's thread count;
 4. a table with ratios (fuse over each peer) and, with --json, one JSON
    object per configuration.

A configuration passes when fuse's output is within the stated
tolerance of the float64 reference: relative L2 error ||out - ref|| /
||ref|| at most 1e-2 for f32 on the GPU (the default precision: tf32),
1e-3 for f32 on the CPU and for the GPU's ieee run, 2e-2 for fp16
(--tol-* to change). Nothing is timed before it is checked: a wrong
output is reported as such, with no time.
"""
import argparse
import concurrent.futures as cf
import fcntl
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import models  # noqa: E402

# The run's start, shared with the worker processes (CLOCK_MONOTONIC is
# one clock for the whole machine).
T0 = float(os.environ.setdefault("FZ_BENCH_T0", repr(time.monotonic())))


def log(msg):
    print(f"[{time.monotonic() - T0:6.1f} s] {msg}", flush=True)


class BenchLock:
    """The flock that fuse-run --bench-lock takes: one timing at a time."""

    def __init__(self, path):
        self.path = path

    def __enter__(self):
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(self.fd, fcntl.LOCK_EX)

    def __exit__(self, *exc):
        os.close(self.fd)


def rel_err(out, ref):
    out = np.asarray(out, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    if out.shape != ref.shape:
        return float("inf"), float("inf")
    if not np.all(np.isfinite(out)):
        return float("inf"), float("inf")
    den = np.linalg.norm(ref)
    return (float(np.linalg.norm(out - ref) / (den if den > 0 else 1.0)),
            float(np.max(np.abs(out - ref))) if out.size else 0.0)


# ---------------------------------------------------------------- export


def export(cfg, work, dev):
    """Writes model.onnx, input.npy and ref.npy for cfg; returns its dir."""
    import torch
    name, dtype, batch = cfg
    d = os.path.join(work, f"{name}-{dtype}-b{batch}")
    os.makedirs(d, exist_ok=True)
    model = models.build(name)
    x = models.make_input(name, batch)
    if dtype == "f16":
        model, x = model.half(), x.half()
    # The reference: the same (rounded) weights and input in float64.
    import copy
    ref_model = copy.deepcopy(model).double().to(dev)
    with torch.no_grad():
        ref = ref_model(x.double().to(dev)).cpu().numpy()
    del ref_model
    np.save(os.path.join(d, "ref.npy"), ref)
    np.save(os.path.join(d, "input.npy"), x.numpy())
    models.export_onnx(model, x, os.path.join(d, "model.onnx"))
    return d


# ---------------------------------------------------------------- fuse

FIRST = re.compile(r"bench: first result after ([0-9.]+) s")
CUDA = re.compile(r"bench-cuda: @\S+: (\d+) kernels? \(([^)]*)\), median "
                  r"([0-9.]+) us")
CPU = re.compile(r"bench: @\S+ on cpu, \d+ threads?: median ([0-9.]+) ms")


def run_fuse(args, d, variant, deadline):
    """One fuse-run process; returns a dict of what it measured."""
    r = fuse_once(args, d, variant, deadline)
    log(f"fuse {variant} {os.path.basename(d)}: " + ", ".join(
        f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}"
        for k, v in r.items() if k != "variant"))
    return r


def fuse_once(args, d, variant, deadline):
    out = os.path.join(d, "out-" + variant)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    cmd = [args.fuse_run, os.path.join(d, "model.onnx"), "--device",
           args.device, "--input", os.path.join(d, "input.npy"),
           "--output-dir", out, "--bench", str(args.reps), "--bench-lock",
           args.lock, "--print-limit", "0"]
    if args.device == "cpu":
        cmd += ["--threads", str(args.threads)]
    # Always explicit, so that no FZ_GPU_TF32 in the environment (the old
    # switch) decides it.
    cmd += ["--precision", "ieee" if variant == "ieee" else "default"]
    if variant == "alt":
        cmd += shlex.split(args.alt)
    env = dict(os.environ)
    r = {"variant": variant}
    left = deadline - time.monotonic()
    if left < 10:
        r["error"] = "not run: the time budget was spent"
        return r
    t = time.monotonic()
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True,
                           timeout=left)
    except subprocess.TimeoutExpired:
        r["error"] = f"timed out after {left:.0f} s (the time budget)"
        return r
    r["wall_s"] = time.monotonic() - t
    text = p.stdout + p.stderr
    with open(os.path.join(d, f"fuse-{variant}.log"), "w") as f:
        f.write(" ".join(cmd) + "\n" + text)
    if p.returncode != 0:
        lines = [ln for ln in text.splitlines() if "error" in ln]
        r["error"] = (lines[0] if lines else
                      f"exit {p.returncode}: {text.strip()[-200:]}")
        return r
    m = FIRST.search(text)
    r["compile_s"] = float(m.group(1)) if m else None
    if args.device == "cuda":
        m = CUDA.search(text)
        if m:
            r["kernels"], r["graph"] = int(m.group(1)), m.group(2)
            r["ms"] = float(m.group(3)) / 1e3
    else:
        m = CPU.search(text)
        if m:
            r["ms"] = float(m.group(1))
    if "ms" not in r:
        r["error"] = "no timing line in fuse-run's output"
    try:
        got = np.load(os.path.join(out, "output_0.npy"))
        r["rel_err"], r["max_abs_err"] = rel_err(
            got, np.load(os.path.join(d, "ref.npy")))
    except (OSError, ValueError) as e:
        r["error"] = f"no output to check: {e}"
    return r


# ---------------------------------------------------------------- peers


def cuda_median_ms(fn, x, reps):
    import torch
    for _ in range(3):
        fn(x)
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        e0 = torch.cuda.Event(enable_timing=True)
        e1 = torch.cuda.Event(enable_timing=True)
        e0.record()
        fn(x)
        e1.record()
        e1.synchronize()
        ts.append(e0.elapsed_time(e1))
    return float(np.median(ts))


def wall_median_ms(fn, reps):
    fn()
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t) * 1e3)
    return float(np.median(ts))


def gpu_peers(args, cfg, d):
    import torch
    name, dtype, batch = cfg
    ref = np.load(os.path.join(d, "ref.npy"))
    model = models.build(name)
    x = torch.from_numpy(np.load(os.path.join(d, "input.npy"))).cuda()
    if dtype == "f16":
        model = model.half()
    model = model.cuda()
    res = {}
    kinds = [("torch_eager", None), ("torch_compile", "default"),
             ("torch_compile_ro", "reduce-overhead")]
    with torch.inference_mode():
        for key, mode in kinds:
            if mode and not hasattr(torch, "compile"):
                continue
            try:
                fn = model
                if mode:
                    torch._dynamo.reset()
                    fn = torch.compile(model, mode=mode)
                t = time.monotonic()
                out = fn(x)
                torch.cuda.synchronize()
                if mode:
                    res[key + "_compile_s"] = time.monotonic() - t
                res[key + "_rel_err"] = rel_err(out.float().cpu().numpy(),
                                                ref)[0]
                with BenchLock(args.lock):
                    res[key + "_ms"] = cuda_median_ms(fn, x, args.reps)
            except Exception as e:  # a peer that fails is reported, not fatal
                res[key + "_error"] = f"{type(e).__name__}: {e}"[:200]
    return res


def cpu_peers(args, cfg, d):
    import torch
    name, dtype, batch = cfg
    ref = np.load(os.path.join(d, "ref.npy"))
    x = torch.from_numpy(np.load(os.path.join(d, "input.npy")))
    res = {}
    torch.set_num_threads(args.threads)
    model = models.build(name)
    try:
        with torch.inference_mode():
            res["torch_rel_err"] = rel_err(model(x).numpy(), ref)[0]
            res["torch_ms"] = wall_median_ms(lambda: model(x), args.reps)
    except Exception as e:
        res["torch_error"] = f"{type(e).__name__}: {e}"[:200]
    try:
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.intra_op_num_threads = args.threads
        so.inter_op_num_threads = 1
        s = ort.InferenceSession(os.path.join(d, "model.onnx"), so,
                                 providers=["CPUExecutionProvider"])
        feed = {s.get_inputs()[0].name: x.numpy()}
        res["ort_rel_err"] = rel_err(s.run(None, feed)[0], ref)[0]
        res["ort_ms"] = wall_median_ms(lambda: s.run(None, feed), args.reps)
        res["ort_version"] = ort.__version__
    except ImportError:
        res.update(ort_node(args, d, ref))
    except Exception as e:
        res["ort_error"] = f"{type(e).__name__}: {e}"[:200]
    return res


def ort_node(args, d, ref):
    """ONNX Runtime through Node.js (bench/models/ort_node.js)."""
    here = os.path.dirname(os.path.abspath(__file__))
    out = os.path.join(d, "ort-output.npy")
    cmd = ["node", os.path.join(here, "ort_node.js"),
           os.path.join(d, "model.onnx"), os.path.join(d, "input.npy"), out,
           str(args.threads), str(args.reps)]
    env = dict(os.environ)
    env["NODE_PATH"] = args.ort_node_path
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=env,
                           timeout=1800)
        if p.returncode != 0:
            return {"ort_error": (p.stderr.strip() or p.stdout)[-200:]}
        r = json.loads(p.stdout.strip().splitlines()[-1])
        return {"ort_ms": r["ms"], "ort_version": r["version"],
                "ort_rel_err": rel_err(np.load(out), ref)[0]}
    except (OSError, ValueError, subprocess.TimeoutExpired) as e:
        return {"ort_error": f"{type(e).__name__}: {e}"[:200]}


def export_task(cfg, work, dev, deadline):
    if time.monotonic() > deadline:
        raise RuntimeError("not run: the time budget was spent")
    return export(cfg, work, dev)


def peers_task(args, cfg, d, deadline):
    if time.monotonic() > deadline:
        return {"peers_error": "not run: the time budget was spent"}
    try:
        return (gpu_peers if args.device == "cuda" else cpu_peers)(args, cfg, d)
    except Exception as e:
        return {"peers_error": f"{type(e).__name__}: {e}"[:200]}


# ---------------------------------------------------------------- report


def fmt(v, spec=".2f"):
    return "-" if v is None else format(v, spec)


def ratio(a, b):
    return None if a is None or b is None or b <= 0 else a / b


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fuse-run", required=True)
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--work", default="/tmp/fz-models")
    ap.add_argument("--models", default=",".join(models.DEFAULT))
    ap.add_argument("--dtypes", default=None,
                    help="f32,f16 (default: both on cuda, f32 on cpu)")
    ap.add_argument("--batches", default=None,
                    help="1 and/or tp, the throughput batch (default: both "
                         "on cuda, 1 on cpu)")
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--jobs", type=int, default=0,
                    help="concurrent fuse compiles (cuda; default: cores/2, "
                         "at most 8); the cpu runs one at a time")
    ap.add_argument("--peer-procs", type=int, default=3,
                    help="cuda: processes exporting models and running the "
                         "peers (their timings one at a time)")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--no-ieee", action="store_true",
                    help="cuda: no second run of the f32 models with "
                         "--precision ieee (exact f32 on CUDA cores)")
    ap.add_argument("--budget", type=float, default=540,
                    help="seconds; work not started by then is reported as "
                         "not run")
    ap.add_argument("--json", default=None)
    ap.add_argument("--alt", default=None, metavar="ARGS",
                    help="also run fuse with these extra fuse-run arguments "
                         "(e.g. '--gpu-arch sm_90a'), checked like the "
                         "default run: the 'fuse alt' column, an A/B of an "
                         "option on whole models in one run")
    ap.add_argument("--ort-node-path", default="")
    ap.add_argument("--tol-f32", type=float, default=1e-3,
                    help="f32 on the CPU, and the GPU's ieee run")
    ap.add_argument("--tol-tf32", type=float, default=1e-2,
                    help="f32 on the GPU at the default precision (tf32)")
    ap.add_argument("--tol-f16", type=float, default=2e-2)
    args = ap.parse_args()
    cuda = args.device == "cuda"
    dtypes = (args.dtypes or ("f32,f16" if cuda else "f32")).split(",")
    batches = (args.batches or ("1,tp" if cuda else "1")).split(",")
    names = args.models.split(",")
    for n in names:
        if n not in models.ALL:
            sys.exit(f"bench.py: unknown model {n!r}; known: "
                     f"{', '.join(models.ALL)}")
    if set(dtypes) - {"f32", "f16"} or set(batches) - {"1", "tp"}:
        sys.exit("bench.py: --dtypes takes f32,f16 and --batches 1,tp")
    deadline = T0 + args.budget
    os.makedirs(args.work, exist_ok=True)
    args.lock = os.path.join(args.work, "bench.lock")

    import torch
    dev = "cuda" if cuda and torch.cuda.is_available() else "cpu"
    if cuda and dev != "cuda":
        sys.exit("bench.py: --device cuda, but PyTorch sees no GPU")
    card = torch.cuda.get_device_name() if cuda else os.uname().nodename
    log(f"torch {torch.__version__} on {card}; fuse-run {args.fuse_run}")

    cfgs = [(n, dt, 1 if b == "1" else models.THROUGHPUT_BATCH[n])
            for dt in dtypes for b in reversed(batches) for n in names]
    # The longest compiles first, so that they overlap the most.
    heavy = {"resnet50": 0, "vit_b_16": 1, "convnext_tiny": 2}
    cfgs.sort(key=lambda c: (heavy.get(c[0], 9), c[1] != "f32", c[2] == 1))
    jobs = 1 if not cuda else (args.jobs or max(1, min(8, os.cpu_count() // 2)))
    pool = cf.ThreadPoolExecutor(max_workers=jobs)
    dirs, futs, rows = {}, {}, {}
    for cfg in cfgs:
        rows[cfg] = {"model": cfg[0], "device": args.device, "dtype": cfg[1],
                     "batch": cfg[2], "ok": False, "card": card}

    def exported(cfg, fut):
        try:
            dirs[cfg] = fut.result()
        except Exception as e:
            rows[cfg]["error"] = f"export failed: {type(e).__name__}: {e}"[:300]
            log(f"{cfg}: {rows[cfg]['error']}")
            return False
        log(f"exported {cfg}")
        variants = ["fuse"]
        if cuda and cfg[1] == "f32" and not args.no_ieee:
            variants.append("ieee")
        if args.alt:
            variants.append("alt")
        for v in variants:
            futs[cfg, v] = pool.submit(run_fuse, args, dirs[cfg], v, deadline)
            if not cuda:  # the CPU: nothing overlaps a compile or a timing
                futs[cfg, v].result()
        return True

    def peers_done(cfg, fut):
        try:
            rows[cfg].update(fut.result())
        except Exception as e:
            rows[cfg]["peers_error"] = f"{type(e).__name__}: {e}"[:200]
        log(f"peers {cfg} done")

    if cuda:
        # Export and the peers in worker processes (spawned: CUDA does not
        # survive a fork), --peer-procs at a time; each fuse compile starts
        # as soon as its model is exported. Timings take the lock.
        import multiprocessing as mp
        procs = cf.ProcessPoolExecutor(max_workers=args.peer_procs,
                                       mp_context=mp.get_context("spawn"))
        pending = {procs.submit(export_task, cfg, args.work, dev, deadline):
                   ("export", cfg) for cfg in cfgs}
        while pending:
            done, _ = cf.wait(pending, return_when=cf.FIRST_COMPLETED)
            for fut in done:
                kind, cfg = pending.pop(fut)
                if kind == "export":
                    if exported(cfg, fut):
                        pending[procs.submit(peers_task, args, cfg, dirs[cfg],
                                             deadline)] = ("peers", cfg)
                else:
                    peers_done(cfg, fut)
        procs.shutdown()
    else:
        for cfg in cfgs:
            fut = cf.Future()
            try:
                fut.set_result(export_task(cfg, args.work, dev, deadline))
            except Exception as e:
                fut.set_exception(e)
            if exported(cfg, fut):
                fut = cf.Future()
                fut.set_result(peers_task(args, cfg, dirs[cfg], deadline))
                peers_done(cfg, fut)
    for (cfg, v), fut in futs.items():
        r = fut.result()
        # f32 at the default precision is tf32 on the GPU (sm_80 and
        # newer), exact f32 on the CPU.
        tol = (args.tol_f16 if cfg[1] == "f16" else
               args.tol_tf32 if cuda and v == "fuse" else args.tol_f32)
        row = rows[cfg]
        err = r.get("error")
        if err is None and not r.get("rel_err", 1) <= tol:
            err = (f"output differs from the float64 reference: relative "
                   f"error {r.get('rel_err'):.3g} > {tol:g}")
        if v == "fuse":
            row["precision"] = ("f16" if cfg[1] == "f16" else
                                "tf32" if cuda else "ieee")
            row["ok"] = err is None
            row["max_abs_err"] = r.get("max_abs_err")
            row["rel_err"] = r.get("rel_err")
            row["fuse_compile_s"] = r.get("compile_s")
            row["fuse_kernels"] = r.get("kernels")
            row["fuse_ms"] = r.get("ms") if err is None else None
            if err:
                row["error"] = err
        elif v == "alt":
            row["fuse_alt_ms"] = r.get("ms") if err is None else None
            row["fuse_alt_rel_err"] = r.get("rel_err")
            row["fuse_alt_compile_s"] = r.get("compile_s")
            if err:
                row["fuse_alt_error"] = err
        else:
            row["fuse_ieee_ms"] = r.get("ms") if err is None else None
            row["fuse_ieee_rel_err"] = r.get("rel_err")
            if err:
                row["fuse_ieee_error"] = err
    pool.shutdown()

    out = [rows[c] for c in sorted(rows, key=lambda c: (
        models.ALL.index(c[0]), c[1], c[2]))]
    print()
    if cuda:
        print(f"Whole models on {card}: milliseconds per forward (median of "
              f"{args.reps}); ratios are fuse's time over the peer's")
        head = ("model", "dtype", "batch", "ok", "rel err", "fuse",
                "fuse ieee") + (("fuse alt", "alt/fuse") if args.alt else ()) + (
                "eager", "compile", "compile+graphs",
                "fuse/eager", "fuse/compile", "fuse/c+graphs", "kernels",
                "fuse compile s", "torch compile s")
    else:
        print(f"Whole models on the CPU ({card}, {args.threads} threads): "
              f"milliseconds per forward (median of {args.reps}); ratios "
              f"are fuse's time over the peer's")
        head = ("model", "dtype", "batch", "ok", "rel err", "fuse", "ORT",
                "torch", "fuse/ORT", "fuse/torch", "fuse compile s")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in out:
        f = r.get("fuse_ms")
        if cuda:
            cells = (r["model"], r["dtype"], r["batch"],
                     "yes" if r["ok"] else "NO", fmt(r.get("rel_err"), ".1e"),
                     fmt(f), fmt(r.get("fuse_ieee_ms"))) + ((
                     fmt(r.get("fuse_alt_ms")),
                     fmt(ratio(r.get("fuse_alt_ms"), f))) if args.alt else ()) + (
                     fmt(r.get("torch_eager_ms")),
                     fmt(r.get("torch_compile_ms")),
                     fmt(r.get("torch_compile_ro_ms")),
                     fmt(ratio(f, r.get("torch_eager_ms"))),
                     fmt(ratio(f, r.get("torch_compile_ms"))),
                     fmt(ratio(f, r.get("torch_compile_ro_ms"))),
                     fmt(r.get("fuse_kernels"), "d"),
                     fmt(r.get("fuse_compile_s"), ".1f"),
                     fmt(r.get("torch_compile_compile_s"), ".1f"))
        else:
            cells = (r["model"], r["dtype"], r["batch"],
                     "yes" if r["ok"] else "NO", fmt(r.get("rel_err"), ".1e"),
                     fmt(f), fmt(r.get("ort_ms")), fmt(r.get("torch_ms")),
                     fmt(ratio(f, r.get("ort_ms"))),
                     fmt(ratio(f, r.get("torch_ms"))),
                     fmt(r.get("fuse_compile_s"), ".1f"))
        print("| " + " | ".join(str(c) for c in cells) + " |")
    for r in out:
        for k in sorted(r):
            if k.endswith("error") and isinstance(r[k], str):
                print(f"{r['model']} {r['dtype']} b{r['batch']}: {k}: {r[k]}")
    if args.json:
        with open(args.json, "w") as f:
            for r in out:
                f.write(json.dumps(r) + "\n")
    ok = sum(r["ok"] for r in out)
    print(f"models: {ok} checked ok, {len(out) - ok} failed or not run "
          f"({time.monotonic() - T0:.0f} s)")
    return 0 if ok == len(out) else 1


if __name__ == "__main__":
    sys.exit(main())
