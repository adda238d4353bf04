"""Gradient rules replayed as the ops they applied (issue 11: a traced training step's
backward pass is most of its replayed Python).

A replay re-runs the traced function, backward pass included, and checks every op
against the tape. A node's gradient rule (`OpDef.vjp`) is Tensor code whose ops depend
only on the node: its op and parameters, which inputs want a gradient, and the values it
reads, which in a replay are the same tape values (traced vars) every call, or outside
tensors of the same shape and dtype. So the first replay that runs a node's rule also
notes the ops it applied (`dispatch.apply_log`): each input as a slot (one of the node's
inputs, outputs or output gradients, an earlier op's result, or a constant the rule
made); later replays apply those ops again, through `dispatch.apply`, so the replayer
still checks each one against the tape (a recipe that no longer fits fails as the rule
would). The rule itself runs whenever a node's inputs differ in kind, a rule did more
than apply ops and make constants (read a value, assign, draw random numbers), or
something changes how ops are applied (autocast, or a format mark on one of the node's
tensors). The contract this needs of a rule (every rule in megtrace/ops keeps it): it
reads its tensors' shapes and dtypes, never their values, and makes constants from
Python numbers and shapes only.
"""
from __future__ import annotations

from .. import dispatch, formats
from ..tensor import constant

_UNKNOWN = object()


def run_backward(node, outs: tuple, wanted: tuple) -> tuple:
    """`node.backward(outs, wanted)`, replayed from a recipe where one is known."""
    rec = dispatch.active_recorder()
    recipes = getattr(rec, "vjp_recipes", None)
    op = node.op
    if recipes is None or op is None or op.random or dispatch.autocast is not None \
            or dispatch.apply_log is not None:
        return node.backward(outs, wanted)
    inputs, outputs = node.saved
    if formats.in_use and _formatted(inputs, outputs, outs):
        # the rule's results take formats from these tensors (dispatch.apply), which a
        # recipe handed straight to the replayer would not; on tensors without one,
        # every result of the rule is "default" either way
        return node.backward(outs, wanted)
    # what a rule may see of its values: a traced value by its var (its shape and dtype
    # with it), an outside or constant one by shape and dtype, no gradient as None
    key = (op, wanted, *[None if t is None else v if (v := t._var) is not None else
                         (t._value.shape, t._value.dtype) for t in (*inputs, *outputs, *outs)])
    recipe = recipes.get(key, _UNKNOWN)
    if recipe is _UNKNOWN:
        grads, recipe = _record(rec, node, outs, wanted)
        recipes[key] = recipe
        return grads
    if recipe is None:
        return node.backward(outs, wanted)
    if dispatch.tape_hook is None and dispatch.profile_hook is None:
        # apply() would do nothing but hand each op to the replayer: hand it directly
        return _replay(recipe, [*inputs, *outputs, *outs], rec.record)
    return _replay(recipe, [*inputs, *outputs, *outs])


def _formatted(*groups) -> bool:
    """Whether a tensor of the node carries a format mark (megtrace/formats.py)."""
    return any(t is not None and t._format != "default" for group in groups for t in group)


def _replay(recipe, slots: list, record=None) -> tuple:
    """Apply the recipe's ops to `slots` (the node's inputs, outputs and output
    gradients); `record`: the replayer's, called in apply's place."""
    steps, grads = recipe
    for op, refs, params in steps:
        if op is None:              # a constant the rule made: made again, as it was
            slots.append(constant(refs, params))
        elif record is not None:
            slots.extend(record(op, tuple([slots[r] for r in refs]), params))
        else:
            result = dispatch.apply(op, *[slots[r] for r in refs], **params)
            if type(result) is tuple:
                slots.extend(result)
            else:
                slots.append(result)
    return tuple([None if r is None else slots[r] for r in grads])


def _record(rec, node, outs: tuple, wanted: tuple):
    """Run the rule, noting what it applies: (its gradients, its recipe or None)."""
    made, effects, pc = rec.created_mark(), rec.effects, rec.pc
    log: list = []
    dispatch.apply_log = log
    try:
        grads = node.backward(outs, wanted)
    finally:
        dispatch.apply_log = None
    if rec.effects != effects or len(log) != rec.pc - pc:
        # (the log misses ops the replayer checked: another thread's rule took it)
        return grads, None
    inputs, outputs = node.saved
    return grads, _recipe(rec, [*inputs, *outputs, *outs], log,
                          {id(t): t for t in rec.created_since(made)}, grads)


def _recipe(rec, slots: list, log: list, created: dict, grads: tuple):
    """(steps, gradient slots) from what the rule applied; None when an input is none
    of the slots (a tensor from outside the node, or one the rule's ops did not make)."""
    by_var, by_id = {}, {}
    for i, t in enumerate(slots):
        if t is None:
            continue
        if t._owner is rec:
            by_var.setdefault(t._var, i)
        else:
            by_id.setdefault(id(t), i)
    count, steps = len(slots), []
    # a constant holding an outside value of the node (Tensor(x) of a parameter) would
    # keep this call's value: such a rule is not kept
    outside = [t._value for t in slots if t is not None and t._owner is None]

    def slot(t, owner, var, value):
        nonlocal count
        if owner is rec:
            return by_var.get(var)
        if owner is not None or var is not None:
            return None
        found = by_id.get(id(t))
        if found is None and created.get(id(t)) is t and value is not None and \
                not any(value is v or value.base is v for v in outside):
            steps.append((None, value, t._device))        # made by the rule
            found = by_id[id(t)] = count
            count += 1
        return found

    for lrec, op, inputs, params, outs in log:
        if lrec is not rec or op.random:
            return None
        refs = tuple(slot(*seen) for seen in inputs)
        if None in refs:
            return None
        steps.append((op, refs, dict(params)))
        for t in outs:
            if t._owner is not rec:
                return None
            by_var[t._var] = count
            count += 1
    refs = []
    for g in grads:
        if g is None:
            refs.append(None)
            continue
        found = slot(g, g._owner, g._var, g._value)
        if found is None:
            return None
        refs.append(found)
    return tuple(steps), tuple(refs)
