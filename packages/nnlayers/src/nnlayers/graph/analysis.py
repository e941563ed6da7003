"""What a graph needs before any shape is known: node order, sources, where gradients flow."""

from __future__ import annotations

from dataclasses import dataclass

from ..expr.node import Constant, Expr, Placeholder
from ..parameter import Parameter


@dataclass
class Analysis:
    """Static facts about a graph, shared by all of its specialised plans.

    ``needs[i][k]`` says whether node ``i`` sends a gradient to its ``k``-th input; ``on_path[i]``
    whether node ``i`` receives one from the loss (the first output).
    """

    nodes: list[Expr]
    inputs: list[tuple[int, ...]]
    outputs: list[int]
    placeholders: list[int]
    parameters: list[int]
    constants: list[int]
    wrt: list[int]
    on_path: list[bool]
    needs: list[tuple[bool, ...]]


def analyse(nodes: list[Expr], outputs: list[Expr], wrt: list[Expr]) -> Analysis:
    """Index the nodes (already in topological order) and decide where gradients flow."""
    index = {id(n): i for i, n in enumerate(nodes)}
    inputs = [tuple(index[id(x)] for x in n.inputs) for n in nodes]
    wrt_idx = []
    for w in wrt:
        if id(w) not in index:
            raise ValueError(f"wrt: {w.describe()} is not part of this graph")
        wrt_idx.append(index[id(w)])
    targets = set(wrt_idx)

    def flows(node: Expr, k: int, j: int) -> bool:
        return k not in node.op.nondiff_inputs and nodes[j].spec.is_float  # type: ignore[union-attr]

    requires = [False] * len(nodes)
    for i, node in enumerate(nodes):
        if i in targets:
            requires[i] = True
        elif node.op is not None and node.op.differentiable:
            requires[i] = any(requires[j] and flows(node, k, j) for k, j in enumerate(inputs[i]))
    on_path = [False] * len(nodes)
    loss = index[id(outputs[0])]
    on_path[loss] = requires[loss]
    needs: list[tuple[bool, ...]] = [()] * len(nodes)
    for i in reversed(range(len(nodes))):
        node = nodes[i]
        if not on_path[i] or node.op is None:
            continue
        needs[i] = tuple(requires[j] and flows(node, k, j) for k, j in enumerate(inputs[i]))
        for j, need in zip(inputs[i], needs[i], strict=True):
            on_path[j] = on_path[j] or need
    return Analysis(
        nodes=nodes,
        inputs=inputs,
        outputs=[index[id(o)] for o in outputs],
        placeholders=[i for i, n in enumerate(nodes) if isinstance(n, Placeholder)],
        parameters=[i for i, n in enumerate(nodes) if isinstance(n, Parameter)],
        constants=[i for i, n in enumerate(nodes) if isinstance(n, Constant)],
        wrt=wrt_idx,
        on_path=on_path,
        needs=needs,
    )
