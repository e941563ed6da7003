"""Reductions over axes: sum, mean, max, min (``axis``, ``keepdims`` as in NumPy)."""

from __future__ import annotations

import builtins
import math
from typing import Any

import numpy as np

from arraycore import ArrayNamespace

from ...expr.node import Expr
from ...expr.spec import Spec, normalize_axes
from ..base import Grads, Inputs, Needs, Op, require_float


class Reduce(Op):
    """Base of the reductions: records the axes and the shape a gradient is broadcast back to."""

    def __init__(self, axis: Any = None, keepdims: bool = False) -> None:
        self.axis = axis
        self.keepdims = keepdims

    def infer(self, x: Spec) -> Spec:
        require_float(self.name, x)
        self.axes = normalize_axes(self.axis, x.ndim)
        self.in_shape = x.shape
        self.kept_shape = tuple(1 if i in self.axes else d for i, d in enumerate(x.shape))
        shape = (
            self.kept_shape
            if self.keepdims
            else tuple(d for i, d in enumerate(x.shape) if i not in self.axes)
        )
        return Spec(shape, x.dtype)

    def expand(self, xp: ArrayNamespace, g: Any) -> Any:
        """``g`` (an output-shaped array) reshaped so that it broadcasts against the input."""
        return g if self.keepdims else xp.reshape(g, self.kept_shape)


class Sum(Reduce):
    """Sum over ``axis``; the gradient is ``dy`` broadcast back (a read-only view)."""

    name = "sum"

    def forward(self, xp: ArrayNamespace, x: Any) -> Any:
        return xp.sum(x, axis=self.axes, keepdims=self.keepdims)

    def backward(
        self, xp: ArrayNamespace, dy: Any, inputs: Inputs, output: Any, residual: Any, needs: Needs
    ) -> Grads:
        return (xp.broadcast_to(self.expand(xp, dy), self.in_shape),)


class Mean(Reduce):
    """Arithmetic mean over ``axis`` (the count comes from the fed shapes)."""

    name = "mean"

    def infer(self, x: Spec) -> Spec:
        spec = super().infer(x)
        counts = [x.shape[a] for a in self.axes]
        self.scale = None if None in counts else 1.0 / builtins.max(math.prod(counts), 1)  # type: ignore[arg-type]
        return spec

    def forward(self, xp: ArrayNamespace, x: Any) -> Any:
        return xp.multiply(xp.sum(x, axis=self.axes, keepdims=self.keepdims), self.scale)

    def backward(
        self, xp: ArrayNamespace, dy: Any, inputs: Inputs, output: Any, residual: Any, needs: Needs
    ) -> Grads:
        return (xp.broadcast_to(xp.multiply(self.expand(xp, dy), self.scale), self.in_shape),)


class Norm(Reduce):
    """L2 norm over ``axis``. Its gradient is ``dy * x / norm``, and 0 where the norm is 0 (the
    subgradient PyTorch uses), never the NaN that ``sqrt(sum(x**2))`` composed would give."""

    name = "norm"
    fresh_grads = True
    keep_inputs = (0,)
    keep_output = True

    def forward(self, xp: ArrayNamespace, x: Any) -> Any:
        return xp.sqrt(xp.sum(xp.multiply(x, x), axis=self.axes, keepdims=self.keepdims))

    def backward(
        self, xp: ArrayNamespace, dy: Any, inputs: Inputs, output: Any, residual: Any, needs: Needs
    ) -> Grads:
        norm = self.expand(xp, output)
        safe = xp.where(xp.greater(norm, 0.0), norm, 1.0)  # x is 0 wherever the norm is
        return (xp.multiply(inputs[0], xp.divide(self.expand(xp, dy), safe)),)


class Extreme(Reduce):
    """Base of max/min: ties share the gradient equally."""

    fresh_grads = True

    keep_inputs = (0,)
    keep_output = True
    function = ""

    def forward(self, xp: ArrayNamespace, x: Any) -> Any:
        return getattr(xp, self.function)(x, axis=self.axes, keepdims=self.keepdims)

    def backward(
        self, xp: ArrayNamespace, dy: Any, inputs: Inputs, output: Any, residual: Any, needs: Needs
    ) -> Grads:
        hit = xp.astype(xp.equal(inputs[0], self.expand(xp, output)), dy.dtype)
        count = xp.sum(hit, axis=self.axes, keepdims=True)
        return (xp.multiply(hit, xp.divide(self.expand(xp, dy), count)),)


class Max(Extreme):
    """Maximum over ``axis``; the gradient goes to the maximal elements."""

    name = "max"
    function = "max"


class Min(Extreme):
    """Minimum over ``axis``; the gradient goes to the minimal elements."""

    name = "min"
    function = "min"


class ArgReduce(Op):
    """Index of the first maximum (``argmax``) or minimum (``argmin``) along one axis; int64,
    no gradient (accuracy: ``ex.mean(ex.astype(ex.equal(ex.argmax(logits, 1), labels), ...))``)."""

    name = "arg_reduce"
    differentiable = False

    def __init__(self, function: str, axis: int, keepdims: bool) -> None:
        self.function = function
        self.axis = axis
        self.keepdims = keepdims

    def infer(self, x: Spec) -> Spec:
        (self.ax,) = normalize_axes(self.axis, x.ndim)
        shape = tuple(
            1 if i == self.ax else d for i, d in enumerate(x.shape) if self.keepdims or i != self.ax
        )
        return Spec(shape, np.dtype("int64"))

    def forward(self, xp: ArrayNamespace, x: Any) -> Any:
        return getattr(xp, self.function)(x, axis=self.ax, keepdims=self.keepdims)


def argmax(x: Any, axis: int = -1, keepdims: bool = False) -> Expr:
    """Index of the first maximum along ``axis`` (int64, no gradient)."""
    return ArgReduce("argmax", axis, keepdims)(x)


def argmin(x: Any, axis: int = -1, keepdims: bool = False) -> Expr:
    """Index of the first minimum along ``axis`` (int64, no gradient)."""
    return ArgReduce("argmin", axis, keepdims)(x)


def sum(x: Any, axis: Any = None, keepdims: bool = False) -> Expr:  # noqa: A001
    """Sum over ``axis`` (all axes by default)."""
    return Sum(axis, keepdims)(x)


def mean(x: Any, axis: Any = None, keepdims: bool = False) -> Expr:
    """Mean over ``axis`` (all axes by default)."""
    return Mean(axis, keepdims)(x)


def max(x: Any, axis: Any = None, keepdims: bool = False) -> Expr:  # noqa: A001
    """Maximum over ``axis`` (all axes by default)."""
    return Max(axis, keepdims)(x)


def min(x: Any, axis: Any = None, keepdims: bool = False) -> Expr:  # noqa: A001
    """Minimum over ``axis`` (all axes by default)."""
    return Min(axis, keepdims)(x)
