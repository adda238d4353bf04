"""`Optimizer`: MegEngine's optimizer base. Parameters are grouped (`param_groups`, each a
dict of hyper-parameters plus "params"); per-parameter state (momentum buffers, moments)
lives in `_state` as Tensors. `step` updates every Parameter in place (its identity never
changes, so Modules and GradManagers keep seeing it); `state_dict` is MegEngine's
checkpoint layout: {"param_groups": [{..., "params": [ids]}], "state": {id: {name: array}}}.
"""
from __future__ import annotations

import copy
import os
import warnings
from abc import ABCMeta, abstractmethod
from collections.abc import Iterable
from typing import Any, Dict, Iterable as Iter, Union

import numpy as np

from ..dispatch import trace_input
from ..tensor import Parameter, Tensor


class _RequiredParameter:
    def __repr__(self) -> str:
        return "<required parameter>"


required = _RequiredParameter()   # a default a subclass may demand in each group


class Optimizer(metaclass=ABCMeta):
    """Base class of optimizers: `params` is a Parameter, a dict (one group), or an
    iterable of either; `defaults` fills what a group leaves out."""

    def __init__(self, params: Union[Iter[Parameter], dict], defaults: dict):
        self._state: Dict[Parameter, Dict[str, Tensor]] = dict()
        self._defaults = defaults
        self._disable_type_convert = False
        if isinstance(params, (Parameter, dict)):
            params = [params]
        elif not isinstance(params, Iterable):
            raise TypeError("params argument given to the optimizer should be "
                            "Parameter or dict, or Iterable of them")
        self.param_groups: list = []
        groups = list(params)
        if len(groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        first_type = type(groups[0])
        if any(not isinstance(g, first_type) for g in groups):
            raise TypeError("types of params argument given to the optimizer shoud be same")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)
        for group in self.param_groups:
            self._create_state(group)

    def add_param_group(self, param_group: dict) -> None:
        """Add a group (e.g. layers unfrozen while fine-tuning); its missing
        hyper-parameters take the optimizer's defaults."""
        assert isinstance(param_group, dict), "param group must be a dict"
        if isinstance(param_group["params"], Parameter):
            param_group["params"] = [param_group["params"]]
        else:
            param_group["params"] = list(param_group["params"])
        for param in param_group["params"]:
            if not isinstance(param, Parameter):
                raise TypeError("optimizer can only optimize Parameters, but one of the "
                                "params is " + str(type(param)))
        for name, default in self._defaults.items():
            if default is required and name not in param_group:
                raise ValueError("parameter group didn't specify a value of required "
                                 "optimization parameter " + name)
            param_group.setdefault(name, default)
        seen = {id(p) for group in self.param_groups for p in group["params"]}
        assert seen.isdisjoint(map(id, param_group["params"])), \
            "some parameters appear in more than one parameter group"
        self.param_groups.append(param_group)

    def _add_state(self, param: Parameter, state_name: str, initializer=None,
                   dtype: Any = None) -> None:
        """A state tensor of `param` (zeros of its shape unless `initializer` is given).
        `dtype` exists because MegEngine's LAMB passes it (1.13's base rejects it)."""
        if initializer is None:
            initializer = np.zeros(param.shape, dtype=np.float32)
        states = self._state.setdefault(param, {})
        assert state_name not in states
        states[state_name] = Tensor(initializer, dtype=dtype, format=param.format)

    @abstractmethod
    def _create_state(self, param_group: dict) -> None:
        pass

    @abstractmethod
    def _updates(self, param_group: dict) -> None:
        pass

    def _get_params(self) -> list:
        return [param for group in self.param_groups for param in group["params"]]

    def step(self) -> "Optimizer":
        """One update of every parameter that has a gradient."""
        for group in self.param_groups:
            if isinstance(group["params"], set):
                raise TypeError("optimized parameters need to be organized in ordered "
                                "collections, but the ordering of parameters in sets will "
                                "change between runs. Please use a list instead.")
            self._updates(group)
        return self

    def zero_grad(self) -> None:
        """Deprecated since MegEngine 1.0: zero the gradients (use clear_grad)."""
        warnings.warn("Call to deprecated method zero_grad. (use "
                      "clear_grad instead) -- Deprecated since version 1.0.",
                      DeprecationWarning, stacklevel=2)
        for param in self._get_params():
            if param.grad is not None:
                param.grad.reset_zero()

    def clear_grad(self) -> None:
        """Set every parameter's `grad` to None."""
        for param in self._get_params():
            param.grad = None

    def state_dict(self, keep_var: bool = False) -> Dict:
        """The optimizer's state: hyper-parameters per group, parameters numbered in group
        order, state tensors as NumPy arrays (Tensors with `keep_var=True`)."""
        param2id: dict = {}
        for param in self._get_params():
            param2id.setdefault(param, len(param2id))
        state = {}
        for param, states in self._state.items():
            exported = copy.copy(states)
            if not keep_var:
                for name, value in states.items():
                    exported[name] = value.numpy()
            state[param2id[param]] = exported
        groups = []
        for group in self.param_groups:
            saved = {k: v for k, v in group.items() if k != "params"}
            saved["params"] = [param2id[p] for p in group["params"]]
            groups.append(saved)
        return {"param_groups": groups, "state": state}

    def load_state_dict(self, state: dict) -> None:
        """Restore what `state_dict` returned (ours or real MegEngine's)."""
        if len(self.param_groups) != len(state["param_groups"]):
            raise ValueError("loaded state dict has a different number of parameter groups")
        for group_new, group_saved in zip(self.param_groups, state["param_groups"]):
            if len(group_new["params"]) != len(group_saved["params"]):
                raise ValueError("loaded state dict contains a parameter group that "
                                 "doesn't match the size of optimizer's group")
            for param, saved_id in zip(group_new["params"], group_saved["params"]):
                self._state[param] = {
                    name: value.detach() if isinstance(value, Tensor) else Tensor(value)
                    for name, value in state["state"][saved_id].items()}
            if set(group_new.keys()) != set(group_saved.keys()):
                raise ValueError("loaded state dict contains a parameter group that "
                                 "doesn't match the keys of optimizer's group")
            for key in group_new.keys():
                if key != "params":
                    group_new[key] = group_saved[key]
        if len(self._state.keys()) != len(state["state"].keys()):
            raise ValueError("loaded state dict contains a state that doesn't match the "
                             "size of optimizer's state")

    def backward(self, loss):
        raise NotImplementedError("use autodiff.GradManager instead")

    def bcast_param(self):
        raise NotImplementedError("use distributed.bcast_list_ instead")


def scalar(value: float) -> Tensor:
    """A float32 scalar tensor: updates compute in float32 like MegEngine's, whose
    optimizers turn every hyper-parameter into such a tensor."""
    return Tensor(value, dtype="float32")


def hyper(value: float) -> Tensor:
    """A hyper-parameter (lr, momentum, betas, ...) as a float32 scalar; inside a trace
    an input of the graph, fed on every call, so that a scheduler's new lr reaches a
    traced training step (MegEngine feeds tensors created in a trace the same way)."""
    return trace_input(scalar(value))


def inplace_update_mode() -> bool:
    """MEGENGINE_INPLACE_UPDATE=1 selects MegEngine's fused update formulas."""
    return bool(int(os.getenv("MEGENGINE_INPLACE_UPDATE", "0")))


def inplace_add_(dest: Tensor, delta: Tensor, alpha: Tensor, beta: Tensor) -> Tensor:
    """dest = alpha * dest + beta * delta, in place (MegEngine's InplaceAdd)."""
    dest._reset(alpha * dest + beta * delta)
    return dest
