"""fuse.torch: PyTorch modules exported through torch.onnx.export and
compiled with fuse, checked against PyTorch (Debian's PyTorch 1.13
here; on PyTorch 2 also the torch.compile backend, which
tests/gpu/python.sh runs on the GPU machine). Skipped without torch."""
import unittest
import warnings

from common import HAVE_TORCH, fuse, np

if HAVE_TORCH:
    import torch
    from torch import nn

    import fuse.torch as fuse_torch

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(32, 64)
            self.act = nn.GELU()
            self.fc2 = nn.Linear(64, 32)
            self.norm = nn.LayerNorm(32)

        def forward(self, x):
            return self.norm(x + self.fc2(self.act(self.fc1(x))))

    class CNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, padding=1)
            self.bn = nn.BatchNorm2d(8)
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(8, 10)

        def forward(self, x):
            y = torch.relu(self.bn(self.conv(x)))
            return self.fc(torch.flatten(self.pool(y), 1))

    class TwoHeads(nn.Module):
        def forward(self, x, y):
            s = torch.softmax(x @ y, dim=-1)
            return {"probs": s, "pair": (s.sum(dim=1), (x * 2).to(torch.int64))}

    class Unsupported(nn.Module):
        def forward(self, x):  # RandomUniformLike: no graph op draws
            return x + torch.rand_like(x)


@unittest.skipUnless(HAVE_TORCH, "PyTorch is not installed")
class TorchCompileTest(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(0)

    def test_mlp_matches_torch(self):
        net = MLP().eval()
        x = torch.randn(8, 32)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = fuse_torch.compile(net, (x,), device="cpu", check=True)
        self.assertEqual(model.device, "cpu")
        for seed in range(3):
            torch.manual_seed(seed)
            x = torch.randn(8, 32)
            y = model(x)
            self.assertIsInstance(y, torch.Tensor)
            self.assertEqual(y.dtype, torch.float32)
            torch.testing.assert_close(y, net(x).detach(), rtol=1e-4,
                                       atol=1e-5)
        self.assertIn("fusion report for @main", model.fusion_report())
        self.assertTrue(model.remarks)
        self.assertTrue(model.onnx.startswith(b"\x08"))  # a ModelProto
        # Inputs that require grad and are not contiguous.
        xg = torch.randn(32, 8).t().requires_grad_()
        torch.testing.assert_close(model(xg), net(xg).detach(), rtol=1e-4,
                                   atol=1e-5)

    def test_cnn_in_training_mode_is_exported_in_eval(self):
        net = CNN()
        with torch.no_grad():
            net.bn.running_mean.uniform_(-0.5, 0.5)
            net.bn.running_var.uniform_(0.5, 2.0)
        x = torch.randn(2, 3, 8, 8)
        self.assertTrue(net.training)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = fuse_torch.compile(net, x, device="cpu")
        self.assertTrue(net.training)  # restored
        net.eval()
        torch.testing.assert_close(model(x), net(x).detach(), rtol=1e-4,
                                   atol=1e-5)

    def test_nested_outputs_and_dtypes(self):
        x, y = torch.randn(4, 6), torch.randn(6, 5)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = fuse_torch.compile(TwoHeads(), (x, y), device="cpu")
        got = model(x, y)
        want = TwoHeads()(x, y)
        self.assertEqual(set(got), {"probs", "pair"})
        torch.testing.assert_close(got["probs"], want["probs"], rtol=1e-4,
                                   atol=1e-6)
        torch.testing.assert_close(got["pair"][0], want["pair"][0],
                                   rtol=1e-4, atol=1e-5)
        self.assertEqual(got["pair"][1].dtype, torch.int64)
        torch.testing.assert_close(got["pair"][1], want["pair"][1])

    def test_bool_and_int_tensors(self):
        # PyTorch 1.13 exports no bool tensor through DLPack: fuse takes
        # it through numpy instead.
        from test_compile import INTS
        m = fuse.compile(fuse.Module.parse(INTS), device="cpu")
        a = torch.tensor([7, -7, 9, 4, -8, 5], dtype=torch.int32)
        b = torch.tensor([2, 2, -3, 4, 3, 1], dtype=torch.int32)
        c = torch.tensor([1, 0, 1, 1, 0, 1], dtype=torch.bool)
        q, gt = m(a, b, c)
        want = torch.where(c, torch.div(a, b, rounding_mode="trunc"), a)
        np.testing.assert_array_equal(q, want.numpy())
        np.testing.assert_array_equal(gt, (want > b).numpy())

    def test_errors(self):
        model = None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = fuse_torch.compile(MLP().eval(), (torch.randn(8, 32),),
                                       device="cpu")
        with self.assertRaises(fuse.Error) as cm:
            model(torch.randn(4, 32))
        self.assertIn("must be float32[8, 32], got float32[4, 32]",
                      str(cm.exception))
        with self.assertRaises(fuse.Error):
            model(torch.randn(8, 32, dtype=torch.float64))
        with self.assertRaises(TypeError):
            model()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with self.assertRaises(fuse.Error) as cm:
                fuse_torch.compile(Unsupported(), (torch.randn(3, 3),),
                                   device="cpu")
        self.assertEqual(cm.exception.message,
                         "node '/RandomUniformLike' (RandomUniformLike): "
                         "unsupported op type 'RandomUniformLike'")
        self.assertEqual(cm.exception.location.position, "Unsupported.onnx")

    @unittest.skipUnless(HAVE_TORCH and hasattr(torch, "compile"),
                         "torch.compile needs PyTorch 2")
    def test_torch_compile_backend(self):  # on the GPU machine's PyTorch 2
        import fuse._dynamo  # noqa: F401
        net = MLP().eval()
        compiled = torch.compile(net, backend="fuse", dynamic=False,
                                 options={"device": "cpu"})
        x = torch.randn(8, 32)
        with torch.no_grad():
            torch.testing.assert_close(compiled(x), net(x), rtol=1e-4,
                                       atol=1e-5)


if __name__ == "__main__":
    unittest.main()
