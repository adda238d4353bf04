"""`Module`: MegEngine's module base class (traversal, hooks, state dicts, modes).

Attributes that are Tensors or Modules -- directly or inside lists, tuples and dicts --
are found by walking `__dict__` in sorted key order, as MegEngine's `Module._flatten`
does; every public iterator (parameters, buffers, modules, ...) is a `_flatten` view.
The instance attributes are exactly MegEngine's, so pickles carry the same state.
"""
from __future__ import annotations

import warnings
from abc import ABCMeta, abstractmethod
from collections import OrderedDict
from typing import Any, Callable, Iterable, Iterator, Optional, Union

import numpy as np

from .. import dtype as _dt
from ..dispatch import _active
from ..logger import get_logger
from ..tensor import Parameter, Tensor
from .hooks import HookHandler

_logger = get_logger(__name__)


_ABSENT: Any = object()     # Module.__call__ given no positional input


def _expand_structure(prefix: str, obj: Any) -> list[tuple[str, Any]]:
    """(dotted key, leaf) for every Tensor/Module in `obj`, looking into containers."""
    if isinstance(obj, (Tensor, Module)):
        return [(prefix, obj)]
    if not isinstance(obj, (list, tuple, dict)):
        return []
    if isinstance(obj, dict):
        items = [(k, obj[k]) for k in sorted(obj)]
    else:
        items = [(str(i), v) for i, v in enumerate(obj)]
    out = []
    for key, value in items:
        leaves = _expand_structure(key, value)
        if leaves and not isinstance(key, str):
            raise AssertionError(f"keys for Tensor and Module must be str, error key: {key}")
        out.extend((f"{prefix}.{k}", v) for k, v in leaves)
    return out


def _access_structure(obj: Any, key: str, callback: Callable[[Any, Any, Any], Any]):
    """Follow dotted `key` through attributes, list indices and dict keys; returns
    callback(parent, last key, object)."""
    parent, cur, k = None, obj, None
    for k in key.split("."):
        parent = cur
        if isinstance(cur, (list, tuple)):
            k = int(k)
            cur = cur[k]
        elif isinstance(cur, dict):
            cur = cur[k]
        else:
            cur = getattr(cur, k)
    return callback(parent, k, cur)


def _is_parameter(obj) -> bool:
    return isinstance(obj, Parameter)


def _is_tensor(obj) -> bool:
    return isinstance(obj, Tensor)


def _is_buffer(obj) -> bool:
    return isinstance(obj, Tensor) and not isinstance(obj, Parameter)


def _is_module(obj) -> bool:
    return isinstance(obj, Module)


class Module(metaclass=ABCMeta):
    """Base class of layers. `name` (optional) names the module's ops in traces."""

    # Normalization layers keep (1, C, 1, 1) statistics but save/load them flat, as
    # MegEngine's state_dict does for its XNorm classes.
    _flat_state: bool = False

    def __init__(self, name: Optional[str] = None):
        self._modules: list[str] = []
        if name is not None and not (isinstance(name, str) and name.strip()):
            raise AssertionError("Module's name must be a non-empty string")
        self.name = name
        self.training = True
        self.quantize_disabled = False
        self._forward_pre_hooks: "OrderedDict[int, Callable]" = OrderedDict()
        self._forward_hooks: "OrderedDict[int, Callable]" = OrderedDict()
        self._name: Optional[str] = None          # dotted path from the root
        self._short_name: Optional[str] = None    # attribute name in the parent

    @abstractmethod
    def forward(self, inputs):
        pass

    # -- running ----------------------------------------------------------------------
    def register_forward_pre_hook(self, hook: Callable) -> HookHandler:
        """`hook(module, inputs)` runs before forward; a non-None result replaces inputs."""
        return HookHandler(self._forward_pre_hooks, hook)

    def register_forward_hook(self, hook: Callable) -> HookHandler:
        """`hook(module, inputs, outputs)` runs after forward; a non-None result replaces
        the outputs."""
        return HookHandler(self._forward_hooks, hook)

    def __call__(self, first: Any = _ABSENT, /, *rest, **kwargs):
        # One positional input, no keywords, no hooks, no recorder that names values: the
        # call of nearly every layer, without packing and unpacking *inputs (~0.3 us a
        # module on a slow host, issue 11). `first` is positional-only, so a forward
        # parameter of any name can still be given by keyword.
        stack = _active.stack               # active_recorder(), inlined: every layer asks
        rec = stack[-1] if stack else None
        if first is not _ABSENT and not rest and not kwargs and \
                not self._forward_pre_hooks and not self._forward_hooks and \
                (rec is None or not rec.names_values):
            return self.forward(first)
        return self._call(rest if first is _ABSENT else (first, *rest), kwargs, rec)

    def _call(self, inputs: tuple, kwargs: dict, rec) -> Any:
        """`__call__` with hooks, keywords, several inputs or a naming recorder."""
        if self._forward_pre_hooks:
            for hook in self._forward_pre_hooks.values():
                modified = hook(self, inputs)
                if modified is not None:
                    inputs = modified if isinstance(modified, tuple) else (modified,)
        if rec is None or not rec.names_values:
            outputs = self.forward(*inputs, **kwargs)
        else:
            tensors = {k: v for k, v in self.__dict__.items() if isinstance(v, Tensor)}
            scope = self.name if self.name is not None else self._short_name
            with rec.scope(scope or type(self).__name__, tensors):
                outputs = self.forward(*inputs, **kwargs)
        if self._forward_hooks:
            for hook in self._forward_hooks.values():
                modified = hook(self, inputs, outputs)
                if modified is not None:
                    outputs = modified
        return outputs

    # -- traversal --------------------------------------------------------------------
    def _flatten(self, *, recursive: bool = True, with_key: bool = False,
                 with_parent: bool = False, prefix: Optional[str] = None,
                 predicate: Callable[[Any], bool] = lambda _: True,
                 seen: Optional[set] = None) -> Iterator[Any]:
        """Tensors and Modules reachable from this module (each once, in sorted key order)
        that satisfy `predicate`; with keys and/or parents on request."""
        if seen is None:
            seen = {id(self)}
        dotted = "" if prefix is None else prefix + "."
        attrs = vars(self)
        for key in sorted(attrs):
            for expanded, leaf in _expand_structure(key, attrs[key]):
                if id(leaf) in seen:
                    continue
                seen.add(id(leaf))
                if predicate(leaf):
                    if with_key and with_parent:
                        yield dotted + expanded, leaf, self
                    elif with_key:
                        yield dotted + expanded, leaf
                    elif with_parent:
                        yield leaf, self
                    else:
                        yield leaf
                if recursive and isinstance(leaf, Module):
                    yield from leaf._flatten(
                        recursive=True, with_key=with_key, with_parent=with_parent,
                        prefix=dotted + expanded if with_key else None,
                        predicate=predicate, seen=seen)

    def parameters(self, recursive: bool = True, **kwargs) -> Iterable[Parameter]:
        kwargs.pop("requires_grad", None)
        yield from self._flatten(predicate=_is_parameter, recursive=recursive, **kwargs)

    def named_parameters(self, prefix: Optional[str] = None, recursive: bool = True,
                         **kwargs) -> Iterable[tuple[str, Parameter]]:
        kwargs.pop("requires_grad", None)
        yield from self._flatten(with_key=True, prefix=prefix, predicate=_is_parameter,
                                 recursive=recursive, **kwargs)

    def buffers(self, recursive: bool = True, **kwargs) -> Iterable[Tensor]:
        """Tensors that are not Parameters (running statistics, ...)."""
        yield from self._flatten(predicate=_is_buffer, recursive=recursive, **kwargs)

    def named_buffers(self, prefix: Optional[str] = None, recursive: bool = True,
                      **kwargs) -> Iterable[tuple[str, Tensor]]:
        yield from self._flatten(with_key=True, prefix=prefix, predicate=_is_buffer,
                                 recursive=recursive, **kwargs)

    def tensors(self, recursive: bool = True, **kwargs) -> Iterable[Tensor]:
        yield from self._flatten(predicate=_is_tensor, recursive=recursive, **kwargs)

    def named_tensors(self, prefix: Optional[str] = None, recursive: bool = True,
                      **kwargs) -> Iterable[tuple[str, Tensor]]:
        yield from self._flatten(with_key=True, prefix=prefix, predicate=_is_tensor,
                                 recursive=recursive, **kwargs)

    def children(self, **kwargs) -> Iterable["Module"]:
        yield from self._flatten(predicate=_is_module, recursive=False, **kwargs)

    def named_children(self, **kwargs) -> Iterable[tuple[str, "Module"]]:
        yield from self._flatten(with_key=True, predicate=_is_module, recursive=False,
                                 **kwargs)

    def modules(self, **kwargs) -> Iterable["Module"]:
        """This module, then every submodule (`with_parent=True`: (module, parent))."""
        yield (self, None) if kwargs.get("with_parent") else self
        yield from self._flatten(predicate=_is_module, **kwargs)

    def named_modules(self, prefix: Optional[str] = None,
                      **kwargs) -> Iterable[tuple[str, "Module"]]:
        root = "" if prefix is None else prefix
        yield (root, self, None) if kwargs.get("with_parent") else (root, self)
        yield from self._flatten(with_key=True, prefix=prefix, predicate=_is_module,
                                 **kwargs)

    def apply(self, fn: Callable[["Module"], Any]) -> None:
        """Call `fn` on this module and every submodule."""
        for m in self.modules():
            fn(m)

    # -- modes ------------------------------------------------------------------------
    def train(self, mode: bool = True, recursive: bool = True) -> "Module":
        """Set `training` on this module (and its submodules). Returns the module, so
        that `net = Net().eval()` works (MegEngine returns None)."""
        if not recursive:
            self.training = mode
            return self
        self.apply(lambda m: m.train(mode, recursive=False))
        return self

    def eval(self) -> "Module":
        return self.train(False)

    def disable_quantize(self, value: bool = True):
        """Set `quantize_disabled` on this module and its submodules."""
        def fn(m: Module) -> None:
            m.quantize_disabled = value
        self.apply(fn)

    def zero_grad(self) -> None:
        """Deprecated since MegEngine 1.0, and warns as it does: zeroes each parameter's
        grad in place (the grad tensors stay)."""
        warnings.warn("Call to deprecated method zero_grad. -- Deprecated since version 1.0.",
                      DeprecationWarning, stacklevel=2)
        for param in self.parameters():
            if param.grad is not None:
                param.grad.reset_zero()

    def replace_param(self, params: dict, start_pos: int, seen: Optional[set] = None) -> int:
        """Replace Parameters, numbered in traversal order from `start_pos`, by
        `params[number]` (MegEngine's ParamPack helper); returns how many were visited."""
        offset = 0
        if seen is None:
            seen = {id(self)}
        attrs = vars(self)
        for key in sorted(attrs):
            value = attrs[key]
            if id(value) in seen:
                continue
            seen.add(id(value))
            if isinstance(value, Parameter):
                if start_pos + offset in params:
                    new = params[start_pos + offset]
                    if tuple(value.shape) != tuple(new.shape):
                        raise AssertionError(f"replace_param: {key} has shape {value.shape}, "
                                             f"replacement has {new.shape}")
                    attrs[key] = new
                offset += 1
            if isinstance(value, Module):
                offset += value.replace_param(params, start_pos + offset, seen)
        return offset

    # -- state ------------------------------------------------------------------------
    def state_dict(self, rst=None, prefix: str = "", keep_var: bool = False) -> OrderedDict:
        """Name -> NumPy copy (Tensor with keep_var) of every parameter and buffer;
        normalization layers' (1, C, 1, 1) tensors are saved flat, as MegEngine does."""
        out = OrderedDict()
        for (module_type, key), value in self._state_dict(rst, prefix, keep_var).items():
            out[key] = value.reshape(-1) if module_type._flat_state else value
        return out

    def _state_dict(self, rst=None, prefix: str = "", keep_var: bool = False) -> OrderedDict:
        if rst is None:
            rst = OrderedDict()
        for key, value in self._flatten(recursive=False, with_key=True, predicate=_is_tensor):
            if (type(self), prefix + key) in rst:
                raise AssertionError(f"duplicated state: {key}")
            rst[(type(self), prefix + key)] = value if keep_var else value.numpy()
        for key, sub in self._flatten(recursive=False, with_key=True, predicate=_is_module):
            sub._state_dict(rst, prefix + key + ".", keep_var)
        return rst

    def load_state_dict(self, state_dict: Union[dict, Callable[[str, Tensor], Any]],
                        strict: bool = True) -> None:
        """Copy values in from a dict (or a closure `(key, tensor) -> array or None`).
        With `strict`, unused or missing keys raise KeyError. A flat value loads into a
        normalization layer's (1, C, 1, 1) tensor."""
        if isinstance(state_dict, dict):
            unused: set = set(state_dict.keys())

            def closure(key, _):
                return state_dict.get(key)
        elif callable(state_dict):
            unused, closure = set(), state_dict
        else:
            raise ValueError(f"`state_dict` must load a dict or callable, got "
                             f"{type(state_dict)}")
        loaded, skipped = self._load_state_dict_with_closure(closure)
        unused -= loaded
        if unused:
            if strict:
                raise KeyError(f"Unused params violate `strict=True`, unused={unused}")
            _logger.warning(f"Unused params in `strict=False` mode, unused={unused}")
        if skipped:
            if strict:
                raise KeyError(f"Missing params violate `strict=True`, missing={skipped}")
            _logger.warning(f"Missing params in `strict=False` mode, missing={skipped}")

    def _load_state_dict_with_closure(self, closure) -> tuple[set, set]:
        loaded, skipped = set(), set()
        for (module_type, key), var in self._state_dict(keep_var=True).items():
            value = closure(key, var)
            if value is None:
                skipped.add(key)
                continue
            # a copy (numpy() makes one): later writes to the caller's array stay there
            value = value.numpy() if isinstance(value, Tensor) else np.array(value)
            if tuple(value.shape) != tuple(var.shape):
                if not module_type._flat_state:
                    raise ValueError(f"param `{key}` shape mismatch, should be "
                                     f"{tuple(var.shape)}, get {value.shape}")
                if value.size != var.size:
                    raise ValueError(f"param `{key}` size mismatch, should be {var.size}, "
                                     f"get {value.size}")
                value = value.reshape(var.shape)
            # the loaded array's dtype, as MegEngine's _reset to Tensor(value, dtype=value's)
            var._set_value(value, _dt.as_array(value).dtype)
            loaded.add(key)
        return loaded, skipped

    # -- attributes -------------------------------------------------------------------
    def __setattr__(self, name: str, value: Any) -> None:
        module_like = isinstance(value, (Module, list, tuple, dict))
        if name != "_modules":
            modules = self.__dict__.get("_modules")
            if modules is None and module_like:
                raise AttributeError("cannot assign module before Module.__init__() call")
            if module_like and name not in modules:
                modules.append(name)
            elif not module_like and modules is not None and name in modules:
                modules.remove(name)
        parent_path = self.__dict__.get("_name") or self.__dict__.get("name")
        for key, leaf in _expand_structure(name, value):
            if isinstance(leaf, Module):
                leaf._set_path(parent_path, key)
        object.__setattr__(self, name, value)

    def _set_path(self, parent_path: Optional[str], short: str) -> None:
        """Name this module `short` under `parent_path` (a module keeps the first name
        it was given, as in MegEngine); submodules follow."""
        if self._short_name and self._short_name != short:
            return
        full = short if not parent_path else f"{parent_path}.{short}"
        object.__setattr__(self, "_name", full)
        object.__setattr__(self, "_short_name", short)
        for key, sub in self._flatten(recursive=False, with_key=True, predicate=_is_module):
            sub._set_path(full, key)

    def __delattr__(self, name: str) -> None:
        modules = self.__dict__.get("_modules")
        if modules is not None and name in modules:
            modules.remove(name)
        object.__delattr__(self, name)

    def __setstate__(self, state: dict) -> None:
        if "_short_name" not in state:           # pickles from before MegEngine 1.6
            state["_short_name"] = state.get("_name")
            state["_name"] = None
        self.__dict__.update(state)

    # -- printing ---------------------------------------------------------------------
    def _module_info_string(self) -> str:
        """The one-line summary shown inside the parentheses of repr()."""
        return ""

    def __repr__(self) -> str:
        def indent(text: str) -> str:
            return text.replace("\n", "\n  ")

        extra = self._module_info_string()
        extra_lines = extra.split("\n") if extra else []
        child_lines = []
        for name in self._modules:
            value = self.__dict__[name]
            if isinstance(value, Module):
                child_lines.append(f"({name}): {indent(repr(value))}")
                continue
            for key, leaf in _expand_structure(name, value):
                if isinstance(leaf, Module):
                    child_lines.append(f"({key}): {indent(repr(leaf))}")
        lines = extra_lines + child_lines
        body = ""
        if len(extra_lines) == 1 and not child_lines:
            body = extra_lines[0]
        elif lines:
            body = "\n  " + "\n  ".join(lines) + "\n"
        return f"{type(self).__name__}({body})"
