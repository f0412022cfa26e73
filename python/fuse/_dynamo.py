"""The torch.compile backend "fuse" (PyTorch 2).

    compiled = torch.compile(model, backend="fuse")
    compiled = torch.compile(model, backend="fuse",
                             options={"device": "cuda", "fallback": True})

TorchDynamo hands each captured graph (a torch.fx.GraphModule) and
example inputs to `backend`, which exports the graph to ONNX with
torch.onnx.export (fuse.torch.export) and compiles it with fuse.compile;
the callable it returns runs the graph with fuse on torch tensors.
options: fuse.compile's (device, precision, ...; device defaults to the
example inputs' device) and fallback (default False): True runs a graph
fuse cannot compile with PyTorch itself, after a warning, instead of
raising. A graph with non-tensor inputs (symbolic sizes of dynamic
shapes) always runs in PyTorch: compile with dynamic=False to avoid them.

This module registers nothing: fuse.torch does on import, and the
package's entry point (torch_dynamo_backends: fuse) points here, so that
torch.compile finds the backend without an import.
"""

import warnings


def backend(gm, example_inputs, **kwargs):
    """A TorchDynamo compiler: (GraphModule, [tensors]) -> callable."""
    import torch

    import fuse
    import fuse.torch as fuse_torch

    options = dict(kwargs.get("options") or {})
    fallback = bool(options.pop("fallback", False))
    inputs = list(example_inputs)
    if not all(isinstance(t, torch.Tensor) for t in inputs):
        warnings.warn("fuse: a graph with non-tensor inputs (dynamic shapes) "
                      "runs in PyTorch; use torch.compile(..., dynamic=False)",
                      fuse.Warning)
        return gm.forward
    if "device" not in options:
        options["device"] = ("cuda" if any(t.is_cuda for t in inputs)
                             else "cpu")
    try:
        model = fuse_torch.compile(gm, tuple(inputs), **options)
    except Exception as e:  # fuse.Error, or an export the exporter refuses
        if not fallback:
            raise
        warnings.warn("fuse: the graph runs in PyTorch: %s" % e, fuse.Warning)
        return gm.forward

    def run(*args):
        return model(*args)

    run.fuse_model = model
    return run
