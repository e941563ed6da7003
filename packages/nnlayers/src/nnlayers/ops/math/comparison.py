"""Comparisons and selection: maximum, minimum, clip, where, the comparison operators, astype."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from arraycore import ArrayNamespace

from ...expr.node import Expr
from ...expr.spec import Spec, broadcast_shapes
from ..base import (
    Broadcasting,
    Grads,
    Inputs,
    Needs,
    Op,
    Unary,
    reduction_plan,
    result_dtype,
    unbroadcast,
)


class Maximum(Broadcasting):
    """Element-wise maximum; the gradient goes to ``x1`` where ``x1 >= x2``, else to ``x2``."""

    fresh_grads = True

    name = "maximum"
    keep_inputs = True

    def forward(self, xp: ArrayNamespace, x1: Any, x2: Any) -> Any:
        return xp.maximum(x1, x2)

    def backward(
        self, xp: ArrayNamespace, dy: Any, inputs: Inputs, output: Any, residual: Any, needs: Needs
    ) -> Grads:
        first = xp.greater_equal(inputs[0], inputs[1])
        return (
            self.reduce(xp, xp.where(first, dy, 0.0), 0) if needs[0] else None,
            self.reduce(xp, xp.where(first, 0.0, dy), 1) if needs[1] else None,
        )


class Minimum(Broadcasting):
    """Element-wise minimum; the gradient goes to ``x1`` where ``x1 <= x2``, else to ``x2``."""

    fresh_grads = True

    name = "minimum"
    keep_inputs = True

    def forward(self, xp: ArrayNamespace, x1: Any, x2: Any) -> Any:
        return xp.minimum(x1, x2)

    def backward(
        self, xp: ArrayNamespace, dy: Any, inputs: Inputs, output: Any, residual: Any, needs: Needs
    ) -> Grads:
        first = xp.less_equal(inputs[0], inputs[1])
        return (
            self.reduce(xp, xp.where(first, dy, 0.0), 0) if needs[0] else None,
            self.reduce(xp, xp.where(first, 0.0, dy), 1) if needs[1] else None,
        )


class Clip(Unary):
    """``x`` limited to ``[low, high]`` (Python numbers); the gradient passes inside the range."""

    name = "clip"
    keep_inputs = (0,)

    def __init__(self, low: float | None, high: float | None) -> None:
        self.low = low
        self.high = high

    def forward(self, xp: ArrayNamespace, x: Any) -> Any:
        return xp.clip(x, self.low, self.high)

    def backward(
        self, xp: ArrayNamespace, dy: Any, inputs: Inputs, output: Any, residual: Any, needs: Needs
    ) -> Grads:
        x = inputs[0]
        if self.low is not None:
            dy = xp.where(xp.less(x, self.low), 0.0, dy)
        if self.high is not None:
            dy = xp.where(xp.greater(x, self.high), 0.0, dy)
        return (dy,)


class Where(Op):
    """``x1 if condition else x2`` element-wise, with broadcasting; no gradient for the condition."""

    fresh_grads = True

    name = "where"
    keep_inputs = (0,)

    def infer(self, cond: Spec, x1: Spec, x2: Spec) -> Spec:
        if cond.dtype != np.bool_:
            raise TypeError(f"the condition must be bool, got {cond.dtype.name}")
        shape = broadcast_shapes(cond.shape, x1.shape, x2.shape)
        self.in_shapes = (x1.shape, x2.shape)
        self.plans = (reduction_plan(x1.shape, shape), reduction_plan(x2.shape, shape))
        return Spec(shape, result_dtype(x1, x2))

    def forward(self, xp: ArrayNamespace, cond: Any, x1: Any, x2: Any) -> Any:
        return xp.where(cond, x1, x2)

    def backward(
        self, xp: ArrayNamespace, dy: Any, inputs: Inputs, output: Any, residual: Any, needs: Needs
    ) -> Grads:
        cond = inputs[0]
        g1 = g2 = None
        if needs[1]:
            g1 = unbroadcast(xp, xp.where(cond, dy, 0.0), self.in_shapes[0], self.plans[0])
        if needs[2]:
            g2 = unbroadcast(xp, xp.where(cond, 0.0, dy), self.in_shapes[1], self.plans[1])
        return None, g1, g2


class Compare(Op):
    """An element-wise comparison (``less``, ``greater_equal``, ...) giving bool; no gradient."""

    name = "compare"
    differentiable = False

    def __init__(self, function: str) -> None:
        self.function = function

    def infer(self, x1: Spec, x2: Spec) -> Spec:
        return Spec(broadcast_shapes(x1.shape, x2.shape), np.dtype("bool"))

    def forward(self, xp: ArrayNamespace, x1: Any, x2: Any) -> Any:
        return getattr(xp, self.function)(x1, x2)


class Astype(Op):
    """``x`` converted to ``dtype``; between floating types the gradient is cast back."""

    name = "astype"

    def __init__(self, dtype: Any) -> None:
        self.dtype = np.dtype(dtype)

    def infer(self, x: Spec) -> Spec:
        self.in_dtype = x.dtype
        return Spec(x.shape, self.dtype)

    def forward(self, xp: ArrayNamespace, x: Any) -> Any:
        return xp.astype(x, self.dtype)

    def backward(
        self, xp: ArrayNamespace, dy: Any, inputs: Inputs, output: Any, residual: Any, needs: Needs
    ) -> Grads:
        if self.in_dtype.kind != "f" or self.dtype.kind != "f":
            raise TypeError(
                f"astype: no gradient from {self.dtype.name} back to {self.in_dtype.name}; "
                f"wrap the integer input in ex.stop_gradient()"
            )
        return (xp.astype(dy, self.in_dtype),)


def maximum(x1: Any, x2: Any) -> Expr:
    """Element-wise maximum with broadcasting."""
    return Maximum()(x1, x2)


def minimum(x1: Any, x2: Any) -> Expr:
    """Element-wise minimum with broadcasting."""
    return Minimum()(x1, x2)


def clip(x: Any, low: float | None = None, high: float | None = None) -> Expr:
    """``x`` limited to ``[low, high]``; either bound may be ``None``."""
    if low is None and high is None:
        raise ValueError("clip: give low, high or both")
    return Clip(low, high)(x)


def where(condition: Any, x1: Any, x2: Any) -> Expr:
    """``x1`` where ``condition`` holds, else ``x2`` (NumPy's ``where``, with broadcasting)."""
    like = x1 if isinstance(x1, Expr) else x2 if isinstance(x2, Expr) else None
    from ...expr.node import as_expr

    return Where()(as_expr(condition), as_expr(x1, like), as_expr(x2, like))


def _compare(function: str) -> Callable[[Any, Any], Expr]:
    def compare(x1: Any, x2: Any) -> Expr:
        return Compare(function)(x1, x2)

    compare.__name__ = function
    compare.__doc__ = f"Element-wise ``{function}`` of two expressions (bool, no gradient)."
    return compare


less = _compare("less")
less_equal = _compare("less_equal")
greater = _compare("greater")
greater_equal = _compare("greater_equal")
equal = _compare("equal")
not_equal = _compare("not_equal")


def astype(x: Any, dtype: Any) -> Expr:
    """``x`` converted to ``dtype`` (float32 <-> float64 is differentiable)."""
    return Astype(dtype)(x)


__all__ = [
    "astype", "clip", "equal", "greater", "greater_equal", "less", "less_equal", "maximum",
    "minimum", "not_equal", "where",
]  # fmt: skip
