"""Donated inputs: a training step's new parameter (or optimizer state) written over the
buffer of the old one, not into a fresh output beside it.

A traced step takes every parameter and optimizer state as an input and returns their
new values: without donation both are alive at once, and the new ones are allocated
while the activations are (the update runs right after each gradient, see
megtrace/jit/update_schedule.py). This Relax pass runs after CallTIRRewrite, where each
kernel call writes an explicitly allocated output: when that output is returned, an
input of the main function with the same shape and dtype is read for the last time by
the very same kernel, and the kernel reads that input only at the element it writes
(one data-parallel block, equal single-point regions), the call writes into the input
instead and the allocation goes; so may a kernel whose output is not returned but read
by a later one that writes over it in turn (`momentum * buf` before `+ grad`). The kernel is called through a copy without the
`noalias` attribute, so the compiler may not assume its buffers differ.

The caller must own the donated buffers: CompiledGraph (build.py) hands the VM a copy
of each input that may be donated, so a NumPy array the caller holds never changes.
"""
from __future__ import annotations

from typing import Any

import tvm_ffi

from ._tvm import relax, tvm

NOALIAS = "tirx.noalias"


def donate_pass() -> Any:
    """The module pass (place it after CallTIRRewrite, before StaticPlanBlockMemory)."""
    @tvm().transform.module_pass(opt_level=0, name="MegtraceDonateInputs")
    def _pass(mod, _ctx):
        return donate_inputs(mod)
    return _pass


def donate_inputs(mod: Any) -> Any:
    """`mod` with its main function's returned kernel outputs written over dying inputs."""
    rx = relax()
    main = mod["main"]
    body = main.body
    if len(body.blocks) != 1 or isinstance(body.blocks[0], rx.DataflowBlock):
        return mod
    bindings = list(body.blocks[0].bindings)
    params = {p: i for i, p in enumerate(main.params)}
    values = {b.var: b.value for b in bindings}
    index_of = {b.var: i for i, b in enumerate(bindings)}
    result = values.get(body.body, body.body)
    returned = list(result.fields) if isinstance(result, rx.Tuple) else [result]
    returned_set = set(returned)
    uses: dict[Any, list[int]] = {}
    for i, b in enumerate(bindings):
        for v in rx.analysis.free_vars(b.value):
            uses.setdefault(v, []).append(i)
    out_types = [v.ty for v in returned]
    # buffers a kernel may write over: inputs of an output's shape and dtype (the ones
    # CompiledGraph copies first), then the values already written over them
    writable = {p for p in main.params if any(tvm_ffi.structural_equal(p.ty, t)
                                              for t in out_types)}
    donated: set = set()
    aliased: dict[str, Any] = {}           # kernel name -> its copy without noalias
    drop: set[int] = set()
    replace: dict[int, Any] = {}
    for i, b in enumerate(bindings[:-1]):
        call, alias = b.value, bindings[i + 1]
        if not (isinstance(call, rx.Call) and isinstance(call.op, tvm().ir.GlobalVar)):
            continue
        args = list(call.args)
        out = args[-1] if args else None
        if out not in values or not _is_alloc(values[out]) or \
                not (isinstance(alias.value, rx.Var) and alias.value.same_as(out)) or \
                len(uses.get(out, ())) != 2:
            continue
        func = mod[call.op]
        if not isinstance(func, tvm().tirx.PrimFunc) or len(func.params) != len(args):
            continue
        for j, a in enumerate(args[:-1]):
            if a not in writable or a in donated or a in returned_set or \
                    sum(x.same_as(a) for x in args) != 1 or uses[a][-1] != i or \
                    not tvm_ffi.structural_equal(a.ty, out.ty) or \
                    not _pointwise(func, j, len(args) - 1):
                continue
            name = call.op.name_hint
            if name not in aliased:
                aliased[name] = func.without_attr(NOALIAS)
            args[-1] = a
            replace[i] = ("call", name, args, call)
            replace[i + 1] = rx.VarBinding(alias.var, a)
            drop.add(index_of[out])
            donated.add(a)
            writable.add(alias.var)
            break
    if not donated:
        return mod
    builder = rx.BlockBuilder(mod)
    gvars = {name: builder.add_func(func, f"{name}_donated") for name, func in aliased.items()}
    mod = builder.get()
    new = []
    for i, b in enumerate(bindings):
        if i in drop:
            continue
        r = replace.get(i)
        if r is None:
            new.append(b)
        elif isinstance(r, tuple):
            _, name, args, call = r
            new.append(rx.VarBinding(b.var, rx.Call(gvars[name], args, call.attrs,
                                                    call.ty_args)))
        else:
            new.append(r)
    seq = rx.SeqExpr([rx.BindingBlock(new)], body.body)
    mod["main"] = rx.Function(main.params, seq, main.ret_ty, main.is_pure, main.attrs)
    return mod


def _is_alloc(value: Any) -> bool:
    rx = relax()
    return isinstance(value, rx.Call) and getattr(value.op, "name", "") == \
        "relax.builtin.alloc_tensor"


def _pointwise(func: Any, src: int, dst: int) -> bool:
    """Whether PrimFunc `func` reads buffer parameter `src` only in the one block that
    writes parameter `dst`, at the very element it writes there, in a data-parallel
    block: then writing `dst` over `src` gives the same values."""
    s_tir = tvm().s_tir
    try:
        sch = s_tir.Schedule(tvm().IRModule({"main": func}))
        blocks = [sch.get(b) for b in sch.get_child_blocks(sch.get_sblock("root"))]
    except Exception:        # not a block-form kernel: leave it alone
        return False
    src_var, dst_var = func.params[src], func.params[dst]
    writers = [b for b in blocks if any(r.source.same_as(dst_var) for r in b.writes)]
    readers = [b for b in blocks if any(r.source.same_as(src_var) for r in b.reads)]
    if len(writers) != 1 or any(not r.same_as(writers[0]) for r in readers):
        return False
    block = writers[0]
    if any(int(iv.iter_type) != 0 for iv in block.iter_vars):
        return False
    if any(r.source.same_as(dst_var) for b in blocks if not b.same_as(block)
           for r in b.reads):
        return False
    (written,) = [r for r in block.writes if r.source.same_as(dst_var)]
    if not all(_is_one(rg.extent) for rg in written.region):
        return False
    for r in block.reads:
        if r.source.same_as(src_var) or r.source.same_as(dst_var):
            if len(r.region) != len(written.region) or not all(
                    _is_one(a.extent) and tvm_ffi.structural_equal(a.min, b.min)
                    for a, b in zip(r.region, written.region)):
                return False
    return True


def _is_one(e: Any) -> bool:
    try:
        return int(e) == 1
    except (TypeError, ValueError):
        return False
