"""The networks of bench/models: built with the PyTorch at hand, seeded.

Works with PyTorch 1.13 (Debian 12's python3-torch, the CPU half on the
development machine) and 2.x (the GPU machine). Nothing is downloaded:
every weight comes from a fixed seed, and the parameters that torchvision
initializes to constants (batch-norm statistics, zero classifier heads,
ConvNeXt's 1e-6 layer scales) are set to non-trivial values, so no output
is zero and no layer is an identity.

Models (NAME: what, inputs at batch B):
    resnet18, resnet50, mobilenet_v2, vit_b_16, convnext_tiny
        torchvision's classifiers, x [B, 3, 224, 224]
    alexnet, vgg11
        torchvision's, x [B, 3, 224, 224]: at batch 1 their classifiers
        are fully connected layers of M = 1 row against weights of up to
        25088 x 4096 (issue 29's small-M contractions); not in the
        default list (--models alexnet,vgg11 selects them)
    bert_layer
        a BERT-base encoder layer written out by hand (post-norm, 12 heads
        of 64, FFN 3072 with erf GELU), x [B, 128, 768]
    gpt2_block
        a GPT-2 block written out by hand (pre-norm, fused QKV projection
        split in three, causal mask, tanh GELU), x [B, 256, 768]
The two text layers are written by hand because PyTorch 2.11's
TorchScript exporter fails on nn.TransformerEncoderLayer and its dynamo
exporter emits opset 18, which fuse does not read yet.
"""
import math

import torch
from torch import nn
import torch.nn.functional as F

VISION = ("resnet18", "resnet50", "mobilenet_v2", "vit_b_16", "convnext_tiny")
EXTRA_VISION = ("alexnet", "vgg11")
TEXT = {"bert_layer": 128, "gpt2_block": 256}  # name: sequence length
DEFAULT = VISION + tuple(TEXT)  # what bench.py runs without --models
ALL = DEFAULT + EXTRA_VISION
THROUGHPUT_BATCH = {**{m: 32 for m in VISION + EXTRA_VISION},
                    "bert_layer": 8, "gpt2_block": 8}


class BertLayer(nn.Module):
    def __init__(self, d=768, heads=12, ff=3072):
        super().__init__()
        self.heads, self.dh = heads, d // heads
        self.q, self.k, self.v = (nn.Linear(d, d) for _ in range(3))
        self.o = nn.Linear(d, d)
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.ff1, self.ff2 = nn.Linear(d, ff), nn.Linear(ff, d)

    def split(self, t, b, s):  # [B, S, D] -> [B, H, S, Dh]
        return t.reshape(b, s, self.heads, self.dh).transpose(1, 2)

    def forward(self, x):
        b, s, d = (int(n) for n in x.shape)
        q, k, v = (self.split(f(x), b, s) for f in (self.q, self.k, self.v))
        att = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(self.dh))
        y = torch.matmul(att.softmax(-1), v).transpose(1, 2).reshape(b, s, d)
        x = self.ln1(x + self.o(y))
        return self.ln2(x + self.ff2(F.gelu(self.ff1(x))))


class Gpt2Block(nn.Module):
    def __init__(self, seq, d=768, heads=12):
        super().__init__()
        self.heads, self.dh, self.d = heads, d // heads, d
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.c_attn, self.c_proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.proj = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.register_buffer(
            "mask", torch.triu(torch.ones(seq, seq, dtype=torch.bool), 1))

    def forward(self, x):
        b, s, d = (int(n) for n in x.shape)
        q, k, v = self.c_attn(self.ln1(x)).split(self.d, dim=2)
        q, k, v = (t.reshape(b, s, self.heads, self.dh).transpose(1, 2)
                   for t in (q, k, v))
        att = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(self.dh))
        att = att.masked_fill(self.mask[:s, :s], float("-inf"))
        y = torch.matmul(att.softmax(-1), v).transpose(1, 2).reshape(b, s, d)
        x = x + self.c_proj(y)
        return x + self.proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


def _randomize(model, gen):
    """Non-trivial values for what torchvision initializes to constants."""
    def uniform(t, lo, hi):
        t.copy_(torch.rand(t.shape, generator=gen) * (hi - lo) + lo)

    def normal(t, std):
        t.copy_(torch.randn(t.shape, generator=gen) * std)

    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (nn.BatchNorm2d, nn.BatchNorm1d)):
                normal(m.running_mean, 0.1)
                uniform(m.running_var, 0.5, 2.0)
                uniform(m.weight, 0.5, 1.5)
                normal(m.bias, 0.1)
            elif isinstance(m, nn.LayerNorm):
                uniform(m.weight, 0.8, 1.2)
                normal(m.bias, 0.05)
            elif isinstance(m, nn.Linear):
                if not m.weight.abs().sum():
                    normal(m.weight, 0.02)
                if m.bias is not None:
                    normal(m.bias, 0.02)
            for name, p in m.named_parameters(recurse=False):
                if name == "layer_scale":  # ConvNeXt: 1e-6 at init
                    uniform(p, 0.05, 0.2)


def build(name, seed=0):
    """The f32 model NAME in eval mode, its weights from seed."""
    torch.manual_seed(seed)
    if name in VISION + EXTRA_VISION:
        import torchvision
        model = getattr(torchvision.models, name)(weights=None)
    elif name == "bert_layer":
        model = BertLayer()
    elif name == "gpt2_block":
        model = Gpt2Block(TEXT[name])
    else:
        raise ValueError(f"unknown model {name!r}; known: {', '.join(ALL)}")
    gen = torch.Generator().manual_seed(seed + 1)
    _randomize(model, gen)
    return model.eval()


def make_input(name, batch, seed=0):
    """The f32 input of NAME at batch, on the CPU."""
    gen = torch.Generator().manual_seed(seed + 2)
    if name in VISION + EXTRA_VISION:
        return torch.randn(batch, 3, 224, 224, generator=gen)
    return torch.randn(batch, TEXT[name], 768, generator=gen)


def export_onnx(model, x, path):
    """ONNX opset 17 through the TorchScript exporter (PyTorch 2.x's
    dynamo exporter writes opset 18+). Exported with autograd on, so that
    nn.MultiheadAttention (ViT) takes its composite path, not the native
    fast path the exporter cannot trace."""
    import inspect
    kw = {}
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        kw["dynamo"] = False
    with torch.enable_grad():
        torch.onnx.export(model, (x,), path, opset_version=17,
                          input_names=["input"], output_names=["output"],
                          do_constant_folding=True, **kw)
