"""A RetinaNet-style detector as MegEngine's detection zoo builds one (official/vision/
detection: models/retinanet.py, layers/det/{fpn,anchor,box_head,box_utils}.py): ResNet
bottom-up, FPN with bilinear top-down interpolation and P6/P7, a box head shared across
levels, anchors generated from the feature-map shapes, and box decoding/clipping.
The zoo decodes one image at a time (its inference asserts batch 1); here the decoding is
batched so that the same model also runs at batch 8."""
import math

import numpy as np

import megtrace.functional as F
import megtrace.module as M
from megtrace import tensor

from .resnet import resnet_tiny


def meshgrid(x, y):
    assert len(x.shape) == 1
    assert len(y.shape) == 1
    mesh_shape = (y.shape[0], x.shape[0])
    mesh_x = F.broadcast_to(x, mesh_shape)
    mesh_y = F.broadcast_to(y.reshape(-1, 1), mesh_shape)
    return mesh_x, mesh_y


def create_anchor_grid(featmap_size, offsets, stride, device):
    step_x, step_y = featmap_size
    shift = offsets * stride
    grid_x = F.arange(shift, step_x * stride + shift, step=stride, device=device)
    grid_y = F.arange(shift, step_y * stride + shift, step=stride, device=device)
    grids_x, grids_y = meshgrid(grid_y, grid_x)
    return grids_x.reshape(-1), grids_y.reshape(-1)


class AnchorBoxGenerator:
    def __init__(self, anchor_scales, anchor_ratios, strides, offset=0.5):
        self.strides = strides
        self.offset = offset
        self.num_features = len(strides)
        if len(anchor_scales) == 1:
            anchor_scales = anchor_scales * self.num_features
        if len(anchor_ratios) == 1:
            anchor_ratios = anchor_ratios * self.num_features
        self.base_anchors = [tensor(self.generate_base_anchors(s, r))
                             for s, r in zip(anchor_scales, anchor_ratios)]

    def generate_base_anchors(self, scales, ratios):
        base_anchors = []
        for area in [s ** 2.0 for s in scales]:
            for ratio in ratios:
                w = math.sqrt(area / ratio)
                h = ratio * w
                base_anchors.append([-w / 2.0, -h / 2.0, w / 2.0, h / 2.0])
        return base_anchors

    def __call__(self, featmaps):
        sizes = [fmap.shape[-2:] for fmap in featmaps]
        all_anchors = []
        for size, stride, base_anchor in zip(sizes, self.strides, self.base_anchors):
            grid_x, grid_y = create_anchor_grid(size, self.offset, stride, featmaps[0].device)
            grids = F.stack([grid_x, grid_y, grid_x, grid_y], axis=1)
            all_anchors.append((F.expand_dims(grids, axis=1)
                                + F.expand_dims(base_anchor, axis=0)).reshape(-1, 4))
        return all_anchors


class FPN(M.Module):
    def __init__(self, bottom_up, in_features, out_channels, strides, channels):
        super().__init__()
        self.lateral_convs, self.output_convs = [], []
        for idx, in_channels in enumerate(channels):
            lateral_conv = M.Conv2d(in_channels, out_channels, kernel_size=1)
            output_conv = M.Conv2d(out_channels, out_channels, kernel_size=3, stride=1,
                                   padding=1)
            M.init.msra_normal_(lateral_conv.weight, mode="fan_in")
            M.init.msra_normal_(output_conv.weight, mode="fan_in")
            M.init.fill_(lateral_conv.bias, 0)
            M.init.fill_(output_conv.bias, 0)
            stage = int(math.log2(strides[idx]))
            setattr(self, "fpn_lateral{}".format(stage), lateral_conv)
            setattr(self, "fpn_output{}".format(stage), output_conv)
            self.lateral_convs.insert(0, lateral_conv)
            self.output_convs.insert(0, output_conv)
        self.top_block = LastLevelP6P7(channels[-1], out_channels)
        self.in_features = in_features
        self.bottom_up = bottom_up

    def forward(self, x):
        bottom_up_features = self.bottom_up.extract_features(x)
        x = [bottom_up_features[f] for f in self.in_features[::-1]]
        results = []
        prev_features = self.lateral_convs[0](x[0])
        results.append(self.output_convs[0](prev_features))
        for features, lateral_conv, output_conv in zip(x[1:], self.lateral_convs[1:],
                                                       self.output_convs[1:]):
            top_down_features = F.nn.interpolate(prev_features, features.shape[2:],
                                                 mode="BILINEAR")
            lateral_features = lateral_conv(features)
            prev_features = lateral_features + top_down_features
            results.insert(0, output_conv(prev_features))
        results.extend(self.top_block(bottom_up_features["res5"]))
        return results


class LastLevelP6P7(M.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.p6 = M.Conv2d(in_channels, out_channels, 3, 2, 1)
        self.p7 = M.Conv2d(out_channels, out_channels, 3, 2, 1)

    def forward(self, x):
        p6 = self.p6(x)
        p7 = self.p7(F.relu(p6))
        return [p6, p7]


class BoxHead(M.Module):
    """Classification and box subnets shared by every FPN level (layers/det/box_head.py)."""

    def __init__(self, in_channels, num_classes, num_anchors, num_convs=2, prior_prob=0.01):
        super().__init__()
        cls_subnet, bbox_subnet = [], []
        for _ in range(num_convs):
            cls_subnet += [M.Conv2d(in_channels, in_channels, 3, 1, 1), M.ReLU()]
            bbox_subnet += [M.Conv2d(in_channels, in_channels, 3, 1, 1), M.ReLU()]
        self.cls_subnet = M.Sequential(*cls_subnet)
        self.bbox_subnet = M.Sequential(*bbox_subnet)
        self.cls_score = M.Conv2d(in_channels, num_anchors * num_classes, 3, 1, 1)
        self.bbox_pred = M.Conv2d(in_channels, num_anchors * 4, 3, 1, 1)
        for modules in [self.cls_subnet, self.bbox_subnet, self.cls_score, self.bbox_pred]:
            for layer in modules.modules():
                if isinstance(layer, M.Conv2d):
                    M.init.normal_(layer.weight, mean=0, std=0.01)
                    M.init.fill_(layer.bias, 0)
        bias_value = -math.log((1 - prior_prob) / prior_prob)
        M.init.fill_(self.cls_score.bias, bias_value)

    def forward(self, features):
        logits, offsets = [], []
        for feature in features:
            logits.append(self.cls_score(self.cls_subnet(feature)))
            offsets.append(self.bbox_pred(self.bbox_subnet(feature)))
        return logits, offsets


def decode(anchors, deltas, reg_mean, reg_std):
    """BoxCoder.decode for a batch: anchors (A, 4), deltas (N, A, 4) -> boxes (N, A, 4)."""
    deltas = deltas * reg_std + reg_mean
    anchor_width = anchors[:, 2] - anchors[:, 0]
    anchor_height = anchors[:, 3] - anchors[:, 1]
    anchor_ctr_x = anchors[:, 0] + 0.5 * anchor_width
    anchor_ctr_y = anchors[:, 1] + 0.5 * anchor_height
    pred_ctr_x = anchor_ctr_x + deltas[:, :, 0] * anchor_width
    pred_ctr_y = anchor_ctr_y + deltas[:, :, 1] * anchor_height
    pred_width = anchor_width * F.exp(deltas[:, :, 2])
    pred_height = anchor_height * F.exp(deltas[:, :, 3])
    return F.stack([pred_ctr_x - 0.5 * pred_width, pred_ctr_y - 0.5 * pred_height,
                    pred_ctr_x + 0.5 * pred_width, pred_ctr_y + 0.5 * pred_height], axis=2)


class RetinaNet(M.Module):
    def __init__(self, num_classes=4, fpn_channels=16, image_size=64,
                 img_mean=(103.530, 116.280, 123.675), img_std=(57.375, 57.120, 58.395)):
        super().__init__()
        self.num_classes = num_classes
        self.image_size = image_size
        self.img_mean = np.array(img_mean, dtype="float32")[None, :, None, None]
        self.img_std = np.array(img_std, dtype="float32")[None, :, None, None]
        self.reg_mean = np.zeros(4, "float32")
        self.reg_std = np.array([0.1, 0.1, 0.2, 0.2], "float32")
        strides = [8, 16, 32, 64, 128]
        self.anchor_generator = AnchorBoxGenerator(
            anchor_scales=[[s * 4 * 2 ** (i / 3) for i in range(3)] for s in strides],
            anchor_ratios=[[0.5, 1, 2]], strides=strides)
        bottom_up = resnet_tiny()
        del bottom_up.fc
        self.backbone = FPN(bottom_up, ["res3", "res4", "res5"], fpn_channels,
                            strides=[8, 16, 32], channels=[16, 32, 64])
        self.head = BoxHead(fpn_channels, num_classes, num_anchors=9)

    def forward(self, image):
        image = (image - self.img_mean) / self.img_std
        features = self.backbone(image)
        box_logits, box_offsets = self.head(features)
        box_logits_list = [_.transpose(0, 2, 3, 1).reshape(image.shape[0], -1, self.num_classes)
                           for _ in box_logits]
        box_offsets_list = [_.transpose(0, 2, 3, 1).reshape(image.shape[0], -1, 4)
                            for _ in box_offsets]
        anchors = F.concat(self.anchor_generator(features), axis=0)
        all_level_box_logits = F.concat(box_logits_list, axis=1)
        all_level_box_offsets = F.concat(box_offsets_list, axis=1)
        pred_boxes = decode(anchors, all_level_box_offsets, self.reg_mean, self.reg_std)
        clipped_boxes = F.clip(pred_boxes, lower=0, upper=self.image_size)
        return F.sigmoid(all_level_box_logits), clipped_boxes
