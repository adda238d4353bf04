"""ShuffleNetV2 as MegEngine's model zoo writes it (official/vision/classification/
shufflenet/model.py): channel shuffle by reshape/transpose, depthwise branches, concat.
`stage_out_channels`, `stage_repeats` and the final pool size scale it down for tests."""
import megtrace.functional as F
import megtrace.module as M


class ShuffleV2Block(M.Module):
    def __init__(self, inp, oup, mid_channels, *, ksize, stride):
        super().__init__()
        self.stride = stride
        assert stride in [1, 2]
        self.mid_channels = mid_channels
        self.ksize = ksize
        pad = ksize // 2
        self.pad = pad
        self.inp = inp
        outputs = oup - inp
        branch_main = [
            M.Conv2d(inp, mid_channels, 1, 1, 0, bias=False),
            M.BatchNorm2d(mid_channels),
            M.ReLU(),
            M.Conv2d(mid_channels, mid_channels, ksize, stride, pad, groups=mid_channels,
                     bias=False),
            M.BatchNorm2d(mid_channels),
            M.Conv2d(mid_channels, outputs, 1, 1, 0, bias=False),
            M.BatchNorm2d(outputs),
            M.ReLU(),
        ]
        self.branch_main = M.Sequential(*branch_main)
        if stride == 2:
            branch_proj = [
                M.Conv2d(inp, inp, ksize, stride, pad, groups=inp, bias=False),
                M.BatchNorm2d(inp),
                M.Conv2d(inp, inp, 1, 1, 0, bias=False),
                M.BatchNorm2d(inp),
                M.ReLU(),
            ]
            self.branch_proj = M.Sequential(*branch_proj)
        else:
            self.branch_proj = None

    def forward(self, old_x):
        if self.stride == 1:
            x_proj, x = self.channel_shuffle(old_x)
            return F.concat((x_proj, self.branch_main(x)), 1)
        elif self.stride == 2:
            x_proj = old_x
            x = old_x
            return F.concat((self.branch_proj(x_proj), self.branch_main(x)), 1)
        else:
            raise ValueError("use stride 1 or 2, current stride {}".format(self.stride))

    def channel_shuffle(self, x):
        batchsize, num_channels, height, width = x.shape
        x = x.reshape(batchsize * num_channels // 2, 2, height * width)
        x = F.transpose(x, (1, 0, 2))
        x = x.reshape(2, -1, num_channels // 2, height, width)
        return x[0], x[1]


class ShuffleNetV2(M.Module):
    def __init__(self, num_classes=1000, stage_out_channels=(-1, 24, 48, 96, 192, 1024),
                 stage_repeats=(4, 8, 4), pool=7):
        super().__init__()
        self.stage_repeats = list(stage_repeats)
        self.stage_out_channels = list(stage_out_channels)
        input_channel = self.stage_out_channels[1]
        self.first_conv = M.Sequential(
            M.Conv2d(3, input_channel, 3, 2, 1, bias=False), M.BatchNorm2d(input_channel),
            M.ReLU())
        self.maxpool = M.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.features = []
        for idxstage in range(len(self.stage_repeats)):
            numrepeat = self.stage_repeats[idxstage]
            output_channel = self.stage_out_channels[idxstage + 2]
            for i in range(numrepeat):
                if i == 0:
                    self.features.append(ShuffleV2Block(
                        input_channel, output_channel, mid_channels=output_channel // 2,
                        ksize=3, stride=2))
                else:
                    self.features.append(ShuffleV2Block(
                        input_channel // 2, output_channel, mid_channels=output_channel // 2,
                        ksize=3, stride=1))
                input_channel = output_channel
        self.features = M.Sequential(*self.features)
        self.conv_last = M.Sequential(
            M.Conv2d(input_channel, self.stage_out_channels[-1], 1, 1, 0, bias=False),
            M.BatchNorm2d(self.stage_out_channels[-1]),
            M.ReLU())
        self.globalpool = M.AvgPool2d(pool)
        self.classifier = M.Sequential(
            M.Linear(self.stage_out_channels[-1], num_classes, bias=False))
        self._initialize_weights()

    def forward(self, x):
        x = self.first_conv(x)
        x = self.maxpool(x)
        x = self.features(x)
        x = self.conv_last(x)
        x = self.globalpool(x)
        x = x.reshape(-1, self.stage_out_channels[-1])
        x = self.classifier(x)
        return x

    def _initialize_weights(self):
        for name, m in self.named_modules():
            if isinstance(m, M.Conv2d):
                if "first" in name:
                    M.init.normal_(m.weight, 0, 0.01)
                else:
                    M.init.normal_(m.weight, 0, 1.0 / m.weight.shape[1])
                if m.bias is not None:
                    M.init.fill_(m.bias, 0)
            elif isinstance(m, M.BatchNorm2d):
                M.init.fill_(m.weight, 1)
                if m.bias is not None:
                    M.init.fill_(m.bias, 0.0001)
                M.init.fill_(m.running_mean, 0)
            elif isinstance(m, M.Linear):
                M.init.normal_(m.weight, 0, 0.01)
                if m.bias is not None:
                    M.init.fill_(m.bias, 0)


def shufflenet_tiny(**kwargs):
    return ShuffleNetV2(**{"stage_out_channels": (-1, 8, 16, 32, 64, 128),
                           "stage_repeats": (2, 3, 2), "pool": 2, "num_classes": 10, **kwargs})
