"""`Module`: MegEngine's module base class (parameters, buffers, state dicts, modes)."""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Iterator

import numpy as np

from ..dispatch import active_recorder
from ..tensor import Parameter, Tensor


class Module:
    """Base class of layers; attributes that are Tensors/Modules are found by walking
    `__dict__` in sorted order, as MegEngine does."""

    def __init__(self, name: str | None = None):
        self.training = True
        self.name = name
        self._scope = name

    # -- running ----------------------------------------------------------------------
    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} does not define forward()")

    def __call__(self, *args, **kwargs):
        rec = active_recorder()
        if rec is None:
            return self.forward(*args, **kwargs)
        tensors = {k: v for k, v in self.__dict__.items() if isinstance(v, Tensor)}
        with rec.scope(self._scope or type(self).__name__, tensors):
            return self.forward(*args, **kwargs)

    def __setattr__(self, key: str, value: Any) -> None:
        if isinstance(value, Module) and key != "_scope":
            object.__setattr__(value, "_scope", value.name or key)
        object.__setattr__(self, key, value)

    # -- traversal --------------------------------------------------------------------
    def _children(self) -> Iterator[tuple[str, Any]]:
        for key in sorted(self.__dict__):
            value = self.__dict__[key]
            if isinstance(value, (Module, Tensor)):
                yield key, value
            elif isinstance(value, (list, tuple)):
                for i, item in enumerate(value):
                    if isinstance(item, (Module, Tensor)):
                        yield f"{key}.{i}", item
            elif isinstance(value, dict):
                for k in sorted(value, key=str):
                    if isinstance(value[k], (Module, Tensor)):
                        yield f"{key}.{k}", value[k]

    def named_tensors(self, prefix: str = "") -> Iterator[tuple[str, Tensor]]:
        """Parameters and buffers, depth first."""
        seen: set[int] = set()
        for name, value in self._walk(prefix):
            if isinstance(value, Tensor) and id(value) not in seen:
                seen.add(id(value))
                yield name, value

    def _walk(self, prefix: str) -> Iterator[tuple[str, Any]]:
        for key, value in self._children():
            name = f"{prefix}{key}"
            if isinstance(value, Module):
                yield name, value
                yield from value._walk(name + ".")
            else:
                yield name, value

    def named_parameters(self, prefix: str = "", recursive: bool = True):
        for name, t in self.named_tensors(prefix):
            if isinstance(t, Parameter) and (recursive or "." not in name[len(prefix):]):
                yield name, t

    def parameters(self, recursive: bool = True):
        for _, p in self.named_parameters(recursive=recursive):
            yield p

    def named_buffers(self, prefix: str = ""):
        for name, t in self.named_tensors(prefix):
            if not isinstance(t, Parameter):
                yield name, t

    def buffers(self):
        for _, b in self.named_buffers():
            yield b

    def named_modules(self, prefix: str = ""):
        yield prefix, self
        for name, value in self._walk(f"{prefix}." if prefix else ""):
            if isinstance(value, Module):
                yield name, value

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        for key, value in self._children():
            if isinstance(value, Module):
                yield key, value

    def children(self):
        for _, m in self.named_children():
            yield m

    # -- modes ------------------------------------------------------------------------
    def train(self, mode: bool = True, recursive: bool = True) -> "Module":
        for m in (self.modules() if recursive else [self]):
            object.__setattr__(m, "training", mode)
        return self

    def eval(self) -> "Module":
        return self.train(False)

    # -- state ------------------------------------------------------------------------
    def state_dict(self) -> "OrderedDict[str, np.ndarray]":
        """Name -> NumPy copy of every parameter and buffer (BatchNorm's flattened to (C,),
        as MegEngine saves them)."""
        out = OrderedDict()
        for name, module in self.named_modules():
            for key, t in module._own_tensors():
                full = f"{name}.{key}" if name else key
                if full not in out:
                    out[full] = module._state_value(key, t.numpy())
        return OrderedDict(sorted(out.items()))

    def _own_tensors(self):
        for key, value in self._children():
            if isinstance(value, Tensor):
                yield key, value

    def _state_value(self, key: str, value: np.ndarray) -> np.ndarray:
        return value

    def load_state_dict(self, state_dict: dict, strict: bool = True) -> None:
        """Copy values in; a (C,) value loads into a (1, C, 1, 1) tensor, as MegEngine allows."""
        own = dict(self.named_tensors())
        missing = sorted(set(own) - set(state_dict))
        unexpected = sorted(set(state_dict) - set(own))
        if strict and (missing or unexpected):
            raise KeyError(f"load_state_dict: missing keys {missing}, unexpected keys "
                           f"{unexpected}")
        for name, value in state_dict.items():
            if name not in own:
                continue
            target = own[name]
            arr = np.asarray(value.numpy() if isinstance(value, Tensor) else value)
            if arr.shape != target.shape:
                if arr.size != target.size:
                    raise ValueError(f"load_state_dict: {name} has shape {arr.shape}, the "
                                     f"module expects {target.shape}")
                arr = arr.reshape(target.shape)
            target._set_value(arr)

    def __repr__(self) -> str:
        inner = [f"  ({k}): {repr(v).replace(chr(10), chr(10) + '  ')}"
                 for k, v in self.named_children()]
        extra = self._module_info_string()
        if not inner:
            return f"{type(self).__name__}({extra})"
        return f"{type(self).__name__}({extra}\n" + "\n".join(inner) + "\n)"

    def _module_info_string(self) -> str:
        return ""
