"""fuse.compile: models from ONNX files, ONNX bytes and Modules, on the
CPU (checked against the interpreter, numpy and PyTorch's saved
outputs), the options, the fusion report and remarks, the errors (bad
shapes, dtypes, devices, options, run-time errors), zero-copy arrays in
and out, the GIL released while compiling and running, flat memory over
a call loop, and the CUDA path's host side on the fake driver."""
import ctypes
import os
import sys
import threading
import time
import unittest

from common import (ADD_RELU, CNN_DATA, CNN_ONNX, FAKE_CUDA, HAVE_TORCH,
                    MLP_DATA, MLP_ONNX, REPO, fuse, np, rand, rss_bytes)

# A model whose batch dim is symbolic (tests/lit/onnx/input-shapes.fuse).
DYNAMIC_ONNX = os.path.join(REPO, "tests", "lit", "onnx", "Inputs",
                            "dynamic_batch.onnx")

NN = """func.func @main(%x: tensor<16x32xf32>, %w: tensor<32x24xf32>, %b: tensor<24xf32>) -> (tensor<16x24xf32>, tensor<16x1xf32>) {
  %0 = graph.matmul %x, %w : tensor<16x32xf32>, tensor<32x24xf32> -> tensor<16x24xf32>
  %1 = graph.add %0, %b : tensor<16x24xf32>, tensor<24xf32> -> tensor<16x24xf32>
  %2 = graph.gelu %1 : tensor<16x24xf32>
  %3 = graph.softmax %2 {axis = 1 : i64} : tensor<16x24xf32>
  %4 = graph.reduce_max %2 {axes = array<i64: 1>, keepdims = true} : tensor<16x24xf32> -> tensor<16x1xf32>
  return %3, %4 : tensor<16x24xf32>, tensor<16x1xf32>
}
"""

INTS = """func.func @main(%a: tensor<6xi32>, %b: tensor<6xi32>, %c: tensor<6xi1>) -> (tensor<6xi32>, tensor<6xi1>) {
  %0 = graph.div %a, %b : tensor<6xi32>, tensor<6xi32> -> tensor<6xi32>
  %1 = graph.select %c, %0, %a : tensor<6xi1>, tensor<6xi32>, tensor<6xi32> -> tensor<6xi32>
  %2 = graph.compare gt, %1, %b : tensor<6xi32>, tensor<6xi32> -> tensor<6xi1>
  return %1, %2 : tensor<6xi32>, tensor<6xi1>
}
"""

HALF = """func.func @main(%a: tensor<8xf16>, %b: tensor<8xf16>) -> tensor<8xf16> {
  %0 = graph.mul %a, %b : tensor<8xf16>, tensor<8xf16> -> tensor<8xf16>
  %1 = graph.tanh %0 : tensor<8xf16>
  return %1 : tensor<8xf16>
}
"""

# 3 x 2 x 1024^3 flops: tens of milliseconds, long enough to see the GIL
# released while it runs.
BIG = """func.func @main(%x: tensor<1024x1024xf32>, %w: tensor<1024x1024xf32>) -> tensor<1024x1024xf32> {
  %0 = graph.matmul %x, %w : tensor<1024x1024xf32>, tensor<1024x1024xf32> -> tensor<1024x1024xf32>
  %1 = graph.matmul %0, %w : tensor<1024x1024xf32>, tensor<1024x1024xf32> -> tensor<1024x1024xf32>
  %2 = graph.matmul %1, %w : tensor<1024x1024xf32>, tensor<1024x1024xf32> -> tensor<1024x1024xf32>
  %3 = graph.tanh %2 : tensor<1024x1024xf32>
  return %3 : tensor<1024x1024xf32>
}
"""


def gelu(x):
    from math import erf, sqrt
    v = np.vectorize(lambda t: 0.5 * t * (1 + erf(t / sqrt(2))))
    return v(x.astype(np.float64))


class CompileCpuTest(unittest.TestCase):
    def test_mlp_matches_pytorch(self):
        # The target: three lines from a path to PyTorch's output.
        m = fuse.compile(MLP_ONNX, device="cpu")
        x = np.load(os.path.join(MLP_DATA, "input_0.npy"))
        y = m(x)
        want = np.load(os.path.join(MLP_DATA, "output_0.npy"))
        np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(y, fuse.interpret(m.module, x),
                                   rtol=1e-4, atol=1e-5)
        self.assertEqual(m.device, "cpu")
        self.assertEqual(m.entry, "main")
        self.assertEqual(m.inputs, [("float32", (4, 32))])
        self.assertEqual(m.outputs, [("float32", (4, 32))])
        self.assertIsNone(m.device_name)
        self.assertGreater(m.compile_seconds, 0)
        self.assertGreaterEqual(m.threads, 1)

    def test_bytes_path_and_module_agree(self):
        x = np.load(os.path.join(MLP_DATA, "input_0.npy"))
        with open(MLP_ONNX, "rb") as f:
            data = f.read()
        by_path = fuse.compile(MLP_ONNX, device="cpu")(x)
        by_bytes = fuse.compile(data, device="cpu", name="mlp.onnx")(x)
        module = fuse.Module.read(MLP_ONNX)
        by_module = fuse.compile(module, device="cpu")(x)
        np.testing.assert_array_equal(by_bytes, by_path)
        np.testing.assert_array_equal(by_module, by_path)
        # Compiling works on a clone: the module is unchanged.
        self.assertNotIn("graph.fusion", str(module))

    def test_cnn_matches_pytorch(self):
        x = np.load(os.path.join(CNN_DATA, "input_0.npy"))
        with open(CNN_ONNX, "rb") as f:
            m = fuse.compile(f.read(), device="cpu", name="cnn.onnx")
        np.testing.assert_allclose(m(x), np.load(os.path.join(CNN_DATA,
                                                              "output_0.npy")),
                                   rtol=1e-4, atol=1e-5)
        # layout="nhwc": the conv region channels-last (a transpose in:
        # one op more than the model's 9), the same result.
        nhwc = fuse.compile(CNN_ONNX, device="cpu", layout="nhwc")
        self.assertIn("ops: 10", nhwc.fusion_report())
        self.assertIn("ops: 9", m.fusion_report())
        np.testing.assert_allclose(nhwc(x), m(x), rtol=1e-5, atol=1e-6)

    def test_several_outputs_against_numpy(self):
        m = fuse.compile(fuse.Module.parse(NN), device="cpu")
        x, w, b = rand((16, 32)), rand((32, 24), seed=1) / 8, rand(24, seed=2)
        soft, mx = m(x, w, b)
        h = gelu(x.astype(np.float64) @ w + b)
        e = np.exp(h - h.max(axis=1, keepdims=True))
        np.testing.assert_allclose(soft, e / e.sum(axis=1, keepdims=True),
                                   rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(mx, h.max(axis=1, keepdims=True),
                                   rtol=1e-4, atol=1e-5)
        ref = fuse.interpret(m.module, x, w, b)
        for got, want in zip((soft, mx), ref):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)

    def test_integers_bools_halves(self):
        m = fuse.compile(fuse.Module.parse(INTS), device="cpu")
        a = np.array([7, -7, 9, 4, -8, 5], np.int32)
        b = np.array([2, 2, -3, 4, 3, 1], np.int32)
        c = np.array([1, 0, 1, 1, 0, 1], np.bool_)
        q, gt = m(a, b, c)
        want = np.where(c, np.trunc(a / b).astype(np.int32), a)
        np.testing.assert_array_equal(q, want)
        np.testing.assert_array_equal(gt, want > b)
        self.assertEqual((q.dtype, gt.dtype), (np.int32, np.bool_))
        h = fuse.compile(fuse.Module.parse(HALF), device="cpu")
        x, y = rand(8, np.float16), rand(8, np.float16, seed=3)
        got = h(x, y)
        self.assertEqual(got.dtype, np.float16)
        np.testing.assert_allclose(got, np.tanh(x.astype(np.float32) * y),
                                   rtol=2e-3, atol=2e-3)

    def test_options(self):
        x = np.load(os.path.join(MLP_DATA, "input_0.npy"))
        want = np.load(os.path.join(MLP_DATA, "output_0.npy"))
        unfused = fuse.compile(MLP_ONNX, device="cpu", fuse=False, threads=1,
                               tile=False, stage_rows=False, exact_math=True)
        np.testing.assert_allclose(unfused(x), want, rtol=1e-4, atol=1e-5)
        # No fusion ran: no report, no remarks.
        self.assertEqual((unfused.fusion_report(), unfused.remarks), ("", []))
        self.assertEqual(unfused.threads, 1)
        rules = fuse.compile(MLP_ONNX, device="cpu", fusion_mode="rules",
                             remarks=False)
        self.assertIn("mode=rules", rules.fusion_report())
        self.assertEqual(rules.remarks, [])
        np.testing.assert_allclose(rules(x), want, rtol=1e-4, atol=1e-5)
        # bf16 contractions: within the policy's stated tolerance.
        bf16 = fuse.compile(MLP_ONNX, device="cpu", precision="bf16")
        np.testing.assert_allclose(bf16(x), want, rtol=3e-2, atol=3e-2)
        self.assertIn("bf16", bf16.lowered())
        fast = fuse.compile(MLP_ONNX, device="cpu", fast_math=True,
                            vector_width=256)
        np.testing.assert_allclose(fast(x), want, rtol=1e-3, atol=1e-4)

    def test_kernel_cache(self):
        # A folder of its own: the first compile stores the module's
        # objects (an entry found by the loop IR, docs/codegen.md "Kernel
        # cache"), the second loads it; cache=False does neither.
        import tempfile
        x = np.load(os.path.join(MLP_DATA, "input_0.npy"))
        want = np.load(os.path.join(MLP_DATA, "output_0.npy"))
        saved = os.environ.get("FZ_CACHE_DIR")
        with tempfile.TemporaryDirectory() as d:
            os.environ["FZ_CACHE_DIR"] = d
            try:
                off = fuse.compile(MLP_ONNX, device="cpu", cache=False)
                self.assertFalse(os.path.exists(os.path.join(d, "kernels")))
                first = fuse.compile(MLP_ONNX, device="cpu")
                entries = os.listdir(os.path.join(d, "kernels"))
                self.assertEqual(len(entries), 1)
                self.assertTrue(entries[0].endswith(".native"))
                second = fuse.compile(MLP_ONNX, device="cpu")
                self.assertEqual(os.listdir(os.path.join(d, "kernels")),
                                 entries)
                for m in (off, first, second):
                    np.testing.assert_allclose(m(x), want, rtol=1e-4,
                                               atol=1e-5)
                np.testing.assert_array_equal(first(x), second(x))
            finally:
                if saved is None:
                    del os.environ["FZ_CACHE_DIR"]
                else:
                    os.environ["FZ_CACHE_DIR"] = saved
        with self.assertRaises(ValueError):
            fuse.compile(MLP_ONNX, device="cpu", cache="yes")

    def test_fusion_report_and_remarks(self):
        m = fuse.compile(MLP_ONNX, device="cpu")
        report = m.fusion_report()
        self.assertTrue(report.startswith(
            "fusion report for @main (target=cpu, mode=cost)"))
        self.assertIn("kernels: 7 before, 3 after", report)
        remarks = m.remarks
        self.assertEqual(len(remarks), 7)  # one per op
        first = remarks[0]
        self.assertEqual(first.severity, "remark")
        self.assertEqual(first.message,
                         "fused into group 0 (contraction, 3 ops)")
        self.assertEqual(first.location.name, None)
        self.assertEqual(first.location.position, MLP_ONNX + ": /fc1/Gemm")
        self.assertIn("loop.parallel", m.lowered())
        self.assertEqual(m.kernels(), [])

    def test_entry_and_input_shapes(self):
        two = ADD_RELU + ADD_RELU.replace("@main", "@other")
        m = fuse.compile(fuse.Module.parse(two), device="cpu", entry="other")
        self.assertEqual(m.entry, "other")
        with self.assertRaises(fuse.Error) as cm:
            fuse.compile(fuse.Module.parse(two), device="cpu", entry="nope")
        self.assertIn("no function @nope", str(cm.exception))
        # A declared dim cannot be replaced; a symbolic one must be given.
        with self.assertRaises(fuse.Error) as cm:
            fuse.compile(MLP_ONNX, device="cpu", input_shapes=[(4, 31)])
        self.assertIn("only symbolic dimensions can be given",
                      str(cm.exception))
        with self.assertRaises(fuse.Error) as cm:
            fuse.compile(DYNAMIC_ONNX, device="cpu")
        self.assertIn("must be a statically shaped tensor", str(cm.exception))
        m = fuse.compile(DYNAMIC_ONNX, device="cpu", input_shapes={"x": (8, 4)})
        self.assertEqual(m.inputs, [("float32", (8, 4))])
        x = rand((8, 4))
        np.testing.assert_array_equal(m(x), np.maximum(x, 0))
        m = fuse.compile(DYNAMIC_ONNX, device="cpu", input_shapes=[(3, None)])
        self.assertEqual(m.inputs, [("float32", (3, 4))])

    def test_device_auto_and_cuda_without_gpu(self):
        # FZ_CUDA_LIBRARY names no driver (common.py): auto is the CPU,
        # and cuda is a clear error.
        m = fuse.compile(fuse.Module.parse(ADD_RELU), device="auto")
        self.assertEqual(m.device, "cpu")
        self.assertFalse(fuse.cuda_available())
        self.assertEqual(fuse.cuda_status()[0], "no-driver")
        with self.assertRaises(fuse.Error) as cm:
            fuse.compile(fuse.Module.parse(ADD_RELU), device="cuda")
        self.assertIn("no CUDA driver found", str(cm.exception))

    def test_bad_arguments(self):
        m = fuse.compile(fuse.Module.parse(ADD_RELU), device="cpu")
        a, b = rand((2, 4)), rand(4)
        with self.assertRaises(fuse.Error) as cm:
            m(a.astype(np.float64), b)
        self.assertEqual(str(cm.exception), "fuse: input #0 of @main must be "
                         "float32[2, 4], got float64[2, 4]")
        with self.assertRaises(fuse.Error) as cm:
            m(a, rand(5))
        self.assertIn("input #1 of @main must be float32[4], got "
                      "float32[5]", str(cm.exception))
        with self.assertRaises(TypeError):
            m(a)
        with self.assertRaises(TypeError):
            m(a, b, a)
        with self.assertRaises(fuse.Error):
            m(a, object())
        with self.assertRaises(fuse.Error):
            m(a, np.ones(4, np.uint8))
        with self.assertRaises(fuse.Error):
            m(a, np.ones(4, ">f4"))
        with self.assertRaises(TypeError):
            m(a, b, bogus=1)
        with self.assertRaises(fuse.Error):
            m(a, b, out=[np.empty((2, 4), np.float64)])
        with self.assertRaises(TypeError):
            m(a, b, out=[])
        ro = np.empty((2, 4), np.float32)
        ro.flags.writeable = False
        with self.assertRaises(fuse.Error) as cm:
            m(a, b, out=[ro])
        self.assertIn("read-only", str(cm.exception))
        # Lists go through numpy (float64 here: refused, not converted).
        with self.assertRaises(fuse.Error):
            m([[1, 2, 3, 4]] * 2, b)
        np.testing.assert_array_equal(
            m(np.array([[1, -2, 3, -4]] * 2, np.float32), np.zeros(4, np.float32)),
            [[1, 0, 3, 0]] * 2)

    def test_bad_options(self):
        mod = fuse.Module.parse(ADD_RELU)
        with self.assertRaises(TypeError) as cm:
            fuse.compile(mod, devcie="cpu")
        self.assertIn("did you mean 'device'", str(cm.exception))
        with self.assertRaises(TypeError) as cm:
            fuse.compile(mod, precison="bf16")
        self.assertIn("did you mean 'precision'", str(cm.exception))
        for kw in ({"precision": "fp8"}, {"threads": -1}, {"fuse": "yes"},
                   {"vector_width": 100}, {"gpu_arch": "sm_70"},
                   {"fusion_mode": "greedy"}, {"layout": "NHWC"}):
            with self.assertRaises(ValueError, msg=str(kw)):
                fuse.compile(mod, **kw)
        with self.assertRaises(ValueError):
            fuse.compile(mod, device="tpu")
        with self.assertRaises(TypeError):
            fuse.compile(42)
        with self.assertRaises(fuse.Error) as cm:
            fuse.compile("/nonexistent/model.onnx")
        self.assertIn("/nonexistent/model.onnx", str(cm.exception))
        with self.assertRaises(fuse.Error):
            fuse.compile(b"\x08\x07junk", name="junk.onnx")

    def test_runtime_error_is_raised_and_recovers(self):
        m = fuse.compile(fuse.Module.parse(INTS, name="ints.fuse"),
                         device="cpu")
        a = np.array([7, -7, 9, 4, -8, 5], np.int32)
        b = np.array([2, 0, -3, 4, 3, 1], np.int32)
        c = np.ones(6, np.bool_)
        with self.assertRaises(fuse.Error) as cm:
            m(a, b, c)
        self.assertIn("integer division by zero", cm.exception.message)
        self.assertEqual(cm.exception.location.file, "ints.fuse")
        self.assertEqual(cm.exception.location.line, 2)
        b[1] = 1
        q, _ = m(a, b, c)
        np.testing.assert_array_equal(q, np.trunc(a / b).astype(np.int32))


class ArraysTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.m = fuse.compile(fuse.Module.parse(ADD_RELU), device="cpu")

    def want(self, a, b):
        return np.maximum(a + b, 0)

    def test_out_in_place(self):
        a, b = rand((2, 4)), rand(4, seed=1)
        out = np.full((2, 4), 7, np.float32)
        r = self.m(a, b, out=[out])
        self.assertIs(r, out)
        np.testing.assert_array_equal(out, self.want(a, b))

    def test_strided_and_misaligned(self):
        big = rand((4, 8), seed=2)
        a = big[::2, ::2]  # not contiguous
        b = rand(4, seed=3)
        np.testing.assert_array_equal(self.m(a, b), self.want(a, b))
        raw = np.zeros(2 * 4 * 4 + 4, np.uint8)
        mis = raw[4:4 + 32].view(np.float32).reshape(2, 4)  # 4-byte aligned
        mis[...] = rand((2, 4), seed=4)
        np.testing.assert_array_equal(self.m(mis, b), self.want(mis, b))
        out = np.zeros((2, 8), np.float32)[:, ::2]  # a strided output
        self.m(a, b, out=[out])
        np.testing.assert_array_equal(out, self.want(a, b))

    @unittest.skipUnless(HAVE_TORCH, "PyTorch is not installed")
    def test_dlpack_zero_copy_on_the_cpu(self):
        import torch
        a = torch.from_numpy(rand((2, 4), seed=5))
        b = torch.from_numpy(rand(4, seed=6))
        out = torch.empty(2, 4)
        ptr = out.data_ptr()
        self.m(a, b, out=[out])
        self.assertEqual(out.data_ptr(), ptr)
        np.testing.assert_array_equal(out.numpy(),
                                      self.want(a.numpy(), b.numpy()))
        # A torch tensor in, numpy out.
        np.testing.assert_array_equal(self.m(a, b),
                                      self.want(a.numpy(), b.numpy()))
        with self.assertRaises(fuse.Error):
            self.m(a.double(), b)

    def test_references_and_memory_stay_flat(self):
        a, b = rand((2, 4)), rand(4, seed=1)
        out = np.empty((2, 4), np.float32)
        for _ in range(200):
            self.m(a, b)
        refs = (sys.getrefcount(a), sys.getrefcount(b), sys.getrefcount(out))
        before = rss_bytes()
        for _ in range(5000):
            self.m(a, b)
            self.m(a, b, out=[out])
        grown = rss_bytes() - before
        self.assertEqual(
            (sys.getrefcount(a), sys.getrefcount(b), sys.getrefcount(out)),
            refs)
        # 10,000 calls: a leaked 32-byte output per call alone would be
        # 320 KB of arrays (and their objects: ~1.3 MB).
        self.assertLess(grown, 256 * 1024)

    def test_threads_share_a_model(self):
        errors = []

        def work(seed):
            try:
                for i in range(200):
                    a, b = rand((2, 4), seed=seed + i), rand(4, seed=seed)
                    np.testing.assert_array_equal(self.m(a, b),
                                                  self.want(a, b))
            except Exception as e:  # pragma: no cover (reported below)
                errors.append(e)
        threads = [threading.Thread(target=work, args=(s * 1000,))
                   for s in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])


class GilTest(unittest.TestCase):
    """The GIL is released while fuse compiles and runs: another thread
    makes progress in the middle of the call (a call holding the GIL
    would leave it no moment there at all). On a loaded machine that
    thread may not be scheduled in one call's time, so up to 8 calls are
    tried; one with progress inside is the evidence."""

    def progress_during(self, fn, tries=8):
        for _ in range(tries):
            stamps, done = [], threading.Event()

            def spin():
                while not done.is_set():
                    stamps.append(time.perf_counter())
                    time.sleep(0.0005)
            t = threading.Thread(target=spin)
            t.start()
            while not stamps:
                time.sleep(0.001)
            t0 = time.perf_counter()
            fn()
            t1 = time.perf_counter()
            done.set()
            t.join()
            q = (t1 - t0) / 4
            if any(t0 + q < s < t1 - q for s in stamps):
                return True
        return False

    def test_compile_releases_the_gil(self):
        self.assertTrue(self.progress_during(
            lambda: fuse.compile(fuse.Module.parse(BIG), device="cpu")))

    def test_call_releases_the_gil(self):
        m = fuse.compile(fuse.Module.parse(BIG), device="cpu", threads=1)
        x, w = rand((1024, 1024)), rand((1024, 1024), seed=1) / 256
        self.assertTrue(self.progress_during(lambda: m(x, w)))


class SharedContextTest(unittest.TestCase):
    """Two threads, one context: a Module destroyed while another thread
    compiles in that context is destroyed by that thread when it is done
    (deferred), instead of making the finalizer wait for the compile."""

    def test_destroy_while_compiling(self):
        ctx = fuse.Context()
        big = fuse.Module.parse(BIG, ctx)
        other = [fuse.Module.parse(ADD_RELU, ctx) for _ in range(3)]
        got = []
        worker = threading.Thread(
            target=lambda: got.append(fuse.compile(big, device="cpu")))
        worker.start()
        time.sleep(0.05)
        busy = worker.is_alive()
        t0 = time.perf_counter()
        del other[:]  # finalizers: deferred if the compile holds the lock
        took = time.perf_counter() - t0
        worker.join()
        t1 = time.perf_counter()
        if busy and t1 - t0 > 0.2:
            self.assertLess(took, (t1 - t0) / 2)
        self.assertEqual(got[0].entry, "main")
        # The context works on, and runs what was deferred.
        m = fuse.Module.parse(ADD_RELU, ctx)
        self.assertTrue(m.verify())


def dlpack_cuda_capsule(buf, shape, dtype_code, bits):
    """A DLPack capsule that says CUDA device 0 for host memory buf: what
    a CUDA tensor hands over, for the fake driver (device memory is host
    memory there)."""
    class DLDevice(ctypes.Structure):
        _fields_ = [("device_type", ctypes.c_int32),
                    ("device_id", ctypes.c_int32)]

    class DLDataType(ctypes.Structure):
        _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                    ("lanes", ctypes.c_uint16)]

    class DLTensor(ctypes.Structure):
        _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice),
                    ("ndim", ctypes.c_int32), ("dtype", DLDataType),
                    ("shape", ctypes.POINTER(ctypes.c_int64)),
                    ("strides", ctypes.POINTER(ctypes.c_int64)),
                    ("byte_offset", ctypes.c_uint64)]

    class DLManagedTensor(ctypes.Structure):
        _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                    ("deleter", ctypes.c_void_p)]

    dims = (ctypes.c_int64 * len(shape))(*shape)
    m = DLManagedTensor()
    m.dl_tensor.data = buf.ctypes.data
    m.dl_tensor.device = DLDevice(2, 0)  # kDLCUDA
    m.dl_tensor.ndim = len(shape)
    m.dl_tensor.dtype = DLDataType(dtype_code, bits, 1)
    m.dl_tensor.shape = dims
    m.dl_tensor.strides = None
    m.deleter = None
    new = ctypes.pythonapi.PyCapsule_New
    new.restype = ctypes.py_object
    new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    cap = new(ctypes.addressof(m), b"dltensor", None)
    return cap, (m, dims, buf)  # keep the structs alive


class FakeCudaTensor:
    """A "CUDA tensor" over host memory for the fake driver."""

    def __init__(self, array):
        self.array = np.ascontiguousarray(array)
        self.keep, self.streams = [], []

    def __dlpack_device__(self):
        return (2, 0)

    def __dlpack__(self, stream=None):
        self.streams.append(stream)
        cap, keep = dlpack_cuda_capsule(self.array, self.array.shape, 2, 32)
        self.keep.append(keep)
        return cap


@unittest.skipUnless(os.path.exists(FAKE_CUDA), "no fake CUDA driver built")
class FakeCudaTest(unittest.TestCase):
    """device='cuda' against tests/unit/fake_cuda.c: compilation to PTX,
    the call's device buffers, copies and launches run (no kernel does:
    outputs hold what was copied there, zeros)."""

    def setUp(self):
        os.environ["FZ_CUDA_LIBRARY"] = FAKE_CUDA

    def tearDown(self):
        from common import NO_DRIVER
        os.environ["FZ_CUDA_LIBRARY"] = NO_DRIVER

    def test_compile_and_call_on_the_host_side(self):
        self.assertEqual(fuse.cuda_status()[0], "ready")
        m = fuse.compile(fuse.Module.parse(ADD_RELU), device="auto",
                         codegen_threads=1)
        self.assertEqual(m.device, "cuda")
        self.assertTrue(m.device_name)
        kernels = m.kernels()
        self.assertGreaterEqual(len(kernels), 1)
        self.assertIn(".entry", m.lowered())
        self.assertIn("fusion report for @main", m.fusion_report())
        a, b = rand((2, 4)), rand(4, seed=1)
        y = m(a, b)
        self.assertIsInstance(y, np.ndarray)
        self.assertEqual((y.shape, y.dtype), ((2, 4), np.float32))
        with self.assertRaises(fuse.Error):
            m(a.astype(np.float64), b)

    def test_device_tensors_stay_on_the_device(self):
        m = fuse.compile(fuse.Module.parse(ADD_RELU), device="cuda",
                         codegen_threads=1)
        a, b = FakeCudaTensor(rand((2, 4))), FakeCudaTensor(rand(4, seed=1))
        y = m(a, b)
        # Asked again for the legacy default stream once it said CUDA.
        self.assertEqual(a.streams, [None, 1])
        self.assertIsInstance(y, fuse.DeviceArray)
        self.assertEqual((y.shape, y.dtype, y.nbytes), ((2, 4), "float32", 32))
        self.assertEqual(y.__dlpack_device__(), (2, 0))
        self.assertTrue(y.data_ptr)
        host = y.numpy()
        self.assertEqual(host.shape, (2, 4))
        np.testing.assert_array_equal(np.asarray(y), host)
        cap = y.__dlpack__(stream=1, max_version=(1, 0))
        self.assertIn("dltensor", repr(cap))
        del cap  # not consumed: the capsule releases it
        out = FakeCudaTensor(np.full((2, 4), 9, np.float32))
        r = m(a, b, out=[out])
        self.assertIs(r, out)
        # A model compiled for the CPU refuses device memory.
        cpu = fuse.compile(fuse.Module.parse(ADD_RELU), device="cpu")
        with self.assertRaises(fuse.Error) as cm:
            cpu(a, b)
        self.assertIn("on a CUDA device", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
