"""What TVM may fuse, for trace's `graph_opt_config` (MegEngine's JIT fusion switches):

- jit_fuse_dimshuffle=False keeps transposes (Dimshuffle) as kernels of their own;
- jit_fuse_reduce=False keeps reductions from absorbing their elementwise producers.

TVM's FuseOps decides from each legalized PrimFunc's "op_pattern"; marking a PrimFunc
opaque (kOpaque) keeps it out of every fused group. True or None leaves TVM's choice.
"""
from __future__ import annotations

from ._tvm import tvm

OPAQUE = 8          # tvm.relay.op.OpPattern.OPAQUE (relax keeps the same numbering)
COMM_REDUCE = 3


def limit_fusion(fuse_transpose: bool = True, fuse_reduce: bool = True):
    """A module pass to run after AnnotateTIROpPattern and before FuseOps."""
    t = tvm()

    @t.transform.module_pass(opt_level=0, name="MegtraceLimitFusion")
    def _pass(mod, _ctx):
        updates = {}
        for gv, func in mod.functions.items():
            if not isinstance(func, t.tirx.PrimFunc) or func.attrs is None:
                continue
            pattern = func.attrs.get("op_pattern") if "op_pattern" in func.attrs else None
            if pattern is None:
                continue
            is_transpose = gv.name_hint.startswith("transpose")
            if (not fuse_transpose and is_transpose) or \
                    (not fuse_reduce and int(pattern) == COMM_REDUCE):
                updates[gv] = func.with_attr("op_pattern", OPAQUE)
        for gv, func in updates.items():
            mod[gv] = func
        return mod

    return _pass


def record_kernels(into: list):
    """A module pass that lists the module's TIR functions into `into` (the kernels)."""
    t = tvm()

    @t.transform.module_pass(opt_level=0, name="MegtraceRecordKernels")
    def _pass(mod, _ctx):
        into[:] = sorted(gv.name_hint for gv, f in mod.functions.items()
                         if isinstance(f, t.tirx.PrimFunc))
        return mod

    return _pass
