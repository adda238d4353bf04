"""Observers: modules that watch the tensors flowing through them and derive the
quantization parameters (scale, zero point) from the range they saw (MegEngine's
megengine.quantization.observer)."""
from __future__ import annotations

import math
from abc import abstractmethod
from copy import deepcopy
from typing import Union

import numpy as np

from .. import functional as F
from ..core.tensor.dtype import QuantDtypeMeta, _builtin_quant_dtypes
from ..logger import get_logger
from ..module import Module
from ..tensor import Tensor
from .utils import QParams, QParamsModuleMixin, QuantMode, create_qparams

logger = get_logger(__name__)


def _dtype_meta(dtype: Union[str, QuantDtypeMeta]) -> QuantDtypeMeta:
    if isinstance(dtype, str):
        if dtype not in _builtin_quant_dtypes:
            raise ValueError("unknown dtype: {}, only support {}".format(
                dtype, _builtin_quant_dtypes.keys()))
        return _builtin_quant_dtypes[dtype]
    return dtype


def _drop_narrow_range(kwargs: dict) -> None:
    if "narrow_range" in kwargs:
        del kwargs["narrow_range"]
        logger.warning("FakeQuantize currently has no narrow_range param so it is ignored here",
                       exc_info=DeprecationWarning)


class Observer(Module, QParamsModuleMixin):
    """Base class: records statistics of its input for quantization to `dtype`."""

    def __init__(self, dtype: Union[str, QuantDtypeMeta], **kwargs):
        super().__init__()
        dtype = _dtype_meta(dtype)
        _drop_narrow_range(kwargs)
        self.dtype = dtype
        self.qmin = dtype.qmin
        self.qmax = dtype.qmax
        self.enabled = True

    def enable(self):
        self.enabled = True

    def disable(self):
        self.enabled = False

    def train(self, mode: bool = True, recursive: bool = True):
        super().train(mode, recursive)
        if mode:
            self.enable()
        else:
            self.disable()
        return self

    @abstractmethod
    def forward(self, x):
        pass


class MinMaxObserver(Observer):
    """Records the running min and max of its input; scale from that range."""

    def __init__(self, mode: QuantMode = QuantMode.SYMMERTIC, eps: float = 0.00001,
                 dtype: Union[str, QuantDtypeMeta] = "qint8", **kwargs):
        super().__init__(dtype, **kwargs)
        self.mode = mode
        self.min_val = Tensor(np.finfo(np.float32).max, dtype=np.float32)
        self.max_val = Tensor(np.finfo(np.float32).min, dtype=np.float32)
        self.scale_limit = eps

    def _calculate_qparams(self, inp_min_val, inp_max_val):
        min_val = F.minimum(0.0, inp_min_val)
        max_val = F.maximum(0.0, inp_max_val)
        if self.mode == QuantMode.SYMMERTIC:
            symmetric_max_vals = F.maximum(-min_val, max_val)
            scale = F.maximum(symmetric_max_vals / ((self.qmax - self.qmin) / 2),
                              self.scale_limit)
            zero_point = None
        else:
            scale = F.maximum((max_val - min_val) / (self.qmax - self.qmin), self.scale_limit)
            zero_point = self.qmin - F.round(min_val / scale)
        return create_qparams(self.mode, self.dtype, scale=scale, zero_point=zero_point)

    def get_qparams(self):
        return self._calculate_qparams(self.min_val, self.max_val)

    def forward(self, x_orig):
        if self.enabled:
            x = x_orig.detach()
            self.min_val[...] = F.minimum(self.min_val, x.min())
            self.max_val[...] = F.maximum(self.max_val, x.max())
        return x_orig


class SyncMinMaxObserver(MinMaxObserver):
    """MinMaxObserver reducing min/max over the process group (one process in megtrace)."""


class ExponentialMovingAverageObserver(MinMaxObserver):
    """MinMaxObserver whose min/max are exponential moving averages (the first batch
    sets them)."""

    def __init__(self, momentum: float = 0.9, mode: QuantMode = QuantMode.SYMMERTIC,
                 eps: float = 0.00001, dtype: Union[str, QuantDtypeMeta] = "qint8",
                 **kwargs):
        super().__init__(mode, eps, dtype, **kwargs)
        self.momentum = Tensor(momentum, dtype="float32")
        self.runtime_momentum = Tensor(0.0)

    def set_momentum(self, momentum):
        self.momentum = Tensor(momentum, dtype="float32")

    def forward(self, x_orig):
        if self.enabled:
            x = x_orig.detach()
            m = self.runtime_momentum
            self.min_val[...] = self.min_val * m + (1 - m) * x.min()
            self.max_val[...] = self.max_val * m + (1 - m) * x.max()
            self.runtime_momentum[...] = self.momentum
        return x_orig


class SyncExponentialMovingAverageObserver(ExponentialMovingAverageObserver):
    """The distributed ExponentialMovingAverageObserver (one process in megtrace)."""


class HistogramObserver(MinMaxObserver):
    """MinMaxObserver keeping a running histogram; `get_qparams` picks the range that
    minimizes the L2 quantization error (for calibration). Runs on host values, so it
    cannot be traced (as in MegEngine)."""

    def __init__(self, bins: int = 2048, upsample_rate: int = 128,
                 mode: QuantMode = QuantMode.SYMMERTIC, eps: float = 0.00001,
                 dtype: Union[str, QuantDtypeMeta] = "qint8", **kwargs):
        super().__init__(mode, eps, dtype, **kwargs)
        self.bins = bins
        self.upsample_rate = upsample_rate
        meta = _dtype_meta(dtype)
        self.dst_nbins = meta.qmax - meta.qmin + 1
        self.histogram = Tensor([-1] + [0.0] * (bins - 1), dtype="float32")

    def _non_linear_param_search(self):
        """Shrink [min, max] from whichever end holds less mass while the L2 error
        of quantizing the histogram to dst_nbins keeps falling."""
        np_min_val = self.min_val.numpy()
        np_max_val = self.max_val.numpy()
        hist = self.histogram.numpy()
        assert len(hist) == self.bins, "bins mistmatch"
        bin_width = (np_max_val - np_min_val) / self.bins

        def norm_of(begin, end, density):
            return density * (end * end * end - begin * begin * begin) / 3

        def quant_error(start_bin, end_bin):
            norm = 0.0
            dst_w = bin_width * (end_bin - start_bin + 1) / self.dst_nbins
            if dst_w == 0.0:
                return 0.0
            for src_bin in range(self.bins):
                b0 = (src_bin - start_bin) * bin_width
                b1 = b0 + bin_width
                d0 = min(self.dst_nbins - 1, max(0.0, math.floor(b0 / dst_w)))
                d1 = min(self.dst_nbins - 1, max(0.0, math.floor(b1 / dst_w)))
                c0 = d0 * dst_w + dst_w / 2
                density = hist[src_bin] / bin_width
                if d0 == d1:
                    norm = norm + norm_of(b0 - c0, b1 - c0, density)
                else:
                    norm = norm + norm_of(b0 - c0, dst_w / 2, density)
                    norm = norm + (d1 - d0 - 1) * norm_of(-dst_w / 2, dst_w / 2, density)
                    c1 = d1 * dst_w + dst_w / 2
                    norm = norm + norm_of(-dst_w / 2, b1 - c1, density)
            return norm

        total = sum(hist)
        csum = np.cumsum(hist, axis=0)
        stepsize = 1e-5
        alpha, beta = 0.0, 1.0
        start_bin, end_bin = 0, self.bins - 1
        norm_min = float("inf")
        while alpha < beta:
            next_alpha, next_beta = alpha + stepsize, beta - stepsize
            lo, hi = start_bin, end_bin
            while lo < end_bin and csum[lo] < next_alpha * total:
                lo = lo + 1
            while hi > start_bin and csum[hi] > next_beta * total:
                hi = hi - 1
            next_start, next_end = start_bin, end_bin
            if (lo - start_bin) > (end_bin - hi):
                next_start = lo
                alpha = next_alpha
            else:
                next_end = hi
                beta = next_beta
            if next_start == start_bin and next_end == end_bin:
                continue
            norm = quant_error(next_start, next_end)
            if norm > norm_min:
                break
            norm_min = norm
            start_bin, end_bin = next_start, next_end
        new_min = self.min_val + Tensor(bin_width * start_bin, dtype=np.float32)
        new_max = self.min_val + Tensor(bin_width * (end_bin + 1), dtype=np.float32)
        return new_min, new_max

    def get_qparams(self):
        new_min, new_max = self._non_linear_param_search()
        return self._calculate_qparams(new_min, new_max)

    def _combine_histograms(self, orig_hist, new_hist, upsample_rate, downsample_rate,
                            start_idx, nbins):
        upsampled = new_hist.repeat(upsample_rate)
        with_range = np.zeros((nbins * downsample_rate))
        with_range[start_idx:nbins * upsample_rate + start_idx] = upsampled
        integral = np.cumsum(with_range, 0)[downsample_rate - 1::downsample_rate]
        shifted = np.zeros((nbins))
        shifted[1:nbins] = integral[0:-1]
        return orig_hist + (integral - shifted) / upsample_rate

    def _adjust_min_max(self, combined_min, combined_max, upsample_rate):
        np_min_val = self.min_val.numpy()
        np_max_val = self.max_val.numpy()
        hist_bin_width = (np_max_val - np_min_val) / (self.bins * upsample_rate)
        downsample_rate = int(np.ceil((combined_max - combined_min)
                                      / (self.bins * hist_bin_width)))
        e = downsample_rate * (self.bins * hist_bin_width) - (combined_max - combined_min)
        combined_max = combined_max + e / 2
        combined_min = combined_min - e / 2
        start_idx = int(np.round((np_min_val - combined_min) / hist_bin_width))
        return combined_min, combined_max, downsample_rate, start_idx

    def sideeffect_forward(self, x_orig):
        x = x_orig.numpy()
        min_val = self.min_val.numpy()
        max_val = self.max_val.numpy()
        histogram = self.histogram.numpy()
        new_min, new_max = x.min(), x.max()
        if histogram[0] == -1:
            new_histogram, _ = np.histogram(x, self.bins, (new_min, new_max))
        else:
            new_min = min(new_min, min_val)
            new_max = max(new_max, max_val)
            new_min, new_max, downsample_rate, start_idx = self._adjust_min_max(
                new_min, new_max, self.upsample_rate)
            new_histogram, _ = np.histogram(x, self.bins, (new_min, new_max))
            new_histogram = new_histogram.astype(np.float64)
            if new_min == min_val and new_max == max_val:
                new_histogram += histogram
            else:
                new_histogram = self._combine_histograms(
                    new_histogram, histogram, self.upsample_rate, downsample_rate,
                    start_idx, self.bins)
        self.histogram = Tensor(new_histogram, dtype="float32")
        self.min_val = Tensor(new_min, dtype="float32")
        self.max_val = Tensor(new_max, dtype="float32")

    def forward(self, x_orig):
        self.sideeffect_forward(x_orig)
        return x_orig


class PassiveObserver(Observer):
    """An observer whose qparams are set (`set_qparams`, `scale`), not observed; used by
    `apply_easy_quant`."""

    def __init__(self, dtype: Union[str, QuantDtypeMeta], **kwargs):
        super().__init__(dtype, **kwargs)
        self.qparams = None
        self.orig_scale = None

    @property
    def scale(self):
        return self.qparams.scale

    @scale.setter
    def scale(self, value: np.ndarray):
        assert np.all(value > 0)
        self.qparams.scale[...] = Tensor(value)

    def get_qparams(self):
        return self.qparams

    def set_qparams(self, qparams: QParams):
        """Set the initial qparams (a copy); their scale must be set."""
        self.qparams = deepcopy(qparams)
        if qparams.scale is None:
            raise AssertionError("Can not get an initialized scale")
        if qparams.dtype_meta is None:
            qparams.dtype_meta = self.dtype
        else:
            assert qparams.dtype_meta is self.dtype, (
                "input qparams' dtype is not equal to self.dtype.\nqparams.dtype_meta={}\n"
                "self.dtype={}".format(qparams.dtype_meta, self.dtype))
        self.orig_scale = qparams.scale.numpy()

    def forward(self, x):
        return x
