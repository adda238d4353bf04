"""`megtrace.utils.comp_graph_tools`: MegEngine 1.13's GraphInference (run a dumped model
by input name and get its outputs by name). megtrace runs the loaded graph with TVM
(`megtrace.load_graph`), so MegEngine's graph-surgery helpers of this module that edit a
C++ computing graph in place are not provided."""
from __future__ import annotations

from collections import OrderedDict
from typing import Dict, List

import numpy as np

__all__ = ["GraphInference"]


class GraphInference:
    """Loads a serialized computing graph (a file object or a file name) to run it.

    `outputs` keeps only the outputs of these names (MegEngine compiles the subgraph
    ending there). `profiling` and `optimize_for_inference` are MegEngine's switches for
    its own graph compiler; megtrace compiles the graph with TVM either way.
    """

    def __init__(self, file, outputs: List[str] = None, profiling: bool = False,
                 optimize_for_inference: bool = False, **kwargs):
        from ..graph_io import load_graph
        self._model = load_graph(file)
        names = self._model.output_names
        if outputs is not None:
            missing = [n for n in outputs if n not in names]
            if missing:
                raise KeyError(f"GraphInference: no output named {missing}; the model's "
                               f"outputs are {names}")
            names = list(outputs)
        self._outputs = names
        self._inputs = [i.name for i in self._model.inputs]

    def run(self, *inp_args: np.ndarray,
            inp_dict: Dict[str, np.ndarray] = None) -> Dict[str, np.ndarray]:
        """Outputs as {name: value}. Inputs by position (the file's input order) and/or
        by name in `inp_dict` (recommended)."""
        assert len(inp_args) <= len(self._inputs), \
            "This model expects {} inputs".format(len(self._inputs))
        inputs = dict(zip(self._inputs, inp_args))
        if inp_dict is not None:
            inputs.update(inp_dict)
        assert inputs.keys() == set(self._inputs), \
            "This model expects inputs {}, but gets inputs {}".format(
                list(self._inputs), list(inputs.keys()))
        values = self._model.run(**{k: self._as_input(k, v) for k, v in inputs.items()})
        return OrderedDict((name, values[name]) for name in self._outputs)

    def _as_input(self, name: str, value) -> np.ndarray:
        """MegEngine copies each input into the input var's dtype; a scalar goes into a
        1-element input (a dump holds 0-d values as shape (1,), as MegEngine's does)."""
        info = next(i for i in self._model.inputs if i.name == name)
        arr = value.numpy() if hasattr(value, "numpy") else np.asarray(value)
        if arr.ndim == 0 and len(info.shape) == 1:
            arr = arr.reshape(1)
        return arr.astype(info.dtype, copy=False)
