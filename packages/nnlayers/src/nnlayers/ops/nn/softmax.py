"""Softmax and log-softmax along an axis (numerically stable arraycore ``nn`` kernels)."""

from __future__ import annotations

from typing import Any

from arraycore import ArrayNamespace

from ...expr.node import Expr
from ...expr.spec import Spec, normalize_axes
from ..base import Grads, Inputs, Needs, Op, require_float


class Softmax(Op):
    """``exp(x) / sum(exp(x))`` along ``axis``; backward ``y * (dy - sum(dy * y))``."""

    fresh_grads = True

    name = "softmax"
    keep_output = True

    def __init__(self, axis: int) -> None:
        self.axis = axis

    def infer(self, x: Spec) -> Spec:
        require_float(self.name, x)
        (self.ax,) = normalize_axes(self.axis, x.ndim)
        return x

    def forward(self, xp: ArrayNamespace, x: Any) -> Any:
        return xp.nn.softmax(x, axis=self.ax)

    def backward(
        self, xp: ArrayNamespace, dy: Any, inputs: Inputs, output: Any, residual: Any, needs: Needs
    ) -> Grads:
        return (xp.nn.softmax_backward(dy, output, axis=self.ax),)


class LogSoftmax(Op):
    """``x - logsumexp(x)`` along ``axis``; backward ``dy - exp(y) * sum(dy)``."""

    fresh_grads = True

    name = "log_softmax"
    keep_output = True

    def __init__(self, axis: int) -> None:
        self.axis = axis

    def infer(self, x: Spec) -> Spec:
        require_float(self.name, x)
        (self.ax,) = normalize_axes(self.axis, x.ndim)
        return x

    def forward(self, xp: ArrayNamespace, x: Any) -> Any:
        return xp.nn.log_softmax(x, axis=self.ax)

    def backward(
        self, xp: ArrayNamespace, dy: Any, inputs: Inputs, output: Any, residual: Any, needs: Needs
    ) -> Grads:
        total = xp.sum(dy, axis=self.ax, keepdims=True)
        return (xp.subtract(dy, xp.multiply(xp.exp(output), total)),)


def softmax(x: Any, axis: int = -1) -> Expr:
    """Softmax along ``axis``."""
    return Softmax(axis)(x)


def log_softmax(x: Any, axis: int = -1) -> Expr:
    """Log-softmax along ``axis``."""
    return LogSoftmax(axis)(x)
