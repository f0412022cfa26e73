#!/usr/bin/python3
"""Exports the small PyTorch models that fuse's ONNX importer is tested on.

Run with Debian's Python (python3-torch, python3-onnx):
    /usr/bin/python3 examples/models/export.py [OUT_DIR]

For each model NAME it writes, in the layout of ONNX's backend tests:
    OUT_DIR/NAME/model.onnx                      (opset 13, or 17)
    OUT_DIR/NAME/test_data_set_0/input_0.npy     a fixed input
    OUT_DIR/NAME/test_data_set_0/output_0.npy    PyTorch's output for it
Weights come from a fixed seed, and batch-norm statistics are set to
non-trivial values, so the files are reproducible.

Models:
    mlp          Linear, GELU, Linear, residual add, LayerNorm (opset 13:
                 GELU and LayerNorm arrive decomposed into primitive ops)
    mlp_opset17  the same network exported with opset 17 (LayerNormalization)
    cnn          Conv, BatchNorm, ReLU, Conv, BatchNorm, residual add,
                 ReLU, global average pool, Linear
"""
import os
import sys

import numpy as np
import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self, features=32, hidden=64):
        super().__init__()
        self.fc1 = nn.Linear(features, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, features)
        self.norm = nn.LayerNorm(features)

    def forward(self, x):
        return self.norm(x + self.fc2(self.act(self.fc1(x))))


class CNN(nn.Module):
    def __init__(self, channels=8, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, channels, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(channels, classes)

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = torch.relu(y + self.bn2(self.conv2(y)))
        return self.fc(torch.flatten(self.pool(y), 1))


def randomize_batch_norms(model, gen):
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            c = m.num_features
            m.running_mean.copy_(torch.randn(c, generator=gen) * 0.1)
            m.running_var.copy_(torch.rand(c, generator=gen) + 0.5)
            m.weight.data.copy_(torch.rand(c, generator=gen) + 0.5)
            m.bias.data.copy_(torch.randn(c, generator=gen) * 0.1)


def export(model, x, out_dir, name, opset):
    model.eval()
    folder = os.path.join(out_dir, name)
    data = os.path.join(folder, "test_data_set_0")
    os.makedirs(data, exist_ok=True)
    with torch.no_grad():
        y = model(x)
    # PRESERVE keeps BatchNormalization (eval mode) instead of folding it
    # into the convolution, so that the importer sees it.
    torch.onnx.export(model, (x,), os.path.join(folder, "model.onnx"),
                      input_names=["x"], output_names=["y"],
                      opset_version=opset,
                      training=torch.onnx.TrainingMode.PRESERVE,
                      do_constant_folding=False)
    np.save(os.path.join(data, "input_0.npy"), x.numpy())
    np.save(os.path.join(data, "output_0.npy"), y.numpy())
    print("wrote", folder)


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(
        os.path.abspath(__file__))
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    mlp = MLP()
    with torch.no_grad():
        mlp.norm.weight.copy_(torch.rand(32, generator=gen) + 0.5)
        mlp.norm.bias.copy_(torch.randn(32, generator=gen) * 0.1)
    x = torch.randn(4, 32, generator=gen)
    export(mlp, x, out_dir, "mlp", 13)
    export(mlp, x, out_dir, "mlp_opset17", 17)
    cnn = CNN()
    randomize_batch_norms(cnn, gen)
    export(cnn, torch.randn(2, 3, 12, 12, generator=gen), out_dir, "cnn", 13)


if __name__ == "__main__":
    main()
