"""Which oprs MegEngine's loader does not rebuild as written.

MegEngine's FBS_V2 loader calls each opr's `make` and then asserts that what it got is
an opr of the type the file names (or an ImmutableTensor: constant folding). Several
`make` functions hand back an existing var instead of a new opr (MegEngine 1.13,
src/opr/impl/tensor_manip.cpp, basic_arith.cpp, gopt/impl/basic_arith/inplace.cpp):

- Reshape / Broadcast to GetVarShape(input), or to a constant shape equal to the input's
  shape when that shape is statically constant (`check_is_shape_of`);
- Concat of one input; TypeCvt to the dtype the input already has.
(Elemwise's in-place arithmetic rewrites -- x + 0 -> x, log(exp(x)) -> x -- do not run
while Lite loads a file: such files load and compute as written in Lite 1.13.)

The file then fails to load (`got_type=Elemwise expected_type=Reshape`) unless the var
handed back is itself of the expected type or a small constant. `LoaderModel` follows
a file opr by opr, with MegEngine's notion of which shapes and values are statically
constant (inputs have mutable shapes), and says where that happens: the reader refuses
such files, the writer drops those oprs (fbs/writer.py).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

import numpy as np

CONST_FOLD_LIMIT = 1024       # MegEngine replaces constant values smaller than this
INVALID_AXIS = 7              # OptionalAxisV1: no axis
_SOURCES = {"ImmutableTensor", "SharedDeviceTensor", "MultipleDeviceTensorHolder"}
# oprs whose output value MegEngine infers statically from their inputs' values
_VALUE_INFER = {"Elemwise", "TypeCvt", "Concat", "Dimshuffle", "AxisAddRemove", "Subtensor",
                "Reshape", "Broadcast", "GetVarShape", "Reduce"}


def base_type(name: str) -> str:
    """MegEngine's C++ type behind a serialized name (ReshapeV1 -> Reshape)."""
    return re.sub(r"V\d$", "", name)


@dataclass(frozen=True)
class Collapse:
    """`make` of the opr at `index` hands back the existing var `target`
    whose opr has type `got`; `refused` when MegEngine's loader then stops."""

    index: int
    opr_type: str
    target: int
    got: str
    why: str

    @property
    def refused(self) -> bool:
        return self.got not in (base_type(self.opr_type), "ImmutableTensor")

    def message(self) -> str:
        return (f"{self.opr_type} (opr #{self.index}) {self.why}: MegEngine's loader gets a "
                f"{self.got} where the file says {base_type(self.opr_type)} and refuses the "
                f"file (got_type={self.got} expected_type={base_type(self.opr_type)})")


Oracle = Callable[[int], object]


class LoaderModel:
    """Static-inference facts per var id, updated opr by opr as MegEngine loads a file.

    `shape(id)`, `value(id)` and `dtype(id)` come from the caller (the reader's typed
    graph); `value` is only asked for vars MegEngine also knows to be constant."""

    def __init__(self, shape: Oracle, value: Oracle, dtype: Oracle):
        self.shape, self.value, self.dtype = shape, value, dtype
        self.canon: dict[int, int] = {}
        self.shape_const: dict[int, bool] = {}
        self.value_const: dict[int, bool] = {}
        self.producer: dict[int, tuple[str, dict, list[int]]] = {}

    # -- facts ------------------------------------------------------------------------
    def _c(self, vid: int) -> int:
        return self.canon.get(vid, vid)

    def _small_const(self, vid: int) -> bool:
        shape = self.shape(vid)
        return bool(self.value_const.get(vid)) and shape is not None and \
            int(np.prod(shape, dtype=np.int64)) < CONST_FOLD_LIMIT

    def type_of(self, vid: int) -> str:
        """The type of the opr that owns `vid` after the loader's constant folding."""
        vid = self._c(vid)
        if self._small_const(vid):
            return "ImmutableTensor"
        return base_type(self.producer.get(vid, ("Host2DeviceCopy",))[0])

    # -- the rules --------------------------------------------------------------------
    def collapse(self, index: int, opr) -> Collapse | None:
        """What `make` does with `opr` (type, params, inputs) if it is not a new opr."""
        t = base_type(opr.type)
        fields = opr.params[0][1] if opr.params else {}
        ins = [self._c(i) for i in opr.inputs]

        def to(target: int, why: str) -> Collapse:
            return Collapse(index, opr.type, target, self.type_of(target), why)

        if t in ("Reshape", "Broadcast") and len(ins) == 2:
            x, tshp = ins
            prod = self.producer.get(tshp)
            if prod and base_type(prod[0]) == "GetVarShape" and prod[2] == [x] and \
                    prod[1].get("axis", INVALID_AXIS) == INVALID_AXIS:
                return to(x, "reshapes to GetVarShape of its own input")
            if self.value_const.get(tshp) and self.shape_const.get(x):
                target, have = self.value(tshp), self.shape(x)
                if target is not None and have is not None and \
                        tuple(int(d) for d in np.asarray(target).reshape(-1)) == tuple(have):
                    return to(x, f"targets the shape {tuple(have)} its input statically has")
        elif t == "Concat" and len(ins) == 1:
            return to(ins[0], "has a single input")
        elif t == "TypeCvt" and ins and self.dtype(ins[0]) == self.dtype(opr.outputs[0]) and \
                isinstance(self.dtype(ins[0]), str):
            # (a TypeCvt between equal quantized dtypes is kept: MegEngine dumps one after
            # pooling before Concat, and its loader and Lite run that file)
            return to(ins[0], f"converts to the dtype {self.dtype(ins[0])} it already has")
        return None

    # -- bookkeeping ------------------------------------------------------------------
    def record(self, opr, collapse: Collapse | None) -> None:
        """Enter the outputs of `opr` (after `collapse`, if any, was dealt with)."""
        t = base_type(opr.type)
        fields = opr.params[0][1] if opr.params else {}
        ins = [self._c(i) for i in opr.inputs]
        if collapse is not None and collapse.target is not None:
            for out in opr.outputs[:1]:
                self.canon[out] = collapse.target
            return
        sc = [self.shape_const.get(i, False) for i in ins]
        vc = [self.value_const.get(i, False) for i in ins]
        if t in _SOURCES:
            shape_c = value_c = True
        elif t == "Host2DeviceCopy":
            shape_c = value_c = False
        elif t == "GetVarShape":
            shape_c = value_c = all(sc)
        elif t in ("Reshape", "Broadcast"):
            shape_c = vc[1] and (t == "Broadcast" or sc[0] or
                                 fields.get("axis", INVALID_AXIS) == INVALID_AXIS)
            value_c = all(vc)
        elif t in ("Subtensor", "IndexingMultiAxisVec", "Reduce"):
            shape_c = sc[0] and all(vc[1:])
            value_c = all(vc) and t in _VALUE_INFER
        else:
            shape_c = all(sc)
            value_c = all(vc) and t in _VALUE_INFER and bool(ins)
        for out in opr.outputs:
            self.shape_const[out] = shape_c
            self.value_const[out] = value_c
            self.producer[out] = (opr.type, fields, ins)
