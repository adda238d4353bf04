"""QAT fused Linear + BatchNorm1d modules (the BN folded into the linear's weight and,
out of training, its bias, as in MegEngine)."""
from __future__ import annotations

from ...functional import ones, relu, sqrt, zeros
from .. import conv_bn as Float
from .conv_bn import batch_mean_var, bn_affine, update_running_stats
from .module import QATModule


class _LinearBnActivation1d(Float._LinearBnActivation1d, QATModule):
    def get_batch_mean_var(self, inp):
        return batch_mean_var(inp)

    def _linear_bias(self, like):
        bias = self.linear.bias
        return bias if bias is not None else zeros(like.shape, dtype="float32")

    def fold_weight_bias(self, bn_mean, bn_var):
        gamma, beta = bn_affine(self.bn, (-1,))
        n = self.bn.num_features
        bn_mean = (bn_mean if bn_mean is not None else zeros((n,), dtype="float32")).reshape(-1)
        bn_var = (bn_var if bn_var is not None else ones((n,), dtype="float32")).reshape(-1)
        bn_istd = 1.0 / sqrt(bn_var + self.bn.eps)
        scale_factor = gamma * bn_istd
        w_fold = self.apply_quant_weight(self.linear.weight * scale_factor.reshape(-1, 1))
        b_fold = beta + gamma * (self._linear_bias(beta) - bn_mean) * bn_istd
        return w_fold, b_fold

    def update_running_mean_and_running_var(self, bn_mean, bn_var, num_elements_per_channel):
        update_running_stats(self.bn, bn_mean, bn_var, num_elements_per_channel)

    def calc_linear_bn_qat(self, inp, approx=True):
        if self.training and not approx:
            linear = self.linear(inp)
            bn_mean, bn_var = self.get_batch_mean_var(linear)
            self.update_running_mean_and_running_var(bn_mean, bn_var,
                                                     linear.size / linear.shape[1])
        # MegEngine folds with the running statistics in every case
        bn_mean = self.bn.running_mean.reshape(-1)
        bn_var = self.bn.running_var.reshape(-1)
        gamma, beta = bn_affine(self.bn, (-1,))
        bn_istd = 1.0 / sqrt(bn_var + self.bn.eps)
        scale_factor = gamma * bn_istd
        w_fold = self.linear.weight * scale_factor.reshape(-1, 1)
        b_fold = None
        if not (self.training and approx):
            b_fold = beta + gamma * (self._linear_bias(beta) - bn_mean) * bn_istd
        w_qat = self.apply_quant_weight(w_fold)
        b_qat = self.apply_quant_bias(b_fold, inp, w_qat)
        linear = self.linear.calc_linear(inp, w_qat, b_qat)
        if not (self.training and approx):
            return linear
        orig = linear / scale_factor.reshape(1, -1)
        if self.linear.bias is not None:
            orig = orig + self.linear.bias.reshape(1, -1)
        return self.bn(orig)

    @classmethod
    def from_float_module(cls, float_module):
        lin, bn = float_module.linear, float_module.bn
        qat_module = cls(lin.in_features, lin.out_features, lin.bias is not None,
                         lin.compute_mode, bn.eps, bn.momentum, bn.affine,
                         bn.track_running_stats, name=float_module.name)
        qat_module.linear.weight = lin.weight
        qat_module.linear.bias = lin.bias
        qat_module.bn = bn
        return qat_module


class LinearBn1d(_LinearBnActivation1d):
    def forward(self, inp):
        return self.apply_quant_activation(self.calc_linear_bn_qat(inp))


class LinearBnRelu1d(_LinearBnActivation1d):
    def forward(self, inp):
        return self.apply_quant_activation(relu(self.calc_linear_bn_qat(inp)))
