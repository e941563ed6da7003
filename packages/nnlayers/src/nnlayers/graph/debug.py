"""Debugging aids: the graph as text (with shapes) and as Graphviz dot."""

from __future__ import annotations

from typing import Any

from .analysis import Analysis


def _attrs(op: Any) -> str:
    items = ", ".join(f"{k}={v!r}" for k, v in op.attributes().items())
    return f"[{items}]" if items else ""


def dump(a: Analysis) -> str:
    """``%3 = matmul(%0 'x', %1 'W') : (None, 5) float32  'logits'  # grad`` lines, sources first
    in topological order; the outputs and the wrt nodes are marked."""
    outputs = set(a.outputs)
    wrt = set(a.wrt)
    lines = []
    for i, node in enumerate(a.nodes):
        if node.op is None:
            body = node.kind
        else:
            args = ", ".join(
                f"%{j}" + (f" {a.nodes[j].name!r}" if a.nodes[j].name else "") for j in a.inputs[i]
            )
            body = f"{node.op.name}{_attrs(node.op)}({args})"
        tags = []
        if node.name:
            tags.append(repr(node.name))
        if i in outputs:
            tags.append(f"output {a.outputs.index(i)}")
        if i in wrt:
            tags.append("wrt")
        if a.on_path[i]:
            tags.append("grad")
        lines.append(f"%{i} = {body} : {node.spec}" + (f"  # {', '.join(tags)}" if tags else ""))
    return "\n".join(lines)


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def to_dot(a: Analysis) -> str:
    """A ``digraph``: sources as boxes (parameters filled), ops as ellipses, an edge from each input to its consumer."""
    lines = ["digraph nnlayers {", "  rankdir=TB;", '  node [fontname="Helvetica"];']
    outputs = set(a.outputs)
    for i, node in enumerate(a.nodes):
        parts = [node.kind, *([node.name] if node.name else []), str(node.spec)]
        label = "\\n".join(_escape(p) for p in parts)
        shape = "box" if node.op is None else "ellipse"
        style = ', style=filled, fillcolor="#dde8f7"' if node.kind == "parameter" else ""
        if i in outputs:
            style = ", peripheries=2" + style
        lines.append(f'  n{i} [label="{label}", shape={shape}{style}];')
    for i, ins in enumerate(a.inputs):
        for j in ins:
            lines.append(f"  n{j} -> n{i};")
    lines.append("}")
    return "\n".join(lines)
