"""Element-wise functions: every entry of the op table (:mod:`arraycore._optable`), plus
``clip`` and ``where``.

The functions of the table are made here from their entries (:func:`_make`): a unary function
checks its argument, converts it to the dtype its rule computes in (``docs/dtypes.md``), and
calls the backend's ``unary`` primitive or the entry's derivation; a binary one promotes its
two operands (arrays or Python scalars) first. Each gets the standard's signature and the
entry's docstring.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from . import _dtype_rules, _optable
from ._base import _BOOL, _SCALAR_TYPES, ArrayOrScalar, NamespaceBase, _scalar_fits
from .backend import Array


class ElementwiseFunctions(NamespaceBase):
    """Element-wise functions (the op table's, set on the class below, and clip and where)."""

    #: Optional primitives the backend does not implement, by name: their derived defaults
    #: (set by ``Namespace.__init__`` from ``Backend.optional_primitives``).
    _fallbacks: dict[str, Callable[..., Array]]

    def _primitive(self, op: str, *operands: Array) -> Array:
        """The element-wise primitive ``op`` of operands in its compute dtype: the backend's, or
        arraycore's default where ``op`` is optional and the backend does not declare it."""
        fallback = self._fallbacks.get(op)
        if fallback is not None:
            return fallback(self, *operands)
        if len(operands) == 1:
            return self._backend.unary(op, operands[0])
        return self._backend.binary(op, *operands)

    def _unary_input(self, op: str, x: Array) -> Array | None:
        """``x`` in the dtype ``op`` computes in (docs/dtypes.md), or None where the result is
        ``x`` itself (rounding integers and bools, ``abs`` of bool)."""
        self._check(op, x)
        dt = self._compute_dtype(op, x.dtype)
        if dt.kind in _optable.BY_NAME[op].identity_kinds:
            return None
        return self._cast(x, dt)

    def _unary(self, op: str, x: Array) -> Array:
        operand = self._unary_input(op, x)
        if operand is None:
            return self._backend.astype(x, x.dtype)
        entry = _optable.BY_NAME[op]
        if entry.derive is not None:
            return entry.derive(self, operand)
        if operand.dtype.kind != "f" and op in _optable.NON_FLOAT_CONSTANT:
            return _optable.NON_FLOAT_CONSTANT[op](self, operand)
        fallback = self._fallbacks.get(op)
        if fallback is not None:
            return fallback(self, operand)
        return self._backend.unary(op, operand)

    def _binary(self, op: str, x1: ArrayOrScalar, x2: ArrayOrScalar) -> Array:
        constant = self._constant_comparison(op, x1, x2)
        if constant is not None:
            x = x2 if type(x1) is int else x1
            self._check(op, x)
            return self._backend.full(tuple(x.shape), constant, _BOOL)
        a, b = self._promote(op, x1, x2)
        derive = _optable.BY_NAME[op].derive or self._fallbacks.get(op)
        if derive is not None:
            return derive(self, a, b)
        return self._backend.binary(op, a, b)

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


def _make(entry: _optable.Elementwise) -> Callable[..., Array]:
    """The namespace function of one op-table entry, with the standard's signature."""
    name = entry.name
    fn: Callable[..., Array]
    if entry.arity == 1:

        def fn(self: ElementwiseFunctions, x: Array, /) -> Array:
            return self._unary(name, x)

    else:

        def fn(self: ElementwiseFunctions, x1: ArrayOrScalar, x2: ArrayOrScalar, /) -> Array:
            return self._binary(name, x1, x2)

    fn.__name__ = name
    fn.__qualname__ = f"ElementwiseFunctions.{name}"
    fn.__doc__ = entry.doc
    return fn


for _entry in _optable.ELEMENTWISE:
    setattr(ElementwiseFunctions, _entry.name, _make(_entry))
del _entry
