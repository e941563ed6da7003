"""Arithmetic: add, subtract, multiply, divide, power, negative, abs, square, sqrt."""

from __future__ import annotations

from typing import Any

from arraycore import ArrayNamespace

from ...expr.node import Expr
from ..base import Broadcasting, Grads, Inputs, Needs, Unary


class Add(Broadcasting):
    """``x1 + x2``; each gradient is ``dy`` summed back to its input's shape."""

    name = "add"
    fresh_output = True
    inplace_inputs = (0, 1)

    def forward(self, xp: ArrayNamespace, x1: Any, x2: Any) -> Any:
        return xp.add(x1, x2)

    def forward_inplace(self, xp: ArrayNamespace, k: int, x1: Any, x2: Any) -> Any:
        return xp.inplace.add(x1, x2, out=x2 if k else x1)

    def backward(
        self, xp: ArrayNamespace, dy: Any, inputs: Inputs, output: Any, residual: Any, needs: Needs
    ) -> Grads:
        return (
            self.reduce(xp, dy, 0) if needs[0] else None,
            self.reduce(xp, dy, 1) if needs[1] else None,
        )


class Subtract(Broadcasting):
    """``x1 - x2``."""

    name = "subtract"
    fresh_output = True
    inplace_inputs = (0, 1)

    def forward(self, xp: ArrayNamespace, x1: Any, x2: Any) -> Any:
        return xp.subtract(x1, x2)

    def forward_inplace(self, xp: ArrayNamespace, k: int, x1: Any, x2: Any) -> Any:
        return xp.inplace.subtract(x1, x2, out=x2 if k else x1)

    def backward(
        self, xp: ArrayNamespace, dy: Any, inputs: Inputs, output: Any, residual: Any, needs: Needs
    ) -> Grads:
        return (
            self.reduce(xp, dy, 0) if needs[0] else None,
            self.reduce(xp, xp.negative(dy), 1) if needs[1] else None,
        )


class Multiply(Broadcasting):
    """``x1 * x2``; keeps each input only if the other one needs a gradient."""

    fresh_grads = True

    name = "multiply"
    fresh_output = True
    inplace_inputs = (0, 1)

    def kept_inputs(self, needs: Needs, n_inputs: int) -> tuple[int, ...]:
        return tuple(i for i, other in ((0, 1), (1, 0)) if needs[other])

    def forward(self, xp: ArrayNamespace, x1: Any, x2: Any) -> Any:
        return xp.multiply(x1, x2)

    def forward_inplace(self, xp: ArrayNamespace, k: int, x1: Any, x2: Any) -> Any:
        return xp.inplace.multiply(x1, x2, out=x2 if k else x1)

    def backward(
        self, xp: ArrayNamespace, dy: Any, inputs: Inputs, output: Any, residual: Any, needs: Needs
    ) -> Grads:
        x1, x2 = inputs
        return (
            self.reduce(xp, xp.multiply(dy, x2), 0) if needs[0] else None,
            self.reduce(xp, xp.multiply(dy, x1), 1) if needs[1] else None,
        )


class Divide(Broadcasting):
    """``x1 / x2``; d/dx2 is ``-dy * y / x2``."""

    fresh_grads = True

    name = "divide"
    keep_output = True

    def kept_inputs(self, needs: Needs, n_inputs: int) -> tuple[int, ...]:
        return (1,)

    def forward(self, xp: ArrayNamespace, x1: Any, x2: Any) -> Any:
        return xp.divide(x1, x2)

    def backward(
        self, xp: ArrayNamespace, dy: Any, inputs: Inputs, output: Any, residual: Any, needs: Needs
    ) -> Grads:
        x2 = inputs[1]
        g = xp.divide(dy, x2)
        return (
            self.reduce(xp, g, 0) if needs[0] else None,
            self.reduce(xp, xp.negative(xp.multiply(g, output)), 1) if needs[1] else None,
        )


class Power(Broadcasting):
    """``x1 ** x2``; d/dx2 = ``y * log(x1)`` is computed only when ``x2`` needs a gradient."""

    fresh_grads = True

    name = "power"
    keep_inputs = True
    keep_output = True

    def forward(self, xp: ArrayNamespace, x1: Any, x2: Any) -> Any:
        return xp.pow(x1, x2)

    def backward(
        self, xp: ArrayNamespace, dy: Any, inputs: Inputs, output: Any, residual: Any, needs: Needs
    ) -> Grads:
        x1, x2 = inputs
        g1 = g2 = None
        if needs[0]:
            g1 = self.reduce(
                xp, xp.multiply(dy, xp.multiply(x2, xp.pow(x1, xp.subtract(x2, 1)))), 0
            )
        if needs[1]:
            g2 = self.reduce(xp, xp.multiply(dy, xp.multiply(output, xp.log(x1))), 1)
        return g1, g2


class Negative(Unary):
    """``-x``."""

    fresh_grads = True

    name = "negative"

    def forward(self, xp: ArrayNamespace, x: Any) -> Any:
        return xp.negative(x)

    def backward(
        self, xp: ArrayNamespace, dy: Any, inputs: Inputs, output: Any, residual: Any, needs: Needs
    ) -> Grads:
        return (xp.negative(dy),)


class Abs(Unary):
    """``|x|``; the gradient at 0 is 0 (the sign)."""

    fresh_grads = True

    name = "abs"
    keep_inputs = (0,)

    def forward(self, xp: ArrayNamespace, x: Any) -> Any:
        return xp.abs(x)

    def backward(
        self, xp: ArrayNamespace, dy: Any, inputs: Inputs, output: Any, residual: Any, needs: Needs
    ) -> Grads:
        return (xp.multiply(dy, xp.sign(inputs[0])),)


class Square(Unary):
    """``x * x`` without the fan-out of a product."""

    fresh_grads = True

    name = "square"
    keep_inputs = (0,)

    def forward(self, xp: ArrayNamespace, x: Any) -> Any:
        return xp.multiply(x, x)

    def backward(
        self, xp: ArrayNamespace, dy: Any, inputs: Inputs, output: Any, residual: Any, needs: Needs
    ) -> Grads:
        return (xp.multiply(dy, xp.multiply(inputs[0], 2.0)),)


class Sqrt(Unary):
    """``sqrt(x)``; backward ``dy / (2 y)``."""

    fresh_grads = True

    name = "sqrt"
    keep_output = True

    def forward(self, xp: ArrayNamespace, x: Any) -> Any:
        return xp.sqrt(x)

    def backward(
        self, xp: ArrayNamespace, dy: Any, inputs: Inputs, output: Any, residual: Any, needs: Needs
    ) -> Grads:
        return (xp.divide(dy, xp.multiply(output, 2.0)),)


def add(x1: Any, x2: Any) -> Expr:
    """Element-wise ``x1 + x2`` with broadcasting."""
    return Add()(x1, x2)


def subtract(x1: Any, x2: Any) -> Expr:
    """Element-wise ``x1 - x2`` with broadcasting."""
    return Subtract()(x1, x2)


def multiply(x1: Any, x2: Any) -> Expr:
    """Element-wise ``x1 * x2`` with broadcasting."""
    return Multiply()(x1, x2)


def divide(x1: Any, x2: Any) -> Expr:
    """Element-wise ``x1 / x2`` with broadcasting."""
    return Divide()(x1, x2)


def power(x1: Any, x2: Any) -> Expr:
    """Element-wise ``x1 ** x2`` (``x ** 2`` is :func:`square`)."""
    if isinstance(x2, int | float) and not isinstance(x2, bool) and x2 == 2:
        return square(x1)
    return Power()(x1, x2)


def negative(x: Any) -> Expr:
    """Element-wise ``-x``."""
    return Negative()(x)


def abs(x: Any) -> Expr:  # noqa: A001 - NumPy's name
    """Element-wise absolute value."""
    return Abs()(x)


def square(x: Any) -> Expr:
    """Element-wise ``x ** 2``."""
    return Square()(x)


def sqrt(x: Any) -> Expr:
    """Element-wise square root."""
    return Sqrt()(x)
