"""ResNet-18, MobileNetV2 and a transformer encoder block, written the way MegEngine model
code is (only the imports differ). Sizes are parameters so tests can stay small."""
import math

import numpy as np

import megtrace.functional as F
import megtrace.module as M


class BasicBlock(M.Module):
    expansion = 1

    def __init__(self, in_channels, channels, stride=1):
        super().__init__()
        self.conv1 = M.Conv2d(in_channels, channels, 3, stride, padding=1, bias=False)
        self.bn1 = M.BatchNorm2d(channels)
        self.conv2 = M.Conv2d(channels, channels, 3, 1, padding=1, bias=False)
        self.bn2 = M.BatchNorm2d(channels)
        self.downsample = (
            M.Identity() if in_channels == channels and stride == 1
            else M.Sequential(M.Conv2d(in_channels, channels, 1, stride, bias=False),
                              M.BatchNorm2d(channels)))

    def forward(self, x):
        identity = x
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.bn2(self.conv2(x))
        return F.relu(x + self.downsample(identity))


class ResNet18(M.Module):
    def __init__(self, num_classes=1000):
        super().__init__()
        self.conv1 = M.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = M.BatchNorm2d(64)
        self.maxpool = M.MaxPool2d(kernel_size=3, stride=2, padding=1)
        layers, in_c = [], 64
        for channels, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            layers.append(M.Sequential(BasicBlock(in_c, channels, stride),
                                       BasicBlock(channels, channels)))
            in_c = channels
        self.layer1, self.layer2, self.layer3, self.layer4 = layers
        self.avgpool = M.AdaptiveAvgPool2d((1, 1))
        self.fc = M.Linear(512, num_classes)

    def forward(self, x):
        x = self.maxpool(F.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(F.flatten(self.avgpool(x), 1))


class InvertedResidual(M.Module):
    def __init__(self, inp, oup, stride, expand_ratio):
        super().__init__()
        hidden = int(round(inp * expand_ratio))
        self.use_res_connect = stride == 1 and inp == oup
        layers = []
        if expand_ratio != 1:
            layers += [M.Conv2d(inp, hidden, 1, bias=False), M.BatchNorm2d(hidden), ReLU6()]
        layers += [M.Conv2d(hidden, hidden, 3, stride, 1, groups=hidden, bias=False),
                   M.BatchNorm2d(hidden), ReLU6(),
                   M.Conv2d(hidden, oup, 1, bias=False), M.BatchNorm2d(oup)]
        self.conv = M.Sequential(*layers)

    def forward(self, x):
        return x + self.conv(x) if self.use_res_connect else self.conv(x)


class ReLU6(M.Module):
    def forward(self, x):
        return F.clip(x, 0, 6)


class MobileNetV2(M.Module):
    def __init__(self, num_classes=1000, width_mult=1.0):
        super().__init__()
        settings = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                    (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]
        in_c = int(32 * width_mult)
        self.last_channel = int(1280 * max(1.0, width_mult))
        features = [M.Conv2d(3, in_c, 3, 2, 1, bias=False), M.BatchNorm2d(in_c), ReLU6()]
        for t, c, n, s in settings:
            out_c = int(c * width_mult)
            for i in range(n):
                features.append(InvertedResidual(in_c, out_c, s if i == 0 else 1, t))
                in_c = out_c
        features += [M.Conv2d(in_c, self.last_channel, 1, bias=False),
                     M.BatchNorm2d(self.last_channel), ReLU6()]
        self.features = M.Sequential(*features)
        self.classifier = M.Sequential(M.Dropout(0.2), M.Linear(self.last_channel, num_classes))

    def forward(self, x):
        x = self.features(x)
        return self.classifier(F.mean(x, axis=(2, 3)))


class EncoderBlock(M.Module):
    """Post-norm transformer encoder block (BERT/ViT style) with its own attention."""

    def __init__(self, hidden=768, heads=12, ffn=3072, dropout=0.1):
        super().__init__()
        self.heads, self.head_dim = heads, hidden // heads
        self.qkv = M.Linear(hidden, 3 * hidden)
        self.proj = M.Linear(hidden, hidden)
        self.norm1 = M.LayerNorm(hidden)
        self.fc1 = M.Linear(hidden, ffn)
        self.fc2 = M.Linear(ffn, hidden)
        self.norm2 = M.LayerNorm(hidden)
        self.drop = M.Dropout(dropout)

    def forward(self, x):
        b, s, h = x.shape
        qkv = self.qkv(x).reshape(b, s, 3, self.heads, self.head_dim).transpose(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        att = F.softmax(F.matmul(q, k, transpose_b=True) / math.sqrt(self.head_dim), axis=-1)
        ctx = F.matmul(self.drop(att), v).transpose(0, 2, 1, 3).reshape(b, s, h)
        x = self.norm1(x + self.drop(self.proj(ctx)))
        return self.norm2(x + self.drop(self.fc2(F.gelu(self.fc1(x)))))


class TinyBert(M.Module):
    """Embedding + positions + one encoder block + pooled classifier (int32 token ids)."""

    def __init__(self, vocab=100, seq=16, hidden=64, heads=4):
        super().__init__()
        self.tok = M.Embedding(vocab, hidden)
        self.pos = M.Embedding(seq, hidden)
        self.block = EncoderBlock(hidden, heads, hidden * 4)
        self.head = M.Linear(hidden, 2)

    def forward(self, ids):
        positions = F.arange(ids.shape[1], dtype="int32")
        x = self.tok(ids) + F.expand_dims(self.pos(positions), 0)
        x = self.block(x)
        return self.head(x[:, 0])


def randomize_bn(net, rng):
    for m in net.modules():
        if isinstance(m, M.BatchNorm2d):
            shape = m.running_mean.shape
            m.running_mean._set_value(rng.normal(size=shape) * 0.1)
            m.running_var._set_value(rng.uniform(0.5, 1.5, size=shape))
            m.weight._set_value(rng.uniform(0.5, 1.5, size=shape))
            m.bias._set_value(rng.normal(size=shape) * 0.1)
    return net


__all__ = ["ResNet18", "MobileNetV2", "EncoderBlock", "TinyBert", "randomize_bn", "np"]
