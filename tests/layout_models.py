"""Small models for optimize_for_inference's layout options where ResNet-18, MobileNetV2 and
the conv net say nothing: channel counts that are not multiples of the pack size (MegEngine's
PaddingChannelPass) and the blocked AdaptivePooling / Resize / Concat. Written with
MegEngine's API (only `import megengine` reads `import megtrace`), so the same classes run
under the real MegEngine (tests/data/make_megengine_layout_models.py)."""
import megtrace.functional as F
import megtrace.module as M


class PadNet(M.Module):
    """Odd channel counts everywhere: a hybrid first convolution (3 -> 6), a depthwise one,
    dense ones whose input and output counts get padded, an add of two padded tensors,
    max pooling, an add of a constant (its input is cut back to 10 channels), a
    grouped convolution (never padded) and a flatten."""

    def __init__(self):
        super().__init__()
        self.conv1 = M.Conv2d(3, 6, 3, padding=1)
        self.bn1 = M.BatchNorm2d(6)
        self.dw = M.Conv2d(6, 6, 3, padding=1, groups=6)
        self.conv2 = M.Conv2d(6, 10, 1, bias=False)
        self.bn2 = M.BatchNorm2d(10)
        self.conv3 = M.Conv2d(10, 10, 3, padding=1, bias=False)
        self.bn3 = M.BatchNorm2d(10)
        self.shift = M.Conv2d(10, 10, 1).bias
        self.group = M.Conv2d(10, 12, 3, padding=1, groups=2)
        self.fc = M.Linear(12 * 8 * 8, 5)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.dw(x))
        y = F.relu(self.bn2(self.conv2(x)))
        y = y + F.relu(self.bn3(self.conv3(y)))
        y = F.max_pool2d(y, 2) * 0.5 + self.shift
        y = self.group(y)
        return self.fc(F.flatten(y, 1))


class BlockNet(M.Module):
    """Channels multiples of 8 after the first convolution: adaptive pooling, a bilinear
    resize and a channel concat between blocked convolutions."""

    def __init__(self):
        super().__init__()
        self.conv1 = M.Conv2d(3, 16, 3, stride=2, padding=1)
        self.conv2 = M.Conv2d(16, 16, 3, padding=1)
        self.conv3 = M.Conv2d(32, 8, 1)
        self.fc = M.Linear(8 * 4 * 4, 5)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        a = F.adaptive_avg_pool2d(self.conv2(x), (4, 4))
        b = F.vision.interpolate(x, size=(4, 4), mode="bilinear")
        y = F.relu(self.conv3(F.concat([a, b], axis=1)))
        return self.fc(F.flatten(y, 1))


LAYOUT_MODELS = {"padnet": (PadNet, (1, 3, 16, 16)), "blocknet": (BlockNet, (1, 3, 16, 16))}
