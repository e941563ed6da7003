"""Iterative topological sort: deep graphs (10,000+ nodes) never touch the recursion limit."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..expr.node import Expr


def topological_order(
    outputs: list[Expr], skip: Callable[[Expr], bool] | None = None
) -> list[Expr]:
    """Every node the ``outputs`` depend on, each after all of its inputs (depth-first post-order,
    inputs in order, so the result is deterministic). Nodes for which ``skip`` is true are left
    out together with everything behind them."""
    order: list[Expr] = []
    seen: set[int] = set()
    for root in outputs:
        if id(root) in seen:
            continue
        seen.add(id(root))
        stack: list[tuple[Expr, int]] = [(root, 0)]
        while stack:
            node, next_input = stack[-1]
            if next_input < len(node.inputs):
                stack[-1] = (node, next_input + 1)
                child = node.inputs[next_input]
                if id(child) not in seen and not (skip is not None and skip(child)):
                    seen.add(id(child))
                    stack.append((child, 0))
            else:
                stack.pop()
                order.append(node)
    return order
