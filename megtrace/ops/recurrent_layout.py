"""Where each cell's weights sit in MegEngine's RNN/LSTM `flatten_weights` (shared by the
ops in recurrent.py, their VJP in recurrent_vjp.py and the modules in module/rnn.py)."""
from __future__ import annotations

Piece = tuple[int, tuple[int, ...], int]      # (offset, shape, element count)


def columns(input_size: int, hidden: int, layers: int, dirs: int, bias: bool) -> int:
    """flatten_weights' second dim (the first is gate_hidden): MegEngine's size_dim1."""
    cols = dirs * (input_size + hidden) + (layers - 1) * dirs * (dirs * hidden + hidden)
    return cols + (2 * dirs * layers if bias else 0)


def cell_pieces(input_size: int, hidden: int, layers: int, dirs: int, bias: bool,
                gate: int) -> list[list[Piece | None]]:
    """Per cell (layer-major, then direction) W_ih, W_hh, b_ih, b_hh as one flat run of
    the buffer; the biases are None without `bias`."""
    out, at = [], 0
    for layer in range(layers):
        in_l = input_size if layer == 0 else dirs * hidden
        for _ in range(dirs):
            cell: list[Piece | None] = []
            for shape in ((gate, in_l), (gate, hidden)) + (((gate,), (gate,)) if bias else ()):
                n = 1
                for d in shape:
                    n *= d
                cell.append((at, shape, n))
                at += n
            out.append(cell if bias else cell + [None, None])
    return out


def cell_weights(w, input_size: int, hidden: int, layers: int, dirs: int, bias: bool,
                 gate: int) -> list[list]:
    """Per cell [W_ih, W_hh, b_ih, b_hh] sliced from `w` (a Tensor or a NumPy array);
    the biases are None without `bias`."""
    flat = w.reshape(-1)
    return [[None if q is None else flat[q[0]:q[0] + q[2]].reshape(q[1]) for q in cell]
            for cell in cell_pieces(input_size, hidden, layers, dirs, bias, gate)]
