"""Strided views: a value made by reshape / transpose / static subtensor from another one.

Attention's q, k and v are such views of the QKV projection's output (reshape to (b, s,
3, h, d), transpose, take [0], [1], [2]); lowered as written, each step is a copy
kernel. A kernel that reads its operand through the view's strides (element (i0, i1,
...) at offset + sum(i_k * stride_k) of the base, flattened) needs none of them.
"""
from __future__ import annotations

from dataclasses import dataclass

from megtrace.ir import Graph, Node, Var

_VIEW_OPS = ("reshape", "transpose", "subtensor")


def _contiguous(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step)
        step *= d
    return tuple(reversed(strides))


@dataclass(frozen=True)
class StridedView:
    """Elements of a flat base of `base_size` elements: shape, strides, offset."""

    base_size: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int = 0

    @classmethod
    def whole(cls, shape: tuple[int, ...]) -> StridedView:
        size = 1
        for d in shape:
            size *= d
        return cls(size, tuple(shape), _contiguous(tuple(shape)))

    @property
    def contiguous(self) -> bool:
        return self.offset == 0 and self.strides == _contiguous(self.shape)

    def flat_index(self, idx):
        """The base offset of element `idx` (PrimExprs or ints)."""
        out = self.offset
        for i, s in zip(idx, self.strides):
            out = out + i * s
        return out

    def reshape(self, shape: tuple[int, ...]) -> StridedView | None:
        """Only a contiguous view reshapes without a copy here (None otherwise)."""
        if not self.contiguous:
            return None
        return StridedView(self.base_size, tuple(shape), _contiguous(tuple(shape)))

    def transpose(self, pattern) -> StridedView | None:
        if sorted(pattern) != list(range(len(self.shape))):
            return None                 # 'x' (new axes) or a partial pattern
        return StridedView(self.base_size, tuple(self.shape[p] for p in pattern),
                           tuple(self.strides[p] for p in pattern), self.offset)

    def subtensor(self, index) -> StridedView | None:
        """Static rows (axis, start, stop, step, idx): idx picks one element and drops
        the axis, else a slice with a positive step."""
        shape, strides, offset, drop = list(self.shape), list(self.strides), self.offset, []
        for axis, start, stop, step, idx in index:
            size = shape[axis]
            if idx is not None:
                i = idx + size if idx < 0 else idx
                if not 0 <= i < size:
                    return None
                offset += i * strides[axis]
                drop.append(axis)
                continue
            b, e, s = slice(start, stop, step).indices(size)
            if s <= 0:
                return None
            offset += b * strides[axis]
            shape[axis] = max(0, (e - b + s - 1) // s)
            strides[axis] *= s
        keep = [a for a in range(len(shape)) if a not in drop]
        return StridedView(self.base_size, tuple(shape[a] for a in keep),
                           tuple(strides[a] for a in keep), offset)


def trace_view(var: Var, graph: Graph, producer: dict[Var, Node]) -> tuple[Var, StridedView,
                                                                         list[Node]]:
    """(base, view of base equal to var, the view nodes between them), following
    float32 reshape / transpose / static subtensor back as far as they stay views."""
    chain: list[Node] = []
    node = producer.get(var)
    while node is not None and node.op.name in _VIEW_OPS and node.outputs[0] not in graph.outputs:
        if node.op.name == "subtensor" and len(node.inputs) != 1:
            break                       # run-time bounds
        chain.append(node)
        node = producer.get(node.inputs[0])
    for start in range(len(chain), 0, -1):   # the longest chain that stays a view
        base = chain[start - 1].inputs[0]
        view: StridedView | None = StridedView.whole(tuple(base.type.shape))
        for n in reversed(chain[:start]):
            view = _apply(view, n)
            if view is None:
                break
        if view is not None:
            return base, view, chain[:start]
    return var, StridedView.whole(tuple(var.type.shape)), []


def _apply(view: StridedView, node: Node) -> StridedView | None:
    name, p, out = node.op.name, node.kwargs, tuple(node.outputs[0].type.shape)
    if name == "reshape":
        result = view.reshape(out)
    elif name == "transpose":
        result = view.transpose(tuple(p["pattern"]))
    else:
        result = view.subtensor(p["index"])
    return result if result is not None and result.shape == out else None
