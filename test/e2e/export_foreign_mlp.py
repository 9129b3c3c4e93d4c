#!/usr/bin/python3
"""Exports a small MLP the way a user might: nn.Sequential, Tanh/Sigmoid,
a bias-free layer (MatMul), opset 13, static batch 16."""
import sys

import torch
from torch import nn

torch.manual_seed(7)
model = nn.Sequential(nn.Linear(12, 33), nn.Tanh(), nn.Linear(33, 17, bias=False), nn.Sigmoid(), nn.Linear(17, 4))
torch.onnx.export(model, torch.zeros(16, 12), sys.argv[1], input_names=["features"], output_names=["scores"],
                  opset_version=13)
