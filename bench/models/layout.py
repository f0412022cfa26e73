"""bench/models/layout.py - convert-layout (channels-last) on whole models:
kernels and transposes with --layout=nchw and --layout=nhwc, every output
checked against PyTorch.

    /usr/bin/python3 bench/models/layout.py [--build build] \
        [--models resnet18,resnet50,mobilenet_v2,convnext_tiny] \
        [--work /tmp/fuse-layout] [--threads 2] [--no-run]

For each model (bench/models/models.py, seeded, f32, batch 1; exported to
ONNX and its float64 reference computed as bench.py does) and each
layout:
  - `fuse-opt model.onnx --graph-optimize --layout=L --fusion-report`: the
    kernels after fusion for the GPU target (the grouping --device cuda
    gets) and the graph.transpose ops left in the fused graph (the
    model's own included: ConvNeXt permutes around its LayerNorms);
  - `fuse-run model.onnx --device cpu --layout=L --fusion-report`: the
    CPU target's kernels, and the output's relative L2 error against the
    reference (at most 1e-3, as bench.py's f32 CPU check).
Prints a Markdown table (the one in docs/benchmarks.md, "Channels-last");
exits 1 when an output misses. Not part of the test command: the CPU
runs of the NHWC models take a while while the back ends run NHWC
convolutions as generic loops.
"""
import argparse
import os
import re
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402

KERNELS = re.compile(r"kernels: (\d+) before, (\d+) after")


def kernels_after(text):
    """The 'after' count of the last fusion report in text (the model's
    one function)."""
    m = KERNELS.findall(text)
    return int(m[-1][1]) if m else None


def main():
    root = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(root, "build"))
    ap.add_argument("--models",
                    default="resnet18,resnet50,mobilenet_v2,convnext_tiny")
    ap.add_argument("--work", default="/tmp/fuse-layout")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-run", action="store_true",
                    help="counts only (no CPU run, no check)")
    args = ap.parse_args()
    opt = os.path.join(args.build, "bin", "fuse-opt")
    run = os.path.join(args.build, "bin", "fuse-run")
    rows, bad = [], False
    for name in args.models.split(","):
        d = os.path.join(args.work, f"{name}-f32-b1")
        if not os.path.exists(os.path.join(d, "model.onnx")):
            d = bench.export((name, "f32", 1), args.work, "cpu")
        row = {"model": name}
        for lay in ("nchw", "nhwc"):
            fused = os.path.join(d, f"fused-{lay}.fuse")
            p = subprocess.run([opt, os.path.join(d, "model.onnx"),
                                "--graph-optimize", f"--layout={lay}",
                                "--fusion-report", "-o", fused],
                               capture_output=True, text=True)
            if p.returncode:
                sys.exit(f"fuse-opt failed on {name}: {p.stderr[-500:]}")
            row[f"gpu_{lay}"] = kernels_after(p.stderr)
            with open(fused) as f:
                row[f"tr_{lay}"] = f.read().count("graph.transpose ")
            if args.no_run:
                continue
            out = os.path.join(d, f"out-{lay}")
            os.makedirs(out, exist_ok=True)
            p = subprocess.run([run, os.path.join(d, "model.onnx"),
                                "--device", "cpu", f"--layout={lay}",
                                "--threads", str(args.threads), "--input",
                                os.path.join(d, "input.npy"), "--output-dir",
                                out, "--print-limit", "0", "--fusion-report"],
                               capture_output=True, text=True)
            if p.returncode:
                sys.exit(f"fuse-run failed on {name}: {p.stderr[-500:]}")
            row[f"cpu_{lay}"] = kernels_after(p.stdout + p.stderr)
            got = np.load(os.path.join(out, "output_0.npy"))
            ref = np.load(os.path.join(d, "ref.npy"))
            err = float(np.linalg.norm(got - ref) / np.linalg.norm(ref))
            row[f"err_{lay}"] = err
            bad = bad or not err <= 1e-3
        rows.append(row)
        print(row, file=sys.stderr, flush=True)

    def cell(r, k, fmt="{}"):
        return fmt.format(r[k]) if r.get(k) is not None else "-"

    print("| model | GPU kernels nchw -> nhwc | CPU kernels nchw -> nhwc "
          "| transposes nchw -> nhwc | rel err nchw / nhwc |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['model']} | {cell(r, 'gpu_nchw')} -> "
              f"{cell(r, 'gpu_nhwc')} | {cell(r, 'cpu_nchw')} -> "
              f"{cell(r, 'cpu_nhwc')} | {cell(r, 'tr_nchw')} -> "
              f"{cell(r, 'tr_nhwc')} | {cell(r, 'err_nchw', '{:.1e}')} / "
              f"{cell(r, 'err_nhwc', '{:.1e}')} |")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
