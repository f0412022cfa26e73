"""What the Python tests share: the fuse package of the build under test
($FZ_BUILD_DIR/python, default <repo>/build/python), paths, and small
helpers. Run the suite with tests/python/run.py (scripts/test.sh does).
"""
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
BUILD = os.path.abspath(os.environ.get("FZ_BUILD_DIR",
                                       os.path.join(REPO, "build")))
sys.path.insert(0, os.path.join(BUILD, "python"))

import numpy as np  # noqa: E402

import fuse  # noqa: E402

MLP_ONNX = os.path.join(REPO, "examples", "models", "mlp", "model.onnx")
MLP_DATA = os.path.join(REPO, "examples", "models", "mlp", "test_data_set_0")
CNN_ONNX = os.path.join(REPO, "examples", "models", "cnn", "model.onnx")
CNN_DATA = os.path.join(REPO, "examples", "models", "cnn", "test_data_set_0")
FAKE_CUDA = os.path.join(BUILD, "lib", "libfz_fake_cuda.so")

# A library that is no CUDA driver: device="auto" must fall back to the
# CPU and device="cuda" fail, whether or not this machine has a GPU.
os.environ.setdefault("FZ_CUDA_LIBRARY", "/nonexistent/libcuda.so.1")
NO_DRIVER = os.environ["FZ_CUDA_LIBRARY"]

ADD_RELU = """func.func @main(%a: tensor<2x4xf32>, %b: tensor<4xf32>) -> tensor<2x4xf32> {
  %0 = graph.add %a, %b : tensor<2x4xf32>, tensor<4xf32> -> tensor<2x4xf32>
  %1 = graph.relu %0 : tensor<2x4xf32>
  return %1 : tensor<2x4xf32>
}
"""

try:
    import torch  # noqa: F401
    HAVE_TORCH = True
except ImportError:
    HAVE_TORCH = False


def rand(shape, dtype=np.float32, seed=0):
    """Seeded values in +-[0.125, 2] (as fuse-run's --random-inputs)."""
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        v = rng.uniform(0.125, 2.0, size=shape)
        v *= rng.choice([-1.0, 1.0], size=shape)
        return v.astype(dtype)
    if np.dtype(dtype) == np.bool_:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    v = rng.integers(1, 5, size=shape) * rng.choice([-1, 1], size=shape)
    return v.astype(dtype)


def rss_bytes():
    """Resident memory of this process (Linux)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
