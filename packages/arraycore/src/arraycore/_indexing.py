"""Indexing: take, take_along_axis, getitem, setitem."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from . import _advanced_indexing, _checks
from ._base import ArrayOrScalar, NamespaceBase
from .backend import Array, Key


class IndexingFunctions(NamespaceBase):
    """Indexing: take, take_along_axis, getitem, setitem."""

    def take(self, x: Array, indices: Array, /, *, axis: int | None = None) -> Array:
        """Elements of ``x`` at 1-D integer ``indices`` along ``axis``."""
        ax, idx = _checks.take_args(self, x, indices, axis)
        return self._backend.take(x, idx, ax)

    def take_along_axis(self, x: Array, indices: Array, /, *, axis: int = -1) -> Array:
        """Elements of ``x`` picked by ``indices`` (same rank) along ``axis``."""
        ax, idx = _checks.take_along_axis_args(self, x, indices, axis)
        n = len(x.shape)
        shape = list(
            np.broadcast_shapes(
                tuple(s if i != ax else 1 for i, s in enumerate(x.shape)),
                tuple(s if i != ax else 1 for i, s in enumerate(idx.shape)),
            )
        )
        shape[ax] = idx.shape[ax]
        idx = self._backend.broadcast_to(idx, tuple(shape))
        strides = [math.prod(x.shape[i + 1 :]) for i in range(n)]
        flat = self.multiply(idx, strides[ax])
        for i in range(n):
            if i == ax:
                continue
            coord = self.reshape(
                self.arange(shape[i]), tuple(shape[i] if j == i else 1 for j in range(n))
            )
            flat = self.add(flat, self.multiply(coord, strides[i]))
        flat = self._backend.reshape(self._backend.astype(flat, flat.dtype), (math.prod(shape),))
        values = self._backend.take(self._backend.reshape(x, (x.size,)), flat, 0)
        return self._backend.reshape(values, tuple(shape))

    def _normalize_key(self, x: Array, key: Any, op: str = "getitem") -> Key:
        """A basic index as one entry per axis (ints, slices, None); rejects the rest, naming
        ``op``. Ints become non-negative; slices stay as given."""
        if not isinstance(key, tuple):
            key = (key,)
        for k in key:
            if not (
                k is None or k is Ellipsis or isinstance(k, slice | int | np.integer)
            ) or isinstance(k, bool | np.bool_):
                raise IndexError(
                    f"{op}: an index must be an int, a slice, None, ..., an integer array or a "
                    f"boolean array (or a tuple of those), got {type(k).__name__}"
                )
        if sum(k is Ellipsis for k in key) > 1:
            raise IndexError(f"{op}: an index can only have a single ellipsis")
        used = sum(1 for k in key if k is not None and k is not Ellipsis)
        ndim = len(x.shape)
        if used > ndim:
            raise IndexError(f"{op}: too many indices for an array of shape {tuple(x.shape)}")
        out: list[int | slice | None] = []
        for k in key:
            if k is Ellipsis:
                out.extend([slice(None)] * (ndim - used))
            else:
                out.append(k)
        if Ellipsis not in key:
            out.extend([slice(None)] * (ndim - used))
        axis = 0
        for i, k in enumerate(out):
            if k is None:
                continue
            if isinstance(k, int | np.integer):
                size = x.shape[axis]
                if not -size <= k < size:
                    raise _checks.index_error(op, int(k), axis, size)
                out[i] = int(k) % size
            axis += 1
        return tuple(out)

    def getitem(self, x: Array, key: Any, /) -> Array:
        """``x[key]`` (what ``__getitem__`` of arraycore arrays calls): basic indexing (ints,
        slices, ``...``, ``None``), integer arrays and boolean masks (NumPy's semantics)."""
        self._check("getitem", x)
        if _advanced_indexing.is_advanced(self, key):
            return _advanced_indexing.getitem(self, x, key)
        return self._backend.getitem(x, self._normalize_key(x, key))

    def setitem(self, x: Array, key: Any, value: ArrayOrScalar, /) -> None:
        """``x[key] = value``, any key ``getitem`` takes; ``value`` is cast to ``x.dtype``."""
        self._check("setitem", x)
        if _advanced_indexing.is_advanced(self, key):
            _advanced_indexing.setitem(self, x, key, value)
            return
        norm = self._normalize_key(x, key, "setitem")
        self._backend.setitem(x, norm, _checks.setitem_value(self, "setitem", x, norm, value))
