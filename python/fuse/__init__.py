"""fuse: operator fusion for deep-learning graphs, from Python.

The IR, the passes and compiled models of the fuse C library
(docs/python.md is the tutorial and the reference)::

    import numpy as np, fuse
    m = fuse.compile("examples/models/mlp/model.onnx", device="cpu")
    y = m(np.ones((2, 32), np.float32))
    print(m.fusion_report())

    module = fuse.Module.parse(text)            # .fuse text (MLIR syntax)
    fuse.PassManager.parse("builtin.module(canonicalize,cse)").run(module)
    print(module)

Errors of the library (parse, verify, import, compile, run) raise
fuse.Error, which carries every error diagnostic with its location;
nothing is printed behind your back. ``fuse.torch`` compiles PyTorch
modules (through ONNX) and, on PyTorch 2, is the backend of
``torch.compile(model, backend="fuse")``.
"""

import difflib as _difflib

from . import _fuse
from ._fuse import (  # noqa: F401  (the public types)
    Attribute,
    Block,
    CompiledModel,
    Context,
    DeviceArray,
    Diagnostic,
    Location,
    Module,
    Operation,
    PassManager,
    Region,
    Type,
    Value,
)

__version__ = _fuse.version()

__all__ = [
    "Attribute", "Block", "CompiledModel", "Context", "DeviceArray",
    "Diagnostic", "Error", "Location", "Module", "Operation", "PassManager",
    "Region", "Type", "Value", "Warning", "compile", "cuda_available",
    "cuda_status", "interpret", "passes", "pipelines",
]


class Error(Exception):
    """An error reported by fuse.

    ``str(e)`` renders every error as fuse's tools print it
    (``file:line:col: error: message``, the source line and a caret);
    ``e.diagnostics`` holds them as fuse.Diagnostic objects (severity,
    message, location, notes). ``e.message`` and ``e.location`` are the
    first error's (for errors of the package itself, with no diagnostic:
    the message, and None).
    """

    def __init__(self, message, diagnostics=()):
        super().__init__(message)
        self.diagnostics = list(diagnostics)

    @property
    def message(self):
        return self.diagnostics[0].message if self.diagnostics else str(self)

    @property
    def location(self):
        return self.diagnostics[0].location if self.diagnostics else None


class Warning(UserWarning):  # noqa: A001  (fuse.Warning)
    """A warning diagnostic of fuse (issued with warnings.warn)."""


def _as_array(obj):
    """The slow path of array arguments: what numpy makes of obj
    (lists, scalars), and ml_dtypes' bfloat16 as its uint16 bits."""
    import numpy as np

    dt = getattr(obj, "dtype", None)
    if getattr(dt, "name", None) == "bfloat16":
        return np.ascontiguousarray(obj).view(np.uint16)
    return np.ascontiguousarray(obj)


_fuse._register(Error, Warning, _as_array)

_PRECISIONS = ("default", "ieee", "tf32", "bf16", "fp16")
_LAYOUTS = ("auto", "nchw", "nhwc")
_GPU_ARCHS = ("sm_80", "sm_86", "sm_87", "sm_89", "sm_90", "sm_90a")

# name: (check, what it must be). The options of fuse-run's compile path
# (tools/fuse_run.c, docs/python.md "fuse.compile").
_COMPILE_OPTIONS = {
    "context": (lambda v: v is None or isinstance(v, Context),
                "a fuse.Context"),
    "entry": (lambda v: v is None or isinstance(v, str),
              "a function name"),
    "precision": (lambda v: v in _PRECISIONS, " or ".join(_PRECISIONS)),
    "fuse": (lambda v: isinstance(v, bool), "True or False"),
    "threads": (lambda v: isinstance(v, int) and not isinstance(v, bool)
                and 0 <= v <= 4096, "an int in [0, 4096] (0: one per core)"),
    "fast_math": (lambda v: isinstance(v, bool), "True or False"),
    "exact_math": (lambda v: isinstance(v, bool), "True or False"),
    "tile": (lambda v: isinstance(v, bool), "True or False"),
    "stage_rows": (lambda v: isinstance(v, bool), "True or False"),
    "vector_width": (lambda v: v in (0, 128, 256, 512),
                     "0 (the default), 128, 256 or 512"),
    "fusion_mode": (lambda v: v in ("cost", "rules"), "'cost' or 'rules'"),
    "remarks": (lambda v: isinstance(v, bool), "True or False"),
    "input_shapes": (lambda v: v is None or isinstance(v, (dict, list, tuple)),
                     "{input name: shape} or [shape, ...]"),
    "gpu_arch": (lambda v: v is None or v in _GPU_ARCHS,
                 "None or one of " + ", ".join(_GPU_ARCHS)),
    "codegen_threads": (lambda v: isinstance(v, int)
                        and not isinstance(v, bool) and 0 <= v <= 256,
                        "an int in [0, 256] (0: one per core)"),
    "name": (lambda v: isinstance(v, str), "a str"),
    "layout": (lambda v: v in _LAYOUTS, " or ".join(_LAYOUTS)),
    "cache": (lambda v: isinstance(v, bool), "True or False"),
}


def compile(model, device="auto", **options):  # noqa: A001  (fuse.compile)
    """Compiles a model; returns a fuse.CompiledModel.

    model: an ONNX file path (a .fuse/.mlir path is parsed), the bytes
    of an ONNX model, or a fuse.Module (compiled from a clone).
    device: "auto" (the GPU when a CUDA driver and device are present,
    else the CPU; see .device), "cpu" or "cuda" (an error without a GPU).

    Options (keywords): precision ("default", "ieee", "tf32", "bf16",
    "fp16": f32 matmuls and convolutions), fuse (False: every op its own
    kernel), fusion_mode ("cost" or "rules"), remarks (collect one fusion
    remark per op, default True), entry (the function, default @main or
    the only one), input_shapes ({name: shape} or [shape, ...] for ONNX
    inputs with symbolic dims), context (a fuse.Context for the model's
    diagnostics), layout ("nchw", "nhwc" or "auto": channels-last
    convolution regions where they hold most of the work; default auto
    on cuda, nchw on the CPU, as fuse-run); CPU: threads (0: one per
    core), fast_math, exact_math, tile, stage_rows, vector_width; CUDA:
    gpu_arch; both: codegen_threads (LLVM's threads, 0: one per core);
    cache (False: neither read nor write the
    kernel cache, $FZ_CACHE_DIR or ~/.cache/fuse; default True).

    The GIL is released while it imports and compiles.
    """
    for key, value in options.items():
        if key not in _COMPILE_OPTIONS:
            near = _difflib.get_close_matches(
                key, ["device"] + list(_COMPILE_OPTIONS), 1)
            raise TypeError("fuse.compile() got an unknown option %r%s"
                            % (key, "; did you mean %r?" % near[0]
                               if near else ""))
        check, what = _COMPILE_OPTIONS[key]
        if not check(value):
            raise ValueError("fuse.compile(): %s must be %s, not %r"
                             % (key, what, value))
    if device not in ("auto", "cpu", "cuda"):
        raise ValueError("fuse.compile(): device must be 'auto', 'cpu' or "
                         "'cuda', not %r" % (device,))
    return _fuse.compile(model, device=device, **options)


def interpret(module, *inputs, entry=None):
    """Runs a function of a fuse.Module on fuse's reference interpreter.

    Inputs are arrays (numpy, or anything with __dlpack__ on the CPU),
    one per argument, of the argument's element type and shape. Returns
    the output array, or a tuple of them when the function has several.
    """
    outs = _fuse.interpret(module, inputs, entry)
    return outs[0] if len(outs) == 1 else outs


def passes(context=None):
    """Every registered pass: dicts of name, summary, anchor, options."""
    return _fuse.passes(context)


def pipelines(context=None):
    """Every named pipeline: dicts of name, summary, pipeline."""
    return _fuse.pipelines(context)


def cuda_status():
    """(status, why): "ready", "no-device" or "no-driver", and the reason."""
    return _fuse.cuda_status()


def cuda_available():
    """True when a CUDA driver and a device are present."""
    return _fuse.cuda_status()[0] == "ready"
