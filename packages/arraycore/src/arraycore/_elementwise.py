"""Element-wise functions."""

from __future__ import annotations

import numpy as np

from . import _dtype_rules
from ._base import _BOOL, _SCALAR_TYPES, ArrayOrScalar, NamespaceBase, _scalar_fits
from .backend import Array


class ElementwiseFunctions(NamespaceBase):
    """Element-wise functions."""

    def _unary_input(self, op: str, x: Array) -> Array | None:
        """``x`` in the dtype ``op``'s primitive computes in (docs/dtypes.md), or None where the
        result is ``x`` itself (rounding integers and bools, ``abs`` of bool)."""
        self._check(op, x)
        dt = self._compute_dtype(op, x.dtype)
        if (op in _INT_NOOP and dt.kind in "biu") or (op == "abs" and dt.kind == "b"):
            return None
        return self._cast(x, dt)

    def _unary(self, op: str, x: Array) -> Array:
        operand = self._unary_input(op, x)
        if operand is None:
            return self._backend.astype(x, x.dtype)
        return self._backend.unary(op, operand)

    def _binary(self, op: str, x1: ArrayOrScalar, x2: ArrayOrScalar) -> Array:
        constant = self._constant_comparison(op, x1, x2)
        if constant is not None:
            x = x2 if type(x1) is int else x1
            self._check(op, x)
            return self._backend.full(tuple(x.shape), constant, _BOOL)
        a, b = self._promote(op, x1, x2)
        return self._backend.binary(op, a, b)

    def add(self, x1: ArrayOrScalar, x2: ArrayOrScalar, /) -> Array:
        """Element-wise ``x1 + x2``."""
        return self._binary("add", x1, x2)

    def subtract(self, x1: ArrayOrScalar, x2: ArrayOrScalar, /) -> Array:
        """Element-wise ``x1 - x2``."""
        return self._binary("subtract", x1, x2)

    def multiply(self, x1: ArrayOrScalar, x2: ArrayOrScalar, /) -> Array:
        """Element-wise ``x1 * x2``."""
        return self._binary("multiply", x1, x2)

    def divide(self, x1: ArrayOrScalar, x2: ArrayOrScalar, /) -> Array:
        """Element-wise true division (integers are promoted to the default float)."""
        return self._binary("divide", x1, x2)

    def floor_divide(self, x1: ArrayOrScalar, x2: ArrayOrScalar, /) -> Array:
        """Element-wise ``x1 // x2``."""
        return self._binary("floor_divide", x1, x2)

    def remainder(self, x1: ArrayOrScalar, x2: ArrayOrScalar, /) -> Array:
        """Element-wise ``x1 % x2`` with the sign of ``x2``."""
        return self._binary("remainder", x1, x2)

    def pow(self, x1: ArrayOrScalar, x2: ArrayOrScalar, /) -> Array:
        """Element-wise ``x1 ** x2``."""
        return self._binary("pow", x1, x2)

    def maximum(self, x1: ArrayOrScalar, x2: ArrayOrScalar, /) -> Array:
        """Element-wise maximum (NaN propagates)."""
        return self._binary("maximum", x1, x2)

    def minimum(self, x1: ArrayOrScalar, x2: ArrayOrScalar, /) -> Array:
        """Element-wise minimum (NaN propagates)."""
        return self._binary("minimum", x1, x2)

    def equal(self, x1: ArrayOrScalar, x2: ArrayOrScalar, /) -> Array:
        """Element-wise ``x1 == x2``."""
        return self._binary("equal", x1, x2)

    def not_equal(self, x1: ArrayOrScalar, x2: ArrayOrScalar, /) -> Array:
        """Element-wise ``x1 != x2``."""
        return self._binary("not_equal", x1, x2)

    def less(self, x1: ArrayOrScalar, x2: ArrayOrScalar, /) -> Array:
        """Element-wise ``x1 < x2``."""
        return self._binary("less", x1, x2)

    def less_equal(self, x1: ArrayOrScalar, x2: ArrayOrScalar, /) -> Array:
        """Element-wise ``x1 <= x2``."""
        return self._binary("less_equal", x1, x2)

    def greater(self, x1: ArrayOrScalar, x2: ArrayOrScalar, /) -> Array:
        """Element-wise ``x1 > x2``."""
        return self._binary("greater", x1, x2)

    def greater_equal(self, x1: ArrayOrScalar, x2: ArrayOrScalar, /) -> Array:
        """Element-wise ``x1 >= x2``."""
        return self._binary("greater_equal", x1, x2)

    def logical_and(self, x1: ArrayOrScalar, x2: ArrayOrScalar, /) -> Array:
        """Element-wise logical and (inputs converted to bool)."""
        return self._binary("logical_and", x1, x2)

    def logical_or(self, x1: ArrayOrScalar, x2: ArrayOrScalar, /) -> Array:
        """Element-wise logical or (inputs converted to bool)."""
        return self._binary("logical_or", x1, x2)

    def logical_not(self, x: Array, /) -> Array:
        """Element-wise logical not."""
        return self._unary("logical_not", x)

    def negative(self, x: Array, /) -> Array:
        """Element-wise ``-x``."""
        return self._unary("negative", x)

    def positive(self, x: Array, /) -> Array:
        """Element-wise ``+x`` (a copy; not defined for bool, as in NumPy)."""
        self._check("positive", x)
        self._compute_dtype("positive", x.dtype)  # bool: TypeError
        return self._backend.astype(x, x.dtype)

    def abs(self, x: Array, /) -> Array:
        """Element-wise absolute value."""
        return self._unary("abs", x)

    def sqrt(self, x: Array, /) -> Array:
        """Element-wise square root."""
        return self._unary("sqrt", x)

    def square(self, x: Array, /) -> Array:
        """Element-wise ``x * x``."""
        return self.multiply(x, x)

    def exp(self, x: Array, /) -> Array:
        """Element-wise exponential."""
        return self._unary("exp", x)

    def expm1(self, x: Array, /) -> Array:
        """Element-wise ``exp(x) - 1``, accurate near zero."""
        return self._unary("expm1", x)

    def log(self, x: Array, /) -> Array:
        """Element-wise natural logarithm."""
        return self._unary("log", x)

    def log1p(self, x: Array, /) -> Array:
        """Element-wise ``log(1 + x)``, accurate near zero."""
        return self._unary("log1p", x)

    def tanh(self, x: Array, /) -> Array:
        """Element-wise hyperbolic tangent."""
        return self._unary("tanh", x)

    def sin(self, x: Array, /) -> Array:
        """Element-wise sine."""
        return self._unary("sin", x)

    def cos(self, x: Array, /) -> Array:
        """Element-wise cosine."""
        return self._unary("cos", x)

    def sign(self, x: Array, /) -> Array:
        """Element-wise sign (-1, 0 or 1; NaN stays NaN)."""
        return self._unary("sign", x)

    def floor(self, x: Array, /) -> Array:
        """Element-wise floor (integers unchanged)."""
        return self._unary("floor", x)

    def ceil(self, x: Array, /) -> Array:
        """Element-wise ceiling (integers unchanged)."""
        return self._unary("ceil", x)

    def round(self, x: Array, /) -> Array:
        """Element-wise rounding to the nearest integer, halves to even."""
        return self._unary("round", x)

    def isnan(self, x: Array, /) -> Array:
        """Element-wise test for NaN."""
        if x.dtype.kind != "f":
            return self.full_like(x, False, dtype=np.bool_)
        return self._unary("isnan", x)

    def isinf(self, x: Array, /) -> Array:
        """Element-wise test for positive or negative infinity."""
        if x.dtype.kind != "f":
            return self.full_like(x, False, dtype=np.bool_)
        return self._unary("isinf", x)

    def isfinite(self, x: Array, /) -> Array:
        """Element-wise test for finite values."""
        if x.dtype.kind != "f":
            return self.full_like(x, True, dtype=np.bool_)
        return self.logical_not(self.logical_or(self.isnan(x), self.isinf(x)))

    def clip(
        self, x: Array, /, min: ArrayOrScalar | None = None, max: ArrayOrScalar | None = None
    ) -> Array:
        """Values of ``x`` limited to ``[min, max]``, keeping ``x``'s dtype."""
        self._check("clip", x)
        out = x
        if min is not None:
            out = self._binary("maximum", out, self._clip_bound(min, x, "clip"))
        if max is not None:
            out = self._binary("minimum", out, self._clip_bound(max, x, "clip"))
        return out if out is not x else self._backend.astype(x, x.dtype)

    def _clip_bound(self, bound: ArrayOrScalar, x: Array, op: str) -> Array:
        if isinstance(bound, _SCALAR_TYPES):
            if not _scalar_fits(bound, x.dtype):
                raise TypeError(f"{op}: bound {bound!r} does not fit dtype {x.dtype}")
            value = bound.item() if isinstance(bound, np.generic) else bound
            if type(value) is int and x.dtype.kind in "iu":  # out of range: no bound (NumPy 2)
                value = _dtype_rules.clamp_python_int(value, x.dtype)
            return self._backend.full((), value, x.dtype)
        return self._as_operand(bound, x.dtype, op)

    def where(self, condition: Array, x1: ArrayOrScalar, x2: ArrayOrScalar, /) -> Array:
        """Element-wise ``x1 if condition else x2`` with broadcasting."""
        self._check("where", condition)
        if condition.dtype != np.bool_:
            condition = self._backend.astype(condition, np.dtype("bool"))
        a, b = self._promote("where", x1, x2)
        return self._backend.where(condition, a, b)


_INT_NOOP = frozenset({"floor", "ceil", "round"})
