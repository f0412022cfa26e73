#!/usr/bin/python3
"""Models as people export them, checked end to end on the CPU.

    /usr/bin/python3 bench/models/check_exports.py [--fuse-run PATH]
        [--models a,b] [--work DIR] [--ort-node-path DIR] [--device cpu]

Exports each model below with torch.onnx.export (seeded weights, as
models.py builds them), runs the .onnx with `fuse-run --device cpu` on a
fixed input, and compares the output with PyTorch in float64 and, where
it can be run, ONNX Runtime (the onnxruntime Python package, or
onnxruntime-node through ort_node.js: `npm install --prefix
bench/models/.ort onnxruntime-node --ignore-scripts`, as run.sh does).
A model passes when the relative L2 error ||fuse - ref|| / ||ref|| is at
most 1e-4 against PyTorch (and ONNX Runtime agrees with PyTorch as
well). Dynamic-batch exports (dynamic_axes) are run at two batch sizes
from the one .onnx file: fuse-run takes the batch from its input.

Not part of the test command (it needs PyTorch and takes minutes per
convnet on a loaded 2-core machine); docs/onnx.md lists the results.
Exits 1 when a model fails.

Models (NAME: what, opset):
    densenet121      torchvision DenseNet-121 (Concat of many inputs), 13
    densenet121_dyn  the same with a dynamic batch, at batch 1 and 2, 17
    swin_t           torchvision Swin-T (ScatterND building the mask), 17
    resnet18_dyn     torchvision ResNet-18, dynamic batch, batch 1 and 3, 17
    lstm             2-layer bidirectional nn.LSTM, batch first, with a
                     dynamic batch (Shape -> initial states), 17
    gru              nn.GRU, sequence first, 13
    rnn              nn.RNN with ReLU, 2 layers, 17
    topk             Linear -> softmax -> torch.topk(5) (values), 17
"""
import argparse
import json
import os
import subprocess
import sys
import time
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def seeded(model):
    import torch
    import models
    models._randomize(model, torch.Generator().manual_seed(1))
    return model.eval()


def vision(name):
    import torch
    import torchvision
    torch.manual_seed(0)
    return seeded(getattr(torchvision.models, name)(weights=None))


class LstmNet:
    @staticmethod
    def build():
        import torch
        from torch import nn

        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.rnn = nn.LSTM(32, 48, num_layers=2, bidirectional=True,
                                   batch_first=True)
                self.head = nn.Linear(96, 10)

            def forward(self, x):
                y, _ = self.rnn(x)
                return self.head(y[:, -1])
        torch.manual_seed(0)
        return seeded(M())


def recurrent(kind):
    import torch
    from torch import nn

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            if kind == "gru":
                self.rnn = nn.GRU(16, 24)
            else:
                self.rnn = nn.RNN(16, 24, num_layers=2, nonlinearity="relu")

        def forward(self, x):
            y, h = self.rnn(x)
            return y + h[-1]
    torch.manual_seed(0)
    return seeded(M())


def topk_net():
    import torch
    from torch import nn

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(64, 100)

        def forward(self, x):
            return torch.topk(self.fc(x).softmax(-1), 5).values
    torch.manual_seed(0)
    return seeded(M())


# name: (builder, input shape, opset, batches run (None: static), batch axis)
MODELS = {
    "densenet121": (lambda: vision("densenet121"), (1, 3, 224, 224), 13, None),
    "densenet121_dyn": (lambda: vision("densenet121"), (1, 3, 224, 224), 17,
                        (1, 2)),
    "swin_t": (lambda: vision("swin_t"), (1, 3, 224, 224), 17, None),
    "resnet18_dyn": (lambda: vision("resnet18"), (1, 3, 224, 224), 17, (1, 3)),
    "lstm": (LstmNet.build, (2, 20, 32), 17, (2, 5)),
    "gru": (lambda: recurrent("gru"), (12, 3, 16), 13, None),
    "rnn": (lambda: recurrent("rnn"), (9, 4, 16), 17, None),
    "topk": (topk_net, (3, 64), 17, None),
}


def rel_err(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.shape != b.shape:
        return float("inf")
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def export(name, work):
    import inspect
    import torch
    build, shape, opset, batches = MODELS[name]
    model = build()
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(2))
    path = os.path.join(work, f"{name}.onnx")
    kw = {}
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        kw["dynamo"] = False
    if batches:
        kw["dynamic_axes"] = {"input": {0: "batch"}, "output": {0: "batch"}}
    with torch.enable_grad():
        torch.onnx.export(model, (x,), path, opset_version=opset,
                          input_names=["input"], output_names=["output"],
                          do_constant_folding=True, **kw)
    return model, path


def ort_run(args, model_path, x_path, out_path):
    try:
        import onnxruntime as ort
        s = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
        x = np.load(x_path)
        return s.run(None, {s.get_inputs()[0].name: x})[0]
    except ImportError:
        pass
    if not args.ort_node_path:
        return None
    env = dict(os.environ, NODE_PATH=args.ort_node_path)
    r = subprocess.run(["node", os.path.join(HERE, "ort_node.js"), model_path,
                        x_path, out_path, "1", "1"], env=env,
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(r.stderr.strip()[-300:])
    return np.load(out_path)


def check(args, name, work):
    import copy
    import torch
    build, shape, opset, batches = MODELS[name]
    model, path = export(name, work)
    rows = []
    for b in batches or (shape[0],):
        bshape = (b,) + tuple(shape[1:])
        x = torch.randn(*bshape, generator=torch.Generator().manual_seed(3))
        d = os.path.join(work, f"{name}-b{b}")
        os.makedirs(d, exist_ok=True)
        xp = os.path.join(d, "input.npy")
        np.save(xp, x.numpy())
        with torch.no_grad():
            ref = copy.deepcopy(model).double()(x.double()).numpy()
        row = {"model": name, "opset": opset,
               "input": "x".join(map(str, bshape)), "dynamic": bool(batches)}
        t0 = time.monotonic()
        r = subprocess.run([args.fuse_run, path, "--device", args.device,
                            "--input", xp, "--output-dir", d],
                           capture_output=True, text=True)
        row["fuse_s"] = round(time.monotonic() - t0, 1)
        if r.returncode != 0:
            row["error"] = (r.stderr.strip() or r.stdout.strip())[-400:]
        else:
            row["fuse_vs_torch"] = rel_err(np.load(os.path.join(
                d, "output_0.npy")), ref)
        try:
            o = ort_run(args, path, xp, os.path.join(d, "ort.npy"))
            if o is not None:
                row["ort_vs_torch"] = rel_err(o, ref)
        except Exception as e:
            row["ort_error"] = f"{type(e).__name__}: {e}"[:200]
        row["ok"] = "error" not in row and row["fuse_vs_torch"] <= 1e-4
        rows.append(row)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fuse-run", default=os.path.join(
        HERE, "..", "..", "build", "bin", "fuse-run"))
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--work", default="/tmp/fuse-check-exports")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--ort-node-path", default=None)
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    if args.ort_node_path is None:
        p = os.path.join(HERE, ".ort", "node_modules")
        args.ort_node_path = p if os.path.isdir(p) else None
    os.makedirs(args.work, exist_ok=True)
    ok = True
    print(f"{'model':16} {'opset':>5} {'input':>12} {'fuse vs torch':>14} "
          f"{'ORT vs torch':>13} {'fuse-run s':>10}  result")
    for name in args.models.split(","):
        try:
            rows = check(args, name, args.work)
        except Exception as e:
            rows = [{"model": name, "error": f"export: {type(e).__name__}: {e}"
                     [:300], "ok": False}]
        for row in rows:
            ok = ok and row["ok"]
            fe = row.get("fuse_vs_torch")
            oe = row.get("ort_vs_torch")
            print(f"{row['model']:16} {row.get('opset', ''):>5} "
                  f"{row.get('input', ''):>12} "
                  f"{'-' if fe is None else f'{fe:.2e}':>14} "
                  f"{'-' if oe is None else f'{oe:.2e}':>13} "
                  f"{row.get('fuse_s', ''):>10}  "
                  f"{'ok' if row['ok'] else 'FAIL ' + row.get('error', '')}")
            sys.stdout.flush()
            with open(os.path.join(args.work, "results.jsonl"), "a") as f:
                f.write(json.dumps(row) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
