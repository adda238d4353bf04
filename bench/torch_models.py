"""PyTorch twins of bench/nets.py's models: same structure and parameter names, so a
megtrace state dict copies over by name (reshaped where MegEngine's layout differs:
grouped conv weights carry a group axis). Imported by the torch/ONNX Runtime worker
only, in the environment that has torch."""
from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn
from torch.nn import functional as TF


class BenchMLP(nn.Module):
    def __init__(self, sizes=(784, 1024, 512, 10)):
        super().__init__()
        self.fc1 = nn.Linear(sizes[0], sizes[1])
        self.fc2 = nn.Linear(sizes[1], sizes[2])
        self.fc3 = nn.Linear(sizes[2], sizes[3])

    def forward(self, x):
        return self.fc3(TF.relu(self.fc2(TF.relu(self.fc1(x)))))


class BasicBlock(nn.Module):
    def __init__(self, cin, c, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, c, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)
        self.downsample = (nn.Identity() if cin == c and stride == 1 else
                           nn.Sequential(nn.Conv2d(cin, c, 1, stride, bias=False),
                                         nn.BatchNorm2d(c)))

    def forward(self, x):
        y = TF.relu(self.bn1(self.conv1(x)))
        return TF.relu(self.bn2(self.conv2(y)) + self.downsample(x))


class ResNet18(nn.Module):
    def __init__(self, num_classes=1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        layers, cin = [], 64
        for c, s in ((64, 1), (128, 2), (256, 2), (512, 2)):
            layers.append(nn.Sequential(BasicBlock(cin, c, s), BasicBlock(c, c)))
            cin = c
        self.layer1, self.layer2, self.layer3, self.layer4 = layers
        self.fc = nn.Linear(512, num_classes)

    def forward(self, x):
        x = self.maxpool(TF.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(TF.adaptive_avg_pool2d(x, 1), 1))


class InvertedResidual(nn.Module):
    def __init__(self, inp, oup, stride, expand):
        super().__init__()
        hidden = int(round(inp * expand))
        self.res = stride == 1 and inp == oup
        layers = []
        if expand != 1:
            layers += [nn.Conv2d(inp, hidden, 1, bias=False), nn.BatchNorm2d(hidden),
                       nn.ReLU6()]
        layers += [nn.Conv2d(hidden, hidden, 3, stride, 1, groups=hidden, bias=False),
                   nn.BatchNorm2d(hidden), nn.ReLU6(),
                   nn.Conv2d(hidden, oup, 1, bias=False), nn.BatchNorm2d(oup)]
        self.conv = nn.Sequential(*layers)

    def forward(self, x):
        return x + self.conv(x) if self.res else self.conv(x)


class MobileNetV2(nn.Module):
    def __init__(self, num_classes=1000):
        super().__init__()
        settings = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                    (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]
        cin = 32
        feats = [nn.Conv2d(3, cin, 3, 2, 1, bias=False), nn.BatchNorm2d(cin), nn.ReLU6()]
        for t, c, n, s in settings:
            for i in range(n):
                feats.append(InvertedResidual(cin, c, s if i == 0 else 1, t))
                cin = c
        feats += [nn.Conv2d(cin, 1280, 1, bias=False), nn.BatchNorm2d(1280), nn.ReLU6()]
        self.features = nn.Sequential(*feats)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(1280, num_classes))

    def forward(self, x):
        return self.classifier(self.features(x).mean((2, 3)))


class EncoderBlock(nn.Module):
    def __init__(self, hidden=768, heads=12, ffn=3072):
        super().__init__()
        self.heads, self.head_dim = heads, hidden // heads
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.norm1 = nn.LayerNorm(hidden)
        self.fc1 = nn.Linear(hidden, ffn)
        self.fc2 = nn.Linear(ffn, hidden)
        self.norm2 = nn.LayerNorm(hidden)

    def forward(self, x):
        b, s, h = x.shape
        qkv = self.qkv(x).reshape(b, s, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(self.head_dim), dim=-1)
        ctx = (att @ v).transpose(1, 2).reshape(b, s, h)
        x = self.norm1(x + self.proj(ctx))
        return self.norm2(x + self.fc2(TF.gelu(self.fc1(x))))


MODELS = {"mlp": BenchMLP, "resnet18": ResNet18, "mobilenetv2": MobileNetV2,
          "encoder": EncoderBlock}


def build(name: str, state: dict[str, np.ndarray]) -> nn.Module:
    """The torch twin of `name` with megtrace's weights, in eval mode."""
    model = MODELS[name]()
    own = model.state_dict()
    wanted = {k for k in own if not k.endswith("num_batches_tracked")}
    if wanted != set(state):
        raise ValueError(f"state: names differ from the torch model's: missing "
                         f"{sorted(wanted - set(state))[:5]}, extra "
                         f"{sorted(set(state) - wanted)[:5]}")
    model.load_state_dict({k: torch.from_numpy(np.ascontiguousarray(
        state[k].reshape(own[k].shape))) for k in wanted}, strict=False)
    return model.eval()
