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


def stop_gradient(x: Any) -> Expr:
    """``x`` as a constant for differentiation: the graph computes no gradient through it."""
    return StopGradient()(x)
