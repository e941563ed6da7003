"""Exponentials and logarithms: exp, log, log1p."""

from __future__ import annotations

from typing import Any

from arraycore import ArrayNamespace

from ...expr.node import Expr
from ..base import Grads, Inputs, Needs, Unary


class Exp(Unary):
    """``exp(x)``; backward ``dy * y``."""

    fresh_grads = True

    name = "exp"
    keep_output = True

    def forward(self, xp: ArrayNamespace, x: Any) -> Any:
        return xp.exp(x)

    def backward(
        self, xp: ArrayNamespace, dy: Any, inputs: Inputs, output: Any, residual: Any, needs: Needs
    ) -> Grads:
        return (xp.multiply(dy, output),)


class Log(Unary):
    """Natural logarithm; backward ``dy / x``."""

    fresh_grads = True

    name = "log"
    keep_inputs = (0,)

    def forward(self, xp: ArrayNamespace, x: Any) -> Any:
        return xp.log(x)

    def backward(
        self, xp: ArrayNamespace, dy: Any, inputs: Inputs, output: Any, residual: Any, needs: Needs
    ) -> Grads:
        return (xp.divide(dy, inputs[0]),)


class Log1p(Unary):
    """``log(1 + x)``, accurate near zero; backward ``dy / (1 + x)``."""

    fresh_grads = True

    name = "log1p"
    keep_inputs = (0,)

    def forward(self, xp: ArrayNamespace, x: Any) -> Any:
        return xp.log1p(x)

    def backward(
        self, xp: ArrayNamespace, dy: Any, inputs: Inputs, output: Any, residual: Any, needs: Needs
    ) -> Grads:
        return (xp.divide(dy, xp.add(inputs[0], 1.0)),)


def exp(x: Any) -> Expr:
    """Element-wise exponential."""
    return Exp()(x)


def log(x: Any) -> Expr:
    """Element-wise natural logarithm."""
    return Log()(x)


def log1p(x: Any) -> Expr:
    """Element-wise ``log(1 + x)``."""
    return Log1p()(x)
