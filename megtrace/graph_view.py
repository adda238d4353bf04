"""How a `Graph` shows itself in a REPL and in Jupyter: a one-line summary and a drawing.

The drawing is Graphviz DOT rendered to SVG by the `dot` program when it is installed
(`apt-get install graphviz`, `brew install graphviz`, `conda install graphviz`); without it,
or when `dot` fails, the graph is shown as an HTML table instead. A notebook cell that
displays a graph never raises because of the drawing. Constants (weights) are never shown.
"""
from __future__ import annotations

import html
import shutil
import subprocess
from collections import Counter
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .ir import Graph, Node, Var

# `dot` on a graph this large takes long and the picture is unreadable anyway.
MAX_DRAWN_NODES = 600
MAX_TABLE_ROWS = 300
DOT_TIMEOUT_S = 30


def summary(graph: "Graph", max_inputs: int = 2, max_ops: int = 6) -> str:
    """`<Graph: 1 input data: f32[1,3,32,32], 24 nodes (conv2d x4, relu x4, ...), 1 output>`."""
    ins = [f"{n}: {v.type}" for v, n in zip(graph.inputs, graph.input_names)]
    shown = ", ".join(ins[:max_inputs]) + (", ..." if len(ins) > max_inputs else "")
    counts = Counter(node.op.name for node in graph.nodes).most_common()
    ops = ", ".join(f"{name} x{k}" for name, k in counts[:max_ops])
    ops += ", ..." if len(counts) > max_ops else ""
    outs = [f"{n}: {v.type}" for v, n in zip(graph.outputs, graph.output_names)]
    shown_outs = ", ".join(outs[:max_inputs]) + (", ..." if len(outs) > max_inputs else "")
    return (f"<Graph: {_plural(len(ins), 'input')} {shown}, "
            f"{_plural(len(graph.nodes), 'node')}" + (f" ({ops})" if ops else "")
            + f", {_plural(len(graph.consts), 'constant')}, "
            f"{_plural(len(outs), 'output')} {shown_outs}>")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def to_dot(graph: "Graph") -> str:
    """Graphviz DOT source: inputs and outputs as ellipses, ops as boxes, edges labelled
    with the tensor type they carry. Edges from constants are left out."""
    def q(text: str) -> str:
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'

    lines = ["digraph megtrace {", '  rankdir=TB; node [fontname="Helvetica", fontsize=10];',
             '  edge [fontname="Helvetica", fontsize=8, color="#666666"];']
    source: dict["Var", str] = {}
    for i, (var, name) in enumerate(zip(graph.inputs, graph.input_names)):
        source[var] = f"in{i}"
        lines.append(f"  in{i} [shape=ellipse, style=filled, fillcolor=\"#d8ecff\", "
                     f"label={q(_two_lines(name, var))}];")
    for i, node in enumerate(graph.nodes):
        lines.append(f"  n{i} [shape=box, style=\"rounded,filled\", fillcolor=\"#f4f4f4\", "
                     f"label={q(_op_label(node))}];")
        for var in node.inputs:
            if var in source:
                lines.append(f"  {source[var]} -> n{i} [label={q(str(var.type))}];")
        for var in node.outputs:
            source[var] = f"n{i}"
    for i, (var, name) in enumerate(zip(graph.outputs, graph.output_names)):
        lines.append(f"  out{i} [shape=ellipse, style=filled, fillcolor=\"#dff5d8\", "
                     f"label={q(_two_lines(name, var))}];")
        if var in source:
            lines.append(f"  {source[var]} -> out{i} [label={q(str(var.type))}];")
    lines.append("}")
    return "\n".join(lines)


def _op_label(node: "Node", max_params: int = 3) -> str:
    """The op name, then the params that differ from the op's defaults (one a line)."""
    changed = [f"{k}={v!r}" for k, v in node.params if node.op.params.get(k) != v]
    lines = [node.op.name] + [p if len(p) <= 32 else p[:29] + "..." for p in changed[:max_params]]
    return "\n".join(lines + (["..."] if len(changed) > max_params else []))


def _two_lines(name: str, var: "Var") -> str:
    return f"{name}\n{var.type}"


def can_draw(graph: "Graph") -> bool:
    """Whether `to_svg` will try: `dot` is installed and the graph is not too large."""
    return shutil.which("dot") is not None and len(graph.nodes) <= MAX_DRAWN_NODES


def to_svg(graph: "Graph") -> str | None:
    """The graph drawn as SVG by Graphviz's `dot`, or None when it cannot be drawn."""
    dot = shutil.which("dot")
    if dot is None or not can_draw(graph):
        return None
    try:
        done = subprocess.run([dot, "-Tsvg"], input=to_dot(graph).encode(),
                              capture_output=True, timeout=DOT_TIMEOUT_S, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.decode("utf-8", "replace")


def to_html_table(graph: "Graph") -> str:
    """The text IR as an HTML table (one row per input, node and output): the fallback."""
    nm = graph.names()
    esc = html.escape
    rows = [f"<tr><td>input</td><td>{esc(nm[v])}</td><td>{esc(str(v.type))}</td><td></td></tr>"
            for v in graph.inputs]
    for node in graph.nodes[:MAX_TABLE_ROWS]:
        outs = ", ".join(f"{nm[v]}: {v.type}" for v in node.outputs)
        args = ", ".join(nm[v] for v in node.inputs)
        rows.append(f"<tr><td>{esc(node.op.name)}</td><td>{esc(outs)}</td>"
                    f"<td>{esc(args)}</td><td>{esc(', '.join(f'{k}={v!r}' for k, v in node.params))}"
                    "</td></tr>")
    if len(graph.nodes) > MAX_TABLE_ROWS:
        rows.append(f"<tr><td colspan=4>... {len(graph.nodes) - MAX_TABLE_ROWS} more nodes"
                    "</td></tr>")
    rows += [f"<tr><td>output</td><td>{esc(n)}</td><td>{esc(str(v.type))}</td>"
             f"<td>{esc(nm[v])}</td></tr>" for v, n in zip(graph.outputs, graph.output_names)]
    return (f"<p>{esc(summary(graph))}</p><table><tr><th>op</th><th>values</th><th>inputs</th>"
            f"<th>params</th></tr>{''.join(rows)}</table>")
