"""Whole-network conversions: float -> QAT (`quantize_qat`), QAT -> quantized
(`quantize`), and switching every QAT module's observers / fake quantizers on or off."""
from __future__ import annotations

from copy import copy, deepcopy
from functools import partial
from typing import Callable

import numpy as np

from .. import module as Float
from ..functional import concat, norm
from ..logger import get_logger
from ..module import Module
from ..module import qat as QAT
from ..module import quantized as Quantized
from ..module.qat import QATModule
from ..module.quantized import QuantizedModule
from ..tensor import Tensor
from ..utils.module_utils import set_expand_structure
from .qconfig import QConfig, ema_fakequant_qconfig

logger = get_logger(__name__)


def _get_quantable_module_names():
    """Names of the modules that exist in float, QAT and quantized form."""
    def is_quantable(key: str):
        value = getattr(Quantized, key)
        return isinstance(value, type) and issubclass(value, QuantizedModule) and \
            value is not QuantizedModule
    return [key for key in dir(Quantized) if is_quantable(key)]


def _get_convert_dict():
    names = _get_quantable_module_names()
    float2qat = {getattr(Float, k): getattr(QAT, k) for k in names}
    qat2quantized = {getattr(QAT, k): getattr(Quantized, k) for k in names}
    return float2qat, qat2quantized


_float2qat_dict, _qat2quantized_dict = _get_convert_dict()
qat_modules = tuple(_qat2quantized_dict.keys())


def quantize(module: Module, inplace: bool = True, mapping: dict = None):
    """Convert every QAT submodule to its quantized (inference) module; `mapping` adds
    conversions of custom QAT modules."""
    if not inplace:
        module = deepcopy(module)
    convert_dict = copy(_qat2quantized_dict)
    if mapping is not None:
        convert_dict.update(mapping)
    convertible = tuple(convert_dict.keys())
    for key, submodule, _parent in list(module._flatten(
            with_key=True, with_parent=True, predicate=lambda m: isinstance(m, convertible))):
        set_expand_structure(module, key, convert_dict[type(submodule)].from_qat_module(submodule))
    return module


def quantize_qat(module: Module, inplace: bool = True,
                 qconfig: QConfig = ema_fakequant_qconfig, mapping: dict = None):
    """Convert every quantable float submodule (not inside another quantable one, not
    `quantize_disabled`) to its QAT module and give them `qconfig`."""
    if not inplace:
        module = deepcopy(module)
    convert_dict = copy(_float2qat_dict)
    if mapping is not None:
        convert_dict.update(mapping)
    quantable = tuple(convert_dict.keys())

    def is_quantable(mod):
        return isinstance(mod, quantable)
    for key, submodule, parent in list(module._flatten(
            with_key=True, with_parent=True, predicate=is_quantable)):
        if is_quantable(parent) or submodule.quantize_disabled:
            continue
        set_expand_structure(module, key,
                             convert_dict[type(submodule)].from_float_module(submodule))
    propagate_qconfig(module, qconfig)
    return module


def reset_qconfig(module: Module, qconfig: QConfig, inplace: bool = True):
    """Rebuild every QAT submodule's observers and fake quantizers from `qconfig`,
    initialized with the qparams the old ones computed."""
    if not inplace:
        module = deepcopy(module)

    def make(factory, qparams):
        inst = factory() if factory is not None else None
        if inst is not None and getattr(inst, "set_qparams", None) is not None:
            inst.set_qparams(qparams)
        return inst
    for m in list(module._flatten(predicate=lambda m: isinstance(m, QATModule))):
        if m.with_weight:
            weight_params = m.get_weight_qparams()
            m.weight_observer = make(qconfig.weight_observer, weight_params)
            m.weight_fake_quant = make(qconfig.weight_fake_quant, weight_params)
        if m.with_act:
            act_params = m.get_activation_qparams()
            m.act_observer = make(qconfig.act_observer, act_params)
            m.act_fake_quant = make(qconfig.act_fake_quant, act_params)
    return module


def _propagate(module: Module, func_str: str, *args, **kwargs):
    def fn(mod: Module):
        if isinstance(mod, QATModule):
            getattr(mod, func_str)(*args, **kwargs)
    module.apply(fn)


def propagate_qconfig(module: QATModule, qconfig: QConfig):
    """Set `qconfig` on every QAT submodule."""
    _propagate(module, "set_qconfig", qconfig)


def hook_qat_module(module: Module, func: Callable):
    """Register `func` as a forward hook of every QAT submodule; returns the handles."""
    return [m.register_forward_hook(func)
            for m in list(module._flatten(predicate=lambda m: isinstance(m, QATModule)))]


def apply_easy_quant(module: Module, data: Tensor, start: float = 0.8, stop: float = 1.2,
                     num: int = 40):
    """EasyQuant (https://arxiv.org/pdf/2006.16669): search each PassiveObserver's scale
    in [start, stop] x its initial scale for the best cosine similarity between the
    float and the fake-quantized outputs."""
    batch_size = data.shape[0]

    def get_cosine(x, y):
        axis = tuple(range(1, len(x.shape)))
        sim = (x * y).sum(axis=axis) / (norm(x, axis=axis) * norm(y, axis=axis))
        return sim.mean(axis=0)

    def search(mod, inputs, outputs, where):
        mod._forward_hooks.clear()
        normal_in = [_[:batch_size] for _ in inputs]
        fakequant_in = [_[batch_size:] for _ in inputs]
        disable_fake_quant(mod)
        normal_out = mod(*normal_in)
        enable_fake_quant(mod)
        ob = getattr(mod, where)
        if ob is None:
            return None
        orig_scale = ob.orig_scale
        cosine = optimal = 0
        for scale in np.linspace(start * orig_scale, stop * orig_scale, num):
            ob.scale = scale
            fakequant_out = mod(*fakequant_in)
            dis = get_cosine(normal_out, fakequant_out)
            if dis > cosine:
                cosine = dis
                optimal = scale
        if optimal == 0:
            logger.warning("EasyQuant finds no better scale")
        else:
            ob.scale = optimal
        return concat([normal_out, outputs[batch_size:]])

    data = concat([data, data])
    hook_qat_module(module, partial(search, where="weight_observer"))
    module(data)
    hook_qat_module(module, partial(search, where="act_observer"))
    module(data)
    return module


def disable_fake_quant(module: Module):
    """Turn off fake quantization in every QAT submodule."""
    _propagate(module, "set_fake_quant", False)


def disable_observer(module: Module):
    """Turn off the observers of every QAT submodule."""
    _propagate(module, "set_observer", False)


def enable_fake_quant(module: Module):
    """Turn on fake quantization in every QAT submodule."""
    _propagate(module, "set_fake_quant", True)


def enable_observer(module: Module):
    """Turn on the observers of every QAT submodule."""
    _propagate(module, "set_observer", True)
