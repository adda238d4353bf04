"""MobileNetV2 as MegEngine's model zoo writes it (official/quantization/models/
mobilenet_v2.py): fused float modules ConvBnRelu2d / ConvBn2d, M.Elemwise("ADD") for the
residual, QuantStub/DequantStub, depthwise convolutions. `last_channel`, `width_mult`
and the final pool size scale it down for tests (the zoo: 1280, 1.0, 7)."""
import megtrace.functional as F
import megtrace.module as M


def _make_divisible(v, divisor, min_value=None):
    if min_value is None:
        min_value = divisor
    new_v = max(min_value, int(v + divisor / 2) // divisor * divisor)
    if new_v < 0.9 * v:      # rounding down must not lose more than 10%
        new_v += divisor
    return new_v


class InvertedResidual(M.Module):
    def __init__(self, inp, oup, stride, expand_ratio):
        super().__init__()
        self.stride = stride
        assert stride in [1, 2]
        hidden_dim = int(round(inp * expand_ratio))
        self.use_res_connect = self.stride == 1 and inp == oup
        layers = []
        if expand_ratio != 1:
            layers.append(M.ConvBnRelu2d(inp, hidden_dim, kernel_size=1, bias=False))
        layers.extend([
            M.ConvBnRelu2d(hidden_dim, hidden_dim, kernel_size=3, padding=1, stride=stride,
                           groups=hidden_dim, bias=False),
            M.ConvBn2d(hidden_dim, oup, kernel_size=1, bias=False),
        ])
        self.conv = M.Sequential(*layers)
        self.add = M.Elemwise("ADD")

    def forward(self, x):
        if self.use_res_connect:
            return self.add(x, self.conv(x))
        return self.conv(x)


class MobileNetV2(M.Module):
    def __init__(self, num_classes=1000, width_mult=1.0, inverted_residual_setting=None,
                 round_nearest=8, last_channel=1280, pool=7):
        super().__init__()
        block = InvertedResidual
        input_channel = 32
        self.pool = pool
        if inverted_residual_setting is None:
            inverted_residual_setting = [
                [1, 16, 1, 1], [6, 24, 2, 2], [6, 32, 3, 2], [6, 64, 4, 2],
                [6, 96, 3, 1], [6, 160, 3, 2], [6, 320, 1, 1]]
        if len(inverted_residual_setting) == 0 or len(inverted_residual_setting[0]) != 4:
            raise ValueError("inverted_residual_setting should be non-empty "
                             "or a 4-element list, got {}".format(inverted_residual_setting))
        input_channel = _make_divisible(input_channel * width_mult, round_nearest)
        self.last_channel = _make_divisible(last_channel * max(1.0, width_mult), round_nearest)
        features = [M.ConvBnRelu2d(3, input_channel, kernel_size=3, padding=1, stride=2,
                                   bias=False)]
        for t, c, n, s in inverted_residual_setting:
            output_channel = _make_divisible(c * width_mult, round_nearest)
            for i in range(n):
                stride = s if i == 0 else 1
                features.append(block(input_channel, output_channel, stride, expand_ratio=t))
                input_channel = output_channel
        features.append(M.ConvBnRelu2d(input_channel, self.last_channel, kernel_size=1,
                                       bias=False))
        self.features = M.Sequential(*features)
        self.classifier = M.Sequential(M.Dropout(0.2), M.Linear(self.last_channel, num_classes))
        self.classifier.disable_quantize()
        self.quant = M.QuantStub()
        self.dequant = M.DequantStub()
        for m in self.modules():
            if isinstance(m, M.Conv2d):
                M.init.msra_normal_(m.weight, mode="fan_out")
                if m.bias is not None:
                    M.init.zeros_(m.bias)
            elif isinstance(m, M.BatchNorm2d):
                M.init.ones_(m.weight)
                M.init.zeros_(m.bias)
            elif isinstance(m, M.Linear):
                M.init.normal_(m.weight, 0, 0.01)
                M.init.zeros_(m.bias)

    def forward(self, x):
        x = self.quant(x)
        x = self.features(x)
        x = F.avg_pool2d(x, self.pool)
        x = F.flatten(x, 1)
        x = self.dequant(x)
        x = self.classifier(x)
        return x


def mobilenet_v2_tiny(**kwargs):
    return MobileNetV2(**{"width_mult": 0.25, "last_channel": 64, "pool": 2,
                          "num_classes": 10, **kwargs})
