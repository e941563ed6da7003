"""Trigonometric functions: sine and cosine (radians)."""

from __future__ import annotations

from typing import Any

from arraycore import ArrayNamespace

from ...expr.node import Expr
from ..base import Grads, Inputs, Needs, Unary


class Sin(Unary):
    """Sine; backward ``dy * cos(x)``."""

    fresh_grads = True

    name = "sin"
    keep_inputs = (0,)

    def forward(self, xp: ArrayNamespace, x: Any) -> Any:
        return xp.sin(x)

    def backward(
        self, xp: ArrayNamespace, dy: Any, inputs: Inputs, output: Any, residual: Any, needs: Needs
    ) -> Grads:
        return (xp.multiply(dy, xp.cos(inputs[0])),)


class Cos(Unary):
    """Cosine; backward ``-dy * sin(x)``."""

    fresh_grads = True

    name = "cos"
    keep_inputs = (0,)

    def forward(self, xp: ArrayNamespace, x: Any) -> Any:
        return xp.cos(x)

    def backward(
        self, xp: ArrayNamespace, dy: Any, inputs: Inputs, output: Any, residual: Any, needs: Needs
    ) -> Grads:
        return (xp.negative(xp.multiply(dy, xp.sin(inputs[0]))),)


def sin(x: Any) -> Expr:
    """Element-wise sine of ``x`` (radians)."""
    return Sin()(x)


def cos(x: Any) -> Expr:
    """Element-wise cosine of ``x`` (radians)."""
    return Cos()(x)


__all__ = ["cos", "sin"]
