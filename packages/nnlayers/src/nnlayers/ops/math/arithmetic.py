"""Arithmetic: add, subtract, multiply, divide, power, negative, abs, square, sqrt."""

from __future__ import annotations

from typing import Any

import numpy as np

from arraycore import ArrayNamespace

from ...expr.node import Expr
from ...expr.spec import Spec
from ..base import Broadcasting, Grads, Inputs, Needs, Unary, inplace_on

#: Integer exponents ``x ** n`` computes by products (``|n|`` up to this; at most 6 passes).
MAX_PRODUCT_EXPONENT = 8


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


class BiasRelu(Add):
    """``relu(x + b)`` as one op, which a plan runs in place of an :class:`Add` whose only
    reader is a ReLU and whose second operand (or first: ``full``) is a bias along one axis of
    the other (:func:`nnlayers.graph.fusion.fuse`): the backend's ``xp.nn.bias_relu`` (into the
    full operand where the plan lets it, as the add and the ReLU would have written) and
    ``xp.nn.bias_relu_backward``, one pass each on the NumPy backend instead of two (the add's
    and the ReLU's, the ReLU's gradient and the bias's sum). The ReLU's node becomes a
    :class:`~nnlayers.ops.control.Alias` of this op's output."""

    name = "bias_relu"
    plan_only = True
    keep_output = True  # the ReLU's gradient needs y > 0
    fresh_grads = True
    #: the operand of the sum's shape (0 or 1; the other is the bias), the bias's axis in it,
    #: and, where the bias is not 1-D (``(1, C, 1, 1)``), its own shape and its 1-D one
    full: int
    axis: int
    shaped: tuple[Any, ...] | None
    flat: tuple[int | None]  # known: the plan fuses only sums of known shape

    @classmethod
    def replacing(cls, op: Add, full: int, axis: int) -> BiasRelu:
        """This op with the inferred shapes of the plan's ``op``: input ``full`` has the
        output's shape, the other one is a bias along ``axis`` of it."""
        fused: BiasRelu = cls.copy_of(op)
        fused.full, fused.axis = full, axis
        fused.inplace_inputs = (full,)  # type: ignore[misc,assignment]
        bias_shape = op.in_shapes[1 - full]
        fused.shaped = None if len(bias_shape) == 1 else bias_shape
        fused.flat = (op.in_shapes[full][axis],)
        return fused

    def _operands(self, xp: ArrayNamespace, x1: Any, x2: Any) -> tuple[Any, Any]:
        x, b = (x1, x2) if self.full == 0 else (x2, x1)
        return x, b if self.shaped is None else xp.reshape(b, self.flat)

    def forward(self, xp: ArrayNamespace, x1: Any, x2: Any) -> Any:
        x, b = self._operands(xp, x1, x2)
        return xp.nn.bias_relu(x, b, axis=self.axis)

    def forward_inplace(self, xp: ArrayNamespace, k: int, x1: Any, x2: Any) -> Any:
        x, b = self._operands(xp, x1, x2)
        return xp.nn.bias_relu(x, b, axis=self.axis, out=x)

    def backward(
        self, xp: ArrayNamespace, dy: Any, inputs: Inputs, output: Any, residual: Any, needs: Needs
    ) -> Grads:
        bias = 1 - self.full
        if not needs[bias]:
            grads = [xp.nn.relu_backward(dy, output), None]
        else:
            dx, db = xp.nn.bias_relu_backward(dy, output, axis=self.axis)
            if self.shaped is not None:
                db = xp.reshape(db, self.shaped)
            grads = [dx if needs[self.full] else None, db]
        return tuple(grads) if self.full == 0 else (grads[1], grads[0])


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


def _int_power(xp: ArrayNamespace, x: Any, n: int) -> Any:
    """``x ** n`` for an int ``2 <= n <= MAX_PRODUCT_EXPONENT`` in a new array, by repeated
    squaring (left to right over the bits of ``n``: ``x**3`` is ``x*x`` then ``*= x``)."""
    y = xp.multiply(x, x)
    ip = inplace_on(xp, y)
    bits = bin(n)[3:]  # the bits after the leading one
    if bits[0] == "1":
        y = ip.multiply(y, x, out=y)
    for bit in bits[1:]:
        y = ip.multiply(y, y, out=y)
        if bit == "1":
            y = ip.multiply(y, x, out=y)
    return y


class PowerScalar(Unary):
    """``x ** p`` for a number ``p`` (``power(x, 3.0)``, ``x ** 3``): integer ``p`` up to
    ``MAX_PRODUCT_EXPONENT`` in magnitude by products (and one reciprocal where ``p < 0``),
    ``p = 0.5`` and ``-0.5`` by a square root, and only other exponents by ``pow``, which is tens
    of times slower than a product on NumPy; backward ``dy * p * x**(p - 1)`` the same way, into
    one new array. ``x ** 0`` is 1 with a zero gradient; ``x ** 2`` is :class:`Square`."""

    fresh_grads = True
    fresh_output = True

    name = "power_scalar"

    def __init__(self, exponent: float) -> None:
        self.exponent = float(exponent)

    def infer(self, x: Spec) -> Spec:
        p = self.exponent
        small = p.is_integer() and -MAX_PRODUCT_EXPONENT <= p <= MAX_PRODUCT_EXPONENT
        #: the exponent as an int where products compute it, else None
        self.integer = int(p) if small else None
        return super().infer(x)

    def kept_inputs(self, needs: Needs, n_inputs: int) -> tuple[int, ...]:
        return () if self.exponent in (0.0, 1.0) else (0,)

    def forward(self, xp: ArrayNamespace, x: Any) -> Any:
        p, n = self.exponent, self.integer
        if n == 0:
            return xp.ones_like(x)
        if n == 1:
            return xp.astype(x, x.dtype, copy=True)
        if n == -1:
            return xp.divide(1.0, x)
        if n is not None:
            y = _int_power(xp, x, n if n > 0 else -n)
            return y if n > 0 else inplace_on(xp, y).divide(1.0, y, out=y)
        if p == 0.5:
            return xp.sqrt(x)
        if p == -0.5:
            y = xp.sqrt(x)
            return inplace_on(xp, y).divide(1.0, y, out=y)
        return xp.pow(x, p)

    def backward(
        self, xp: ArrayNamespace, dy: Any, inputs: Inputs, output: Any, residual: Any, needs: Needs
    ) -> Grads:
        p, n, x = self.exponent, self.integer, inputs[0]
        if n == 0:
            return (xp.zeros_like(dy),)
        if n == 1:
            return (xp.astype(dy, dy.dtype, copy=True),)
        if n == 2:
            g = xp.multiply(x, 2.0)
        elif n is not None and n > 2:
            g = _int_power(xp, x, n - 1)
            g = inplace_on(xp, g).multiply(g, p, out=g)
        elif n is not None:  # p x**(p - 1) = p / x**(1 - p), 1 - p >= 2
            g = _int_power(xp, x, 1 - n)
            g = inplace_on(xp, g).divide(p, g, out=g)
        elif p == 0.5:  # dy / (2 sqrt(x))
            g = xp.sqrt(x)
            ip = inplace_on(xp, g)
            g = ip.multiply(g, 2.0, out=g)
            return (ip.divide(dy, g, out=g),)
        elif p == -0.5:  # -0.5 / (x sqrt(x))
            g = xp.sqrt(x)
            ip = inplace_on(xp, g)
            g = ip.multiply(g, x, out=g)
            g = ip.divide(-0.5, g, out=g)
        else:
            g = xp.pow(x, p - 1.0)
            g = inplace_on(xp, g).multiply(g, p, out=g)
        return (inplace_on(xp, g).multiply(g, dy, out=g),)


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
        g = xp.multiply(inputs[0], 2.0)
        return (inplace_on(xp, g).multiply(g, dy, out=g),)


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
        g = xp.multiply(output, 2.0)
        return (inplace_on(xp, g).divide(dy, g, out=g),)


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
    """Element-wise ``x1 ** x2``. A number ``x2`` makes a :class:`PowerScalar` (products or a
    square root for small integer and half exponents; ``x ** 2`` is :func:`square`)."""
    if (
        isinstance(x2, int | float | np.integer | np.floating)
        and not isinstance(x2, bool)
        and not isinstance(x1, int | float | np.integer | np.floating)
    ):
        if x2 == 2:
            return square(x1)
        return PowerScalar(float(x2))(x1)
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
