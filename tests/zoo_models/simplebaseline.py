"""SimpleBaseline pose estimation as MegEngine's keypoint zoo writes it (official/vision/
keypoints/models/simplebaseline.py): ResNet features, a deconvolution head of
ConvTranspose2d + BatchNorm + ReLU stages, a 3x3 conv to keypoint heatmaps."""
import megtrace.module as M

from .resnet import resnet_tiny


class DeconvLayers(M.Module):
    def __init__(self, nf1, nf2s, kernels, num_layers, bias=True, norm=M.BatchNorm2d):
        super().__init__()
        _body = []
        for i in range(num_layers):
            kernel = kernels[i]
            padding = kernel // 3     # 0 for kernel 2, 1 for kernels 3 and 4
            _body += [M.ConvTranspose2d(nf1, nf2s[i], kernel, 2, padding, bias=bias),
                      norm(nf2s[i]), M.ReLU()]
            nf1 = nf2s[i]
        self.body = M.Sequential(*_body)

    def forward(self, x):
        return self.body(x)


class SimpleBaseline_Config:
    initial_deconv_channels = 64
    num_deconv_layers = 3
    deconv_channels = [16, 16, 16]
    deconv_kernel_sizes = [4, 4, 4]
    deconv_with_bias = False
    keypoint_num = 17
    backbone_pretrained = False


class SimpleBaseline(M.Module):
    def __init__(self, cfg=SimpleBaseline_Config()):
        super().__init__()
        norm = M.BatchNorm2d
        self.backbone = resnet_tiny(norm=norm)
        del self.backbone.fc
        self.cfg = cfg
        self.deconv_layers = DeconvLayers(cfg.initial_deconv_channels, cfg.deconv_channels,
                                          cfg.deconv_kernel_sizes, cfg.num_deconv_layers,
                                          cfg.deconv_with_bias, norm)
        self.last_layer = M.Conv2d(cfg.deconv_channels[-1], cfg.keypoint_num, 3, 1, 1)
        self.initialize_weights()

    def initialize_weights(self):
        for k, m in self.named_modules():
            if self.cfg.backbone_pretrained and ("backbone" in k):
                continue
            if isinstance(m, M.Conv2d):
                M.init.normal_(m.weight, std=0.001)
                for name, _ in m.named_parameters():
                    if name in ["bias"]:
                        M.init.zeros_(m.bias)
            if isinstance(m, M.ConvTranspose2d):
                M.init.normal_(m.weight, std=0.001)
                if self.cfg.deconv_with_bias:
                    M.init.zeros_(m.bias)
            if isinstance(m, M.BatchNorm2d):
                M.init.ones_(m.weight)
                M.init.zeros_(m.bias)

    def forward(self, x):
        f = self.backbone.extract_features(x)["res5"]
        f = self.deconv_layers(f)
        return self.last_layer(f)
