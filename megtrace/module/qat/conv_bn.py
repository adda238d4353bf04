"""QAT fused conv + BatchNorm modules: the BN is folded into the convolution's weight
(and, out of training, its bias) before fake quantization, as MegEngine does. In training
the approximate folding runs the BN on the un-scaled convolution output, so its batch
statistics and running averages update as usual."""
from __future__ import annotations

from ...functional import ones, relu, sqrt, zeros
from .. import conv_bn as Float
from .module import QATModule


def batch_mean_var(inp):
    """Per-channel mean and biased variance over axes (0, 2, 3), from sums."""
    sum1 = inp.sum(axis=0, keepdims=True).sum(axis=2, keepdims=True).sum(axis=3, keepdims=True)
    sq = inp ** 2
    sum2 = sq.sum(axis=0, keepdims=True).sum(axis=2, keepdims=True).sum(axis=3, keepdims=True)
    reduce_size = inp.size / inp.shape[1]
    mean = sum1 / reduce_size
    return mean, (sum2 - sum1 ** 2 / reduce_size) / reduce_size


def update_running_stats(bn, bn_mean, bn_var, num_elements_per_channel):
    bn_mean = bn_mean.detach()
    bn_var = bn_var.detach() * num_elements_per_channel / (num_elements_per_channel - 1)
    factor = 1 - bn.momentum
    bn.running_mean *= bn.momentum
    bn.running_mean += factor * bn_mean
    bn.running_var *= bn.momentum
    bn.running_var += factor * bn_var


def bn_affine(bn, shape):
    """(gamma, beta) of `bn` reshaped to `shape` (ones/zeros when not affine)."""
    gamma = bn.weight if bn.weight is not None else ones((bn.num_features), dtype="float32")
    beta = bn.bias if bn.bias is not None else zeros((bn.num_features), dtype="float32")
    return gamma.reshape(*shape), beta.reshape(*shape)


class _FoldedBn(QATModule):
    """What conv+BN and conv_transpose+BN share: the BN folded into the wrapped
    convolution's weight and bias (`_conv()`, `_scaled_weight`, `_conv_bias` and
    `_run_conv` say how for each kind of convolution)."""

    def get_batch_mean_var(self, inp):
        return batch_mean_var(inp)

    def update_running_mean_and_running_var(self, bn_mean, bn_var, num_elements_per_channel):
        update_running_stats(self.bn, bn_mean, bn_var, num_elements_per_channel)

    def _conv_bias(self):
        conv = self._conv()
        return conv.bias if conv.bias is not None else zeros(conv._infer_bias_shape(),
                                                             dtype="float32")

    def fold_weight_bias(self, bn_mean, bn_var):
        """Fake-quantized folded weight and float folded bias for these statistics."""
        gamma, beta = bn_affine(self.bn, (1, -1, 1, 1))
        if bn_mean is None:
            bn_mean = zeros((1, self.bn.num_features, 1, 1), dtype="float32")
        if bn_var is None:
            bn_var = ones((1, self.bn.num_features, 1, 1), dtype="float32")
        bn_istd = 1.0 / sqrt(bn_var + self.bn.eps)
        scale_factor = gamma * bn_istd
        w_fold = self.apply_quant_weight(self._scaled_weight(scale_factor))
        b_fold = beta + gamma * (self._conv_bias() - bn_mean) * bn_istd
        return w_fold, b_fold

    def _folded_forward(self, inp, approx: bool):
        """The convolution on the folded, fake-quantized weight; in training with
        `approx`, the BN then runs on the output scaled back (batch statistics)."""
        conv = self._conv()
        if self.training and not approx:
            out = conv(inp)
            bn_mean, bn_var = self.get_batch_mean_var(out)
            self.update_running_mean_and_running_var(bn_mean, bn_var,
                                                     out.size / out.shape[1])
        else:
            bn_mean, bn_var = self.bn.running_mean, self.bn.running_var
        gamma, beta = bn_affine(self.bn, (1, -1, 1, 1))
        bn_istd = 1.0 / sqrt(bn_var + self.bn.eps)
        scale_factor = gamma * bn_istd
        w_fold = self._scaled_weight(scale_factor)
        b_fold = None
        if not (self.training and approx):
            b_fold = beta + gamma * (self._conv_bias() - bn_mean) * bn_istd
        w_qat = self.apply_quant_weight(w_fold)
        b_qat = self.apply_quant_bias(b_fold, inp, w_qat)
        out = self._run_conv(inp, w_qat, b_qat)
        if not (self.training and approx):
            return out
        orig = out / scale_factor.reshape(1, -1, 1, 1)
        if conv.bias is not None:
            orig = orig + conv.bias
        return self.bn(orig)


class _ConvBnActivation2d(Float._ConvBnActivation2d, _FoldedBn):
    def _conv(self):
        return self.conv

    def _scaled_weight(self, scale_factor):
        if self.conv.groups == 1:
            return self.conv.weight * scale_factor.reshape(-1, 1, 1, 1)
        return self.conv.weight * scale_factor.reshape(self.conv.groups, -1, 1, 1, 1)

    def _run_conv(self, inp, weight, bias):
        return self.conv.calc_conv(inp, weight, bias)

    def calc_conv_bn_qat(self, inp, approx=True):
        return self._folded_forward(inp, approx)

    @classmethod
    def from_float_module(cls, float_module):
        c = float_module.conv
        qat_module = cls(c.in_channels, c.out_channels, c.kernel_size, c.stride, c.padding,
                         c.dilation, c.groups, c.bias is not None, c.conv_mode,
                         c.compute_mode, padding_mode=c.padding_mode, name=float_module.name)
        qat_module.conv.weight = c.weight
        qat_module.conv.bias = c.bias
        qat_module.bn = float_module.bn
        return qat_module


class ConvBn2d(_ConvBnActivation2d):
    def forward(self, inp):
        return self.apply_quant_activation(self.calc_conv_bn_qat(inp))


class ConvBnRelu2d(_ConvBnActivation2d):
    def forward(self, inp):
        return self.apply_quant_activation(relu(self.calc_conv_bn_qat(inp)))


class _ConvTransposeBnActivation2d(Float._ConvTransposeBnActivation2d, _FoldedBn):
    def _conv(self):
        return self.conv_transpose2d

    def _scaled_weight(self, scale_factor):
        ct = self.conv_transpose2d
        if ct.groups == 1:
            return ct.weight * scale_factor.reshape(1, -1, 1, 1)
        return ct.weight * scale_factor.reshape(ct.groups, 1, -1, 1, 1)

    def _run_conv(self, inp, weight, bias):
        return self.conv_transpose2d.calc_conv_transpose2d(inp, weight, bias)

    def calc_conv_transpose2d_bn_qat(self, inp, approx=True):
        return self._folded_forward(inp, approx)

    @classmethod
    def from_float_module(cls, float_module):
        c = float_module.conv_transpose2d
        qat_module = cls(c.in_channels, c.out_channels, c.kernel_size, c.stride, c.padding,
                         c.output_padding, c.dilation, c.groups, c.bias is not None,
                         c.conv_mode, c.compute_mode, name=float_module.name)
        qat_module.conv_transpose2d.weight = c.weight
        qat_module.conv_transpose2d.bias = c.bias
        qat_module.bn = float_module.bn
        return qat_module


class ConvTransposeBn2d(_ConvTransposeBnActivation2d):
    def forward(self, inp):
        return self.apply_quant_activation(self.calc_conv_transpose2d_bn_qat(inp))


class ConvTransposeBnRelu2d(_ConvTransposeBnActivation2d):
    def forward(self, inp):
        return self.apply_quant_activation(relu(self.calc_conv_transpose2d_bn_qat(inp)))
