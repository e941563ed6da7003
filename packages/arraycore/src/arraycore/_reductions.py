"""Reductions: sum, prod, max, min, any, all, mean, var, std, argmax, argmin, cumulative_sum."""

from __future__ import annotations

import builtins
import math
from typing import Any

import numpy as np

from ._base import NamespaceBase
from .backend import Array, Key, normalize_axes


class ReductionFunctions(NamespaceBase):
    """Reductions: sum, prod, max, min, any, all, mean, var, std, argmax, argmin, cumulative_sum."""

    # -- reductions --------------------------------------------------------------------------------
    def _reduce(
        self, op: str, x: Array, axis: Any, keepdims: builtins.bool, dtype: Any = None
    ) -> Array:
        self._check(op, x)
        axes = normalize_axes(axis, len(x.shape), op)
        if dtype is not None:
            x = self._cast(x, self._dtype(dtype, op))
        elif op in ("sum", "prod") and x.dtype.kind in "biu" and x.dtype.itemsize < 8:
            x = self._backend.astype(x, np.dtype("uint64" if x.dtype.kind == "u" else "int64"))
        elif op in ("any", "all") and x.dtype != np.bool_:
            x = self._backend.astype(x, np.dtype("bool"))
        if op in ("sum", "prod") and x.dtype == np.bool_:  # dtype=bool: bool's + and * (NumPy)
            op = "any" if op == "sum" else "all"
        if not axes:
            return self._backend.astype(x, x.dtype)
        if op in ("max", "min") and any(x.shape[a] == 0 for a in axes):
            raise ValueError(f"{op}: zero-size reduction over axis {axis} of shape {x.shape}")
        return self._backend.reduce(op, x, axes, keepdims)

    def sum(
        self, x: Array, /, *, axis: Any = None, dtype: Any = None, keepdims: builtins.bool = False
    ) -> Array:
        """Sum over ``axis`` (all axes by default); small integers accumulate in 64 bits."""
        return self._reduce("sum", x, axis, keepdims, dtype)

    def prod(
        self, x: Array, /, *, axis: Any = None, dtype: Any = None, keepdims: builtins.bool = False
    ) -> Array:
        """Product over ``axis``."""
        return self._reduce("prod", x, axis, keepdims, dtype)

    def max(self, x: Array, /, *, axis: Any = None, keepdims: builtins.bool = False) -> Array:
        """Maximum over ``axis`` (NaN propagates; an empty axis is an error)."""
        return self._reduce("max", x, axis, keepdims)

    def min(self, x: Array, /, *, axis: Any = None, keepdims: builtins.bool = False) -> Array:
        """Minimum over ``axis``."""
        return self._reduce("min", x, axis, keepdims)

    def any(self, x: Array, /, *, axis: Any = None, keepdims: builtins.bool = False) -> Array:
        """Whether any element along ``axis`` is true."""
        return self._reduce("any", x, axis, keepdims)

    def all(self, x: Array, /, *, axis: Any = None, keepdims: builtins.bool = False) -> Array:
        """Whether every element along ``axis`` is true."""
        return self._reduce("all", x, axis, keepdims)

    def mean(self, x: Array, /, *, axis: Any = None, keepdims: builtins.bool = False) -> Array:
        """Arithmetic mean over ``axis`` (integers give the default float)."""
        self._check("mean", x)
        if x.dtype.kind != "f":
            x = self._backend.astype(x, self._default_float())
        axes = normalize_axes(axis, len(x.shape), "mean")
        count = math.prod(x.shape[a] for a in axes)
        total = self._reduce("sum", x, axes, keepdims)
        return self.divide(total, count) if count else self.multiply(total, math.nan)

    def var(
        self,
        x: Array,
        /,
        *,
        axis: Any = None,
        correction: float = 0.0,
        keepdims: builtins.bool = False,
    ) -> Array:
        """Variance over ``axis`` with ``correction`` degrees of freedom subtracted."""
        self._check("var", x)
        if x.dtype.kind != "f":
            x = self._backend.astype(x, self._default_float())
        axes = normalize_axes(axis, len(x.shape), "var")
        count = math.prod(x.shape[a] for a in axes)
        centred = self.subtract(x, self.mean(x, axis=axes, keepdims=True))
        total = self._reduce("sum", self.multiply(centred, centred), axes, keepdims)
        dof = count - correction
        return self.divide(total, dof) if dof > 0 else self.multiply(total, math.nan)

    def std(
        self,
        x: Array,
        /,
        *,
        axis: Any = None,
        correction: float = 0.0,
        keepdims: builtins.bool = False,
    ) -> Array:
        """Standard deviation over ``axis``."""
        return self.sqrt(self.var(x, axis=axis, correction=correction, keepdims=keepdims))

    def _arg_reduce(self, op: str, x: Array, axis: int | None, keepdims: builtins.bool) -> Array:
        self._check(op, x)
        ax = None if axis is None else normalize_axes(axis, len(x.shape), op)[0]
        # Only a zero-size reduced axis is an error: (0, 3) along axis 1 is simply empty.
        if x.size == 0 and (ax is None or x.shape[ax] == 0):
            raise ValueError(f"{op}: attempt to get {op} of an empty array of shape {x.shape}")
        if ax is None:
            flat = self._backend.reshape(x, (x.size,))
            result = self._backend.arg_reduce(op, flat, 0, False)
            return self._backend.reshape(result, (1,) * len(x.shape)) if keepdims else result
        return self._backend.arg_reduce(op, x, ax, keepdims)

    def argmax(
        self, x: Array, /, *, axis: int | None = None, keepdims: builtins.bool = False
    ) -> Array:
        """Index of the first maximum along ``axis`` (of the flattened array if None)."""
        return self._arg_reduce("argmax", x, axis, keepdims)

    def argmin(
        self, x: Array, /, *, axis: int | None = None, keepdims: builtins.bool = False
    ) -> Array:
        """Index of the first minimum along ``axis``."""
        return self._arg_reduce("argmin", x, axis, keepdims)

    def cumulative_sum(
        self,
        x: Array,
        /,
        *,
        axis: int | None = None,
        dtype: Any = None,
        include_initial: builtins.bool = False,
    ) -> Array:
        """Running sum along ``axis`` (a log-step scan built from slicing and add)."""
        return self._scan("cumulative_sum", "add", 0, x, axis, dtype, include_initial)

    def cumulative_prod(
        self,
        x: Array,
        /,
        *,
        axis: int | None = None,
        dtype: Any = None,
        include_initial: builtins.bool = False,
    ) -> Array:
        """Running product along ``axis`` (a log-step scan built from slicing and multiply)."""
        return self._scan("cumulative_prod", "multiply", 1, x, axis, dtype, include_initial)

    def _scan(
        self,
        op: str,
        step: str,
        identity: int,
        x: Array,
        axis: int | None,
        dtype: Any,
        include_initial: builtins.bool,
    ) -> Array:
        self._check(op, x)
        if axis is None:
            if len(x.shape) > 1:
                raise ValueError(f"{op}: axis is required for a {len(x.shape)}-D array {x.shape}")
            if len(x.shape) == 0:
                raise ValueError(f"{op}: x must have at least one dimension, got a 0-d array")
            axis = 0
        (ax,) = normalize_axes(axis, len(x.shape), op)
        if dtype is not None:
            x = self._cast(x, self._dtype(dtype, op))
        elif x.dtype.kind in "biu" and x.dtype.itemsize < 8:
            x = self._backend.astype(x, np.dtype("uint64" if x.dtype.kind == "u" else "int64"))
        acc = self._backend.astype(x, x.dtype)
        n = x.shape[ax]
        shift = 1
        while shift < n:
            head = self._axis_key(len(x.shape), ax, slice(shift, None))
            tail = self._axis_key(len(x.shape), ax, slice(None, n - shift))
            shifted = self._backend.getitem(acc, tail)
            current = self._backend.getitem(acc, head)
            acc = self.concat(
                [
                    self._backend.getitem(acc, self._axis_key(len(x.shape), ax, slice(0, shift))),
                    self._backend.binary(step, current, shifted),
                ],
                axis=ax,
            )
            shift *= 2
        if include_initial:
            shape = list(x.shape)
            shape[ax] = 1
            acc = self.concat([self._backend.full(tuple(shape), identity, x.dtype), acc], axis=ax)
        return acc

    @staticmethod
    def _axis_key(ndim: int, axis: int, sl: slice) -> Key:
        return tuple(sl if i == axis else slice(None) for i in range(ndim))

    # -- linear algebra ---------------------------------------------------------------------------
