"""fuse.torch: PyTorch modules compiled with fuse.

    import torch, fuse.torch
    model = fuse.torch.compile(net, (torch.randn(8, 32),), device="cpu")
    y = model(x)                                  # torch tensors in and out

fuse.torch.compile exports the module with torch.onnx.export (the
TorchScript exporter: PyTorch 1.13, Debian's python3-torch, and PyTorch 2
with dynamo=False; its dynamo exporter where that fails), compiles the ONNX model with fuse.compile and
returns a callable on torch tensors: inputs are read where they are
(CPU tensors without a copy; CUDA tensors on the GPU for a model
compiled for cuda), outputs are new torch tensors on the inputs'
device, in the structure the module returns.

On PyTorch 2, importing this module also registers fuse as a backend of
torch.compile (the package's metadata does it too, so the import is
optional):

    compiled = torch.compile(net, backend="fuse")
    compiled = torch.compile(net, backend="fuse",
                             options={"device": "cuda", "precision": "tf32"})
"""

import io as _io
import inspect as _inspect

import torch as _torch

import fuse as _fuse

__all__ = ["compile", "export", "TorchModel"]

_DTYPES = {
    "float16": _torch.float16,
    "bfloat16": _torch.bfloat16,
    "float32": _torch.float32,
    "float64": _torch.float64,
    "bool": _torch.bool,
    "int8": _torch.int8,
    "int16": _torch.int16,
    "int32": _torch.int32,
    "int64": _torch.int64,
}

# ONNX opset of the export: 17 has LayerNormalization; PyTorch 1.13
# exports up to 17.
DEFAULT_OPSET = 17


def export(module, example_inputs, opset=None):
    """The ONNX bytes of module traced on example_inputs (a tuple of
    tensors), by torch.onnx.export's TorchScript exporter; where that
    fails (a PyTorch without it), by its dynamo exporter (onnxscript)."""
    buf = _io.BytesIO()
    kwargs = {"opset_version": opset or DEFAULT_OPSET,
              "do_constant_folding": True}
    params = _inspect.signature(_torch.onnx.export).parameters
    if "dynamo" in params:
        kwargs["dynamo"] = False  # PyTorch 2: the TorchScript exporter
    try:
        with _torch.no_grad():
            _torch.onnx.export(module, tuple(example_inputs), buf, **kwargs)
        return buf.getvalue()
    except Exception as first:
        if "dynamo" not in params:
            raise
        import os
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "model.onnx")
            try:
                with _torch.no_grad():
                    _torch.onnx.export(module, tuple(example_inputs), path,
                                       dynamo=True, external_data=False)
            except Exception:
                raise first
            with open(path, "rb") as f:
                return f.read()


def _flatten(value):
    """(tensors, rebuild): the tensors of a module's result and a function
    that puts new ones back in the same structure."""
    if isinstance(value, _torch.Tensor):
        return [value], lambda leaves: leaves[0]
    if isinstance(value, (tuple, list)):
        parts = [_flatten(v) for v in value]
        counts = [len(p[0]) for p in parts]
        kind = type(value)

        def rebuild(leaves):
            out, at = [], 0
            for (_, rb), n in zip(parts, counts):
                out.append(rb(leaves[at:at + n]))
                at += n
            return kind(out) if kind in (tuple, list) else kind(*out)
        return [t for p in parts for t in p[0]], rebuild
    if isinstance(value, dict):
        keys = list(value)
        parts = [_flatten(value[k]) for k in keys]
        counts = [len(p[0]) for p in parts]

        def rebuild(leaves):
            out, at = {}, 0
            for k, (_, rb), n in zip(keys, parts, counts):
                out[k] = rb(leaves[at:at + n])
                at += n
            return out
        return [t for p in parts for t in p[0]], rebuild
    raise _fuse.Error("fuse.torch: the module returns a %s; fuse compiles "
                      "modules returning tensors (in tuples, lists or dicts)"
                      % type(value).__name__)


class TorchModel:
    """A PyTorch module compiled with fuse: call it with torch tensors.

    .compiled is the fuse.CompiledModel (its fusion_report(), remarks,
    device, ...); .onnx the exported model's bytes.
    """

    def __init__(self, compiled, rebuild, onnx):
        self.compiled = compiled
        self.onnx = onnx
        self._rebuild = rebuild
        self._out = [(_DTYPES[d], s) for d, s in compiled.outputs]
        # numpy has no bfloat16 torch.from_numpy takes: those outputs are
        # torch tensors given as out=.
        self._bf16 = any(d == _torch.bfloat16 for d, _ in self._out)

    @property
    def device(self):
        return self.compiled.device

    def fusion_report(self):
        return self.compiled.fusion_report()

    @property
    def remarks(self):
        return self.compiled.remarks

    def __call__(self, *inputs):
        args = [t.detach() if isinstance(t, _torch.Tensor) and t.requires_grad
                else t for t in inputs]
        dev = None
        if self.compiled.device == "cuda":
            for t in args:
                if isinstance(t, _torch.Tensor) and t.is_cuda:
                    dev = t.device
                    break
        if dev is None and not self._bf16:
            # Host outputs: numpy arrays made by fuse, shared by torch.
            outs = self.compiled(*args)
            if len(self._out) == 1:
                outs = (outs,)
            return self._rebuild([_torch.from_numpy(a) for a in outs])
        outs = [_torch.empty(shape, dtype=dtype, device=dev or "cpu")
                for dtype, shape in self._out]
        self.compiled(*args, out=outs)
        return self._rebuild(outs)

    def __repr__(self):
        return "<fuse.torch.TorchModel %r>" % (self.compiled,)


def _tolerance(dtype, precision, device):
    """(rtol, atol) of check=True: the stated tolerances of docs/codegen.md
    (16-bit precision policies, tf32 on the GPU) and of f32 reductions."""
    if dtype in (_torch.float16, _torch.bfloat16) or precision in ("bf16",
                                                                   "fp16"):
        return 2e-2, 2e-2
    if device == "cuda" and precision in ("default", "tf32"):
        return 5e-3, 5e-3
    return 1e-4, 1e-5


def compile(module, example_inputs, device="auto", *, opset=None,
            check=False, **options):  # noqa: A001  (fuse.torch.compile)
    """Compiles a torch.nn.Module (or any traceable callable) for fuse.

    example_inputs: the tensors (a tuple, or one tensor) it is traced on;
    the compiled model takes tensors of the same shapes and dtypes.
    device and options are fuse.compile's. check=True runs the module and
    the compiled model on the example inputs and raises fuse.Error when
    they differ beyond the tolerance of the dtype and precision policy.
    """
    if isinstance(example_inputs, _torch.Tensor):
        example_inputs = (example_inputs,)
    example_inputs = tuple(example_inputs)
    training = getattr(module, "training", False)
    if training:
        module.eval()
    try:
        onnx = export(module, example_inputs, opset)
        with _torch.no_grad():
            reference = module(*example_inputs)
    finally:
        if training:
            module.train()
    leaves, rebuild = _flatten(reference)
    options.setdefault("name", type(module).__name__ + ".onnx")
    compiled = _fuse.compile(onnx, device=device, **options)
    if len(compiled.outputs) != len(leaves):
        raise _fuse.Error("fuse.torch: the ONNX export has %d outputs, the "
                          "module returns %d tensors"
                          % (len(compiled.outputs), len(leaves)))
    model = TorchModel(compiled, rebuild, onnx)
    if check:
        got, _ = _flatten(model(*example_inputs))
        for i, (g, want) in enumerate(zip(got, leaves)):
            rtol, atol = _tolerance(want.dtype,
                                    options.get("precision", "default"),
                                    compiled.device)
            if not _torch.allclose(g.cpu().double(), want.cpu().double(),
                                   rtol=rtol, atol=atol, equal_nan=True):
                err = (g.cpu().double() - want.cpu().double()).abs().max()
                raise _fuse.Error(
                    "fuse.torch: output %d differs from PyTorch's by up to "
                    "%.3g (rtol %g, atol %g)" % (i, float(err), rtol, atol))
    return model


def _register_backend():
    """torch.compile(model, backend="fuse") on PyTorch 2."""
    try:
        from torch._dynamo import list_backends, register_backend
    except ImportError:  # PyTorch 1.x: no torch.compile
        return
    from fuse import _dynamo

    try:
        known = list_backends(exclude_tags=())
    except TypeError:
        known = list_backends()
    if "fuse" not in known:
        try:
            register_backend(compiler_fn=_dynamo.backend, name="fuse")
        except AssertionError:  # registered meanwhile (the entry point)
            pass


_register_backend()
