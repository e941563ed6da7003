"""Gradient control: stop_gradient."""

from __future__ import annotations

from typing import Any

from arraycore import ArrayNamespace

from ..expr.node import Expr
from ..expr.spec import Spec
from .base import Op


class StopGradient(Op):
    """``x`` unchanged; no gradient flows back through it."""

    name = "stop_gradient"
    differentiable = False

    def infer(self, x: Spec) -> Spec:
        return x

    def forward(self, xp: ArrayNamespace, x: Any) -> Any:
        return x


class Alias(Op):
    """Its input itself, the same array, and ``dy`` for its gradient: what a plan puts in place
    of an op whose work a fused op before it took over (a ReLU after a batch norm, see
    :func:`nnlayers.graph.fusion.fuse`), so the graph's nodes and slots stay as they were."""

    plan_only = True

    def __init__(self, replaced: str, by: str) -> None:
        self.name = f"{replaced}_in_{by}"  # type: ignore[misc]

    def infer(self, x: Spec, *rest: Spec) -> Spec:
        return x  # (``rest``: inputs the replaced op read for their shapes alone)

    def forward(self, xp: ArrayNamespace, x: Any, *rest: Any) -> Any:
        return x

    def backward(
        self, xp: ArrayNamespace, dy: Any, inputs: Any, output: Any, residual: Any, needs: Any
    ) -> tuple[Any, ...]:
        return (dy, *(None,) * (len(needs) - 1))


def stop_gradient(x: Any) -> Expr:
    """``x`` as a constant for differentiation: the graph computes no gradient through it."""
    return StopGradient()(x)
