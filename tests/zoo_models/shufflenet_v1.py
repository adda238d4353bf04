"""ShuffleNetV1 in the quantization-ready form of MegEngine's model zoo (official/
quantization/models/shufflenet.py): fused ConvBnRelu2d/ConvBn2d modules, grouped 1x1
convolutions with a channel shuffle between them, an Elemwise("FUSE_ADD_RELU") residual
join (a strided 1x1 ConvBn projection when downsampling) and Quant/DequantStub around the
features. Restated with three groups and small widths for tests."""
import megtrace.functional as F
import megtrace.module as M


class ShuffleUnit(M.Module):
    def __init__(self, cin, cout, groups, stride, group_the_entry=True):
        super().__init__()
        mid = cout // 4
        self.groups, self.stride = groups, stride
        self.squeeze = M.ConvBnRelu2d(cin, mid, 1, groups=groups if group_the_entry else 1,
                                      bias=False)
        self.depthwise = M.ConvBn2d(mid, mid, 3, stride, 1, groups=mid, bias=False)
        self.expand = M.ConvBn2d(mid, cout, 1, groups=groups, bias=False)
        self.join = M.Elemwise("FUSE_ADD_RELU")
        self.shortcut = M.ConvBn2d(cin, cout, 1, 2, bias=False) if stride == 2 else None

    def shuffle(self, x):
        n, c, h, w = x.shape
        x = x.reshape(n, c // self.groups, self.groups, h, w)
        return F.transpose(x, (0, 2, 1, 3, 4)).reshape(n, c, h, w)

    def forward(self, x):
        y = self.depthwise(self.squeeze(x))
        if self.groups > 1:
            y = self.shuffle(y)
        y = self.expand(y)
        skip = x if self.shortcut is None else self.shortcut(x)
        return self.join(skip, y)


class ShuffleNetV1(M.Module):
    def __init__(self, num_classes=10, groups=3, widths=(12, 48, 96, 192), repeats=(1, 2, 1)):
        super().__init__()
        self.stem = M.ConvBnRelu2d(3, widths[0], 3, 2, 1, bias=False)
        self.pool = M.MaxPool2d(3, 2, 1)
        units, cin = [], widths[0]
        for stage, (cout, n) in enumerate(zip(widths[1:], repeats)):
            for i in range(n):
                units.append(ShuffleUnit(cin, cout, groups, 2 if i == 0 else 1,
                                         group_the_entry=not (stage == 0 and i == 0)))
                cin = cout
        self.units = M.Sequential(*units)
        self.quant, self.dequant = M.QuantStub(), M.DequantStub()
        self.classifier = M.Linear(cin, num_classes, bias=False)

    def forward(self, x):
        x = self.units(self.pool(self.stem(self.quant(x))))
        x = F.flatten(F.adaptive_avg_pool2d(x, 1), 1)
        return self.classifier(self.dequant(x))
