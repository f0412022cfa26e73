#!/usr/bin/env python3
"""tests/gpu/python_gpu.py - the fuse Python package on a GPU machine
(run by tests/gpu/python.sh, which sets PYTHONPATH to the carried
package; PyTorch 2 with CUDA there).

Each check prints `PASS name: detail` or `FAIL name: why`; the last line
is `N passed, N failed`. Results are checked against fuse's reference
interpreter, the outputs PyTorch saved with the example models, and
PyTorch itself, with the tolerance of the precision policy (default:
tf32 tensor cores for f32 matmuls, rtol/atol 5e-3; ieee: 1e-4/1e-5).
Then it times a call from Python against the C runtime and against
PyTorch (medians).
"""
import os
import statistics
import subprocess
import sys
import time
import traceback
import warnings

import numpy as np

import fuse

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
MODELS = os.path.join(ROOT, "examples", "models")
results = []


def check(name):
    def wrap(fn):
        try:
            detail = fn()
            results.append(True)
            print("PASS %s%s" % (name, ": " + detail if detail else ""),
                  flush=True)
        except Exception:
            results.append(False)
            print("FAIL %s:\n%s" % (name, traceback.format_exc()), flush=True)
        return fn
    return wrap


def load(model):
    d = os.path.join(MODELS, model, "test_data_set_0")
    return (os.path.join(MODELS, model, "model.onnx"),
            np.load(os.path.join(d, "input_0.npy")),
            np.load(os.path.join(d, "output_0.npy")))


def close(got, want, rtol, atol):
    np.testing.assert_allclose(np.asarray(got, np.float64),
                               np.asarray(want, np.float64), rtol=rtol,
                               atol=atol)
    return "max |diff| %.2e" % float(np.max(np.abs(np.asarray(got, np.float64)
                                                  - want)))


@check("cuda is ready")
def _():
    status, why = fuse.cuda_status()
    assert status == "ready", (status, why)
    m = fuse.compile(load("mlp")[0], device="auto")
    assert m.device == "cuda", m.device
    return m.device_name


for model in ("mlp", "mlp_opset17", "cnn"):
    for precision, tol in (("default", (5e-3, 5e-3)), ("ieee", (1e-4, 1e-5))):
        @check("%s on cuda, precision=%s, numpy in and out" % (model, precision))
        def _(model=model, precision=precision, tol=tol):
            path, x, want = load(model)
            m = fuse.compile(path, device="cuda", precision=precision)
            y = m(x)
            assert isinstance(y, np.ndarray)
            close(y, fuse.interpret(m.module, x), *tol)
            return "%s; %d kernels; vs PyTorch: %s" % (
                m.fusion_report().splitlines()[2].strip(), len(m.kernels()),
                close(y, want, *tol))

import torch  # noqa: E402

import fuse.torch as fuse_torch  # noqa: E402

torch.manual_seed(0)


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(256, 1024)
        self.fc2 = torch.nn.Linear(1024, 256)
        self.norm = torch.nn.LayerNorm(256)

    def forward(self, x):
        return self.norm(x + self.fc2(torch.nn.functional.gelu(self.fc1(x))))


net = MLP().cuda().eval()
xc = torch.randn(64, 256, device="cuda")


@check("CUDA tensors in, DeviceArray out (torch.from_dlpack), out= tensors")
def _():
    path, x, want = load("mlp")
    m = fuse.compile(path, device="cuda", precision="ieee")
    xt = torch.from_numpy(x).cuda()
    y = m(xt)
    assert isinstance(y, fuse.DeviceArray), type(y)
    yt = torch.from_dlpack(y)
    assert yt.is_cuda and yt.data_ptr() == y.data_ptr
    out = torch.empty(4, 32, device="cuda")
    r = m(xt, out=[out])
    assert r is out
    torch.cuda.synchronize()
    return "%s; out=: %s" % (close(yt.cpu().numpy(), want, 1e-4, 1e-5),
                             close(out.cpu().numpy(), want, 1e-4, 1e-5))


@check("fuse.torch.compile on cuda (torch.onnx.export, PyTorch %s)"
       % torch.__version__)
def _():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = fuse_torch.compile(net, (xc,), device="cuda", check=True)
    y = model(xc)
    assert y.is_cuda
    with torch.no_grad():
        want = net(xc)
    return close(y.cpu().numpy(), want.cpu().numpy(), 5e-3, 5e-3)


@check("fuse.torch.compile on cpu, CPU tensors")
def _():
    cpu = MLP().eval()
    x = torch.randn(8, 256)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = fuse_torch.compile(cpu, (x,), device="cpu", check=True)
    with torch.no_grad():
        return close(model(x).numpy(), cpu(x).numpy(), 1e-4, 1e-5)


@check("torch.compile(backend='fuse') on cuda")
def _():
    compiled = torch.compile(net, backend="fuse", dynamic=False)
    with torch.no_grad():
        y = compiled(xc)
        want = net(xc)
    assert y.is_cuda
    return close(y.cpu().numpy(), want.cpu().numpy(), 5e-3, 5e-3)


@check("torch.compile(backend='fuse') through the entry point (no import)")
def _():
    code = ("import torch; net = torch.nn.Sequential(torch.nn.Linear(16, 8),"
            " torch.nn.ReLU()).eval(); x = torch.randn(4, 16);\n"
            "import sys; assert 'fuse' not in sys.modules\n"
            "with torch.no_grad():\n"
            "    y = torch.compile(net, backend='fuse', dynamic=False)(x)\n"
            "    torch.testing.assert_close(y, net(x), rtol=1e-4, atol=1e-5)\n"
            "print('ok', 'fuse.torch' in sys.modules)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.startswith("ok"), r.stdout + r.stderr
    return r.stdout.strip()


@check("torch.compile(backend='fuse', options={'fallback': True}) on a "
       "graph fuse cannot compile")
def _():
    def f(x):
        return torch.linalg.det(x) + 1
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        x = torch.randn(3, 3)
        y = torch.compile(f, backend="fuse", dynamic=False,
                          options={"fallback": True})(x)
    assert any("runs in PyTorch" in str(x.message) for x in w), \
        [str(x.message) for x in w]
    torch.testing.assert_close(y, f(x))
    # det of a 3x3 is a 0-d tensor: shape () is one argument, not zero.
    return "shape %s, equal to eager (warned)" % (tuple(y.shape),)


def median_call(fn, n=200, reps=5):
    fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        ts.append((time.perf_counter() - t0) / n)
    return statistics.median(ts)


@check("timing: a call from Python (cuda and cpu), torch eager beside it")
def _():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = fuse_torch.compile(net, (xc,), device="cuda")
    out = [torch.empty(64, 256, device="cuda")]
    c = model.compiled
    t_fuse = median_call(lambda: c(xc, out=out))
    with torch.no_grad():
        t_torch = median_call(lambda: (net(xc), torch.cuda.synchronize()))
    cpu = fuse.compile(load("mlp")[0], device="cpu", threads=1)
    x = load("mlp")[1]
    t_py = median_call(lambda: cpu(x), n=20000)
    t_c = statistics.median(cpu._bench(x, iterations=20000) for _ in range(5))
    return ("cuda MLP 64x256x1024 %.1f us per call (synchronized; torch "
            "eager %.1f us); cpu examples/models/mlp: python %.2f us, C "
            "runtime %.2f us, overhead %.2f us"
            % (t_fuse * 1e6, t_torch * 1e6, t_py * 1e6, t_c * 1e6,
               (t_py - t_c) * 1e6))


print("%d passed, %d failed" % (sum(results), len(results) - sum(results)))
sys.exit(0 if all(results) else 1)
