"""DeepLabV3+ as MegEngine's segmentation zoo writes it (official/vision/segmentation/
models/deeplabv3plus.py): a ResNet with dilated last stage, ASPP (dilated 3x3 branches and
global pooling upsampled by interpolate), decoder concatenating res2, bilinear upsampling to
the input size. `channels` scales ASPP/decoder widths (256 in the zoo)."""
import megtrace.functional as F
import megtrace.module as M

from .resnet import resnet_bottleneck_tiny


def _conv_bn_relu(in_channels, out_channels, kernel, padding=0, dilation=1):
    return M.Sequential(M.Conv2d(in_channels, out_channels, kernel, 1, padding=padding,
                                 dilation=dilation, bias=False),
                        M.BatchNorm2d(out_channels), M.ReLU())


class ASPP(M.Module):
    def __init__(self, in_channels, out_channels, dr=1):
        super().__init__()
        self.conv1 = _conv_bn_relu(in_channels, out_channels, 1, 0, dr)
        self.conv2 = _conv_bn_relu(in_channels, out_channels, 3, 6 * dr, 6 * dr)
        self.conv3 = _conv_bn_relu(in_channels, out_channels, 3, 12 * dr, 12 * dr)
        self.conv4 = _conv_bn_relu(in_channels, out_channels, 3, 18 * dr, 18 * dr)
        self.conv_gp = _conv_bn_relu(in_channels, out_channels, 1)
        self.conv_out = _conv_bn_relu(out_channels * 5, out_channels, 1)

    def forward(self, x):
        conv1 = self.conv1(x)
        conv31 = self.conv2(x)
        conv32 = self.conv3(x)
        conv33 = self.conv4(x)
        gp = F.mean(x, [2, 3], True)
        gp = self.conv_gp(gp)
        gp = F.nn.interpolate(gp, x.shape[2:])
        out = F.concat([conv1, conv31, conv32, conv33, gp], axis=1)
        return self.conv_out(out)


class DeepLabV3Plus(M.Module):
    def __init__(self, num_classes=5, channels=16, low_level=16):
        super().__init__()
        self.output_stride = 16
        self.num_classes = num_classes
        backbone = resnet_bottleneck_tiny(base=4,
                                          replace_stride_with_dilation=[False, False, True])
        self.aspp = ASPP(in_channels=backbone.fc.weight.shape[1], out_channels=channels,
                         dr=16 // self.output_stride)
        self.dropout = M.Dropout(0.5)
        self.upstage1 = _conv_bn_relu(low_level, 6, 1)
        self.upstage2 = M.Sequential(
            M.Conv2d(channels + 6, channels, 3, 1, padding=1, bias=False),
            M.BatchNorm2d(channels), M.ReLU(), M.Dropout(0.5),
            M.Conv2d(channels, channels, 3, 1, padding=1, bias=False),
            M.BatchNorm2d(channels), M.ReLU(), M.Dropout(0.1))
        self.conv_out = M.Conv2d(channels, self.num_classes, 1, 1, padding=0)
        for m in self.modules():
            if isinstance(m, M.Conv2d):
                M.init.msra_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, M.BatchNorm2d):
                M.init.ones_(m.weight)
                M.init.zeros_(m.bias)
        self.backbone = backbone
        del self.backbone.fc

    def forward(self, x):
        layers = self.backbone.extract_features(x)
        up0 = self.aspp(layers["res5"])
        up0 = self.dropout(up0)
        up0 = F.nn.interpolate(up0, layers["res2"].shape[2:])
        up1 = self.upstage1(layers["res2"])
        up1 = F.concat([up0, up1], 1)
        up2 = self.upstage2(up1)
        out = self.conv_out(up2)
        return F.nn.interpolate(out, x.shape[2:])
