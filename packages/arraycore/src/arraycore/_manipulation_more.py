"""More manipulation, built from slicing, concat and where: diff, roll, tril, triu, meshgrid,
unstack."""

from __future__ import annotations

import builtins
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from ._base import NamespaceBase
from .backend import Array, normalize_axes


def _along(ndim: int, axis: int, key: slice | int) -> tuple[Any, ...]:
    """A basic key for every axis: ``key`` on ``axis``, whole elsewhere."""
    return (*([slice(None)] * axis), key, *([slice(None)] * (ndim - axis - 1)))


class MoreManipulationFunctions(NamespaceBase):
    """diff, roll, tril, triu, meshgrid, unstack."""

    def diff(
        self,
        x: Array,
        /,
        *,
        axis: int = -1,
        n: int = 1,
        prepend: Array | None = None,
        append: Array | None = None,
    ) -> Array:
        """The ``n``-th forward difference along ``axis`` (``x[i+1] - x[i]``; for bool arrays
        ``x[i+1] != x[i]``), with ``prepend``/``append`` joined to ``x`` first."""
        self._check("diff", x)
        if len(x.shape) == 0:
            raise ValueError("diff: x must have at least one dimension, got a 0-d array")
        (ax,) = normalize_axes(axis, len(x.shape), "diff")
        n = operator.index(n)
        if n < 0:
            raise ValueError(f"diff: n must be >= 0, got {n}")
        parts = [p for p in (prepend, x, append) if p is not None]
        if len(parts) > 1:
            self._check("diff", *parts)
            for p in parts:
                if len(p.shape) != len(x.shape) or any(
                    a != b for i, (a, b) in enumerate(zip(p.shape, x.shape)) if i != ax
                ):
                    raise ValueError(
                        f"diff: prepend/append of shape {tuple(p.shape)} must match x of shape "
                        f"{tuple(x.shape)} except along axis {ax}"
                    )
            x = self.concat(parts, axis=ax)
        bk = self._backend
        step = "not_equal" if x.dtype.kind == "b" else "subtract"
        for _ in range(n):
            size = x.shape[ax]
            later = bk.getitem(x, _along(len(x.shape), ax, slice(1, None)))
            earlier = bk.getitem(x, _along(len(x.shape), ax, slice(0, max(size - 1, 0))))
            x = bk.binary(step, later, earlier)
        return x if n else bk.astype(x, x.dtype)

    def roll(self, x: Array, /, shift: int | Sequence[int], *, axis: Any = None) -> Array:
        """Elements shifted by ``shift`` along ``axis`` (of the flattened array if None), those
        leaving one end coming back at the other."""
        self._check("roll", x)
        if axis is None:
            if not isinstance(shift, int | np.integer):
                raise ValueError("roll: shift must be an int when axis is None")
            flat = self._backend.reshape(x, (x.size,))
            return self._backend.reshape(self.roll(flat, int(shift), axis=0), tuple(x.shape))
        axes = (axis,) if isinstance(axis, int | np.integer) else tuple(axis)
        shifts = (shift,) * len(axes) if isinstance(shift, int | np.integer) else tuple(shift)
        if len(shifts) != len(axes):
            raise ValueError(f"roll: {len(shifts)} shifts for {len(axes)} axes")
        moved = False
        for a, s in zip(axes, shifts):
            (ax,) = normalize_axes(a, len(x.shape), "roll")
            size = x.shape[ax]
            k = operator.index(s) % size if size else 0
            if k:
                ndim = len(x.shape)
                tail = self._backend.getitem(x, _along(ndim, ax, slice(size - k, None)))
                head = self._backend.getitem(x, _along(ndim, ax, slice(0, size - k)))
                x, moved = self.concat([tail, head], axis=ax), True
        return x if moved else self._backend.astype(x, x.dtype)  # always a new array

    def _triangle(self, op: str, x: Array, k: int, lower: builtins.bool) -> Array:
        self._check(op, x)
        if len(x.shape) < 2:
            raise ValueError(f"{op}: x must have at least 2 dimensions, got shape {x.shape}")
        rows, cols = x.shape[-2:]
        i = self._backend.reshape(self.arange(rows, dtype=np.int64), (rows, 1))
        j = self._backend.reshape(self.arange(cols, dtype=np.int64), (1, cols))
        offset = self._backend.binary("subtract", j, i)  # j - i: the diagonal of each element
        bound = self._backend.full((), operator.index(k), np.dtype("int64"))
        keep = self._backend.binary("less_equal" if lower else "greater_equal", offset, bound)
        return self._backend.where(keep, x, self._backend.full((), 0, x.dtype))

    def tril(self, x: Array, /, *, k: int = 0) -> Array:
        """The lower triangle of the last two axes (elements above diagonal ``k`` zeroed)."""
        return self._triangle("tril", x, k, True)

    def triu(self, x: Array, /, *, k: int = 0) -> Array:
        """The upper triangle of the last two axes (elements below diagonal ``k`` zeroed)."""
        return self._triangle("triu", x, k, False)

    def meshgrid(self, *arrays: Array, indexing: str = "xy") -> list[Array]:
        """Coordinate grids from 1-D arrays (``indexing="xy"``: Cartesian, the first two axes
        swapped; ``"ij"``: matrix indexing)."""
        if indexing not in ("xy", "ij"):
            raise ValueError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
        self._check("meshgrid", *arrays)
        for a in arrays:
            if len(a.shape) != 1:
                raise ValueError(f"meshgrid: arrays must be 1-D, got shape {tuple(a.shape)}")
        if len({a.dtype for a in arrays}) > 1:
            raise TypeError(
                f"meshgrid: arrays must have one dtype, got {', '.join(str(a.dtype) for a in arrays)}"
            )
        sizes = [a.shape[0] for a in arrays]
        if indexing == "xy" and len(arrays) > 1:
            sizes[0], sizes[1] = sizes[1], sizes[0]
        grids = []
        for i, a in enumerate(arrays):
            position = {0: 1, 1: 0}.get(i, i) if indexing == "xy" and len(arrays) > 1 else i
            shape = [1] * len(arrays)
            shape[position] = a.shape[0]
            column = self._backend.reshape(a, tuple(shape))
            grids.append(
                self._backend.astype(self._backend.broadcast_to(column, tuple(sizes)), a.dtype)
            )
        return grids

    def unstack(self, x: Array, /, *, axis: int = 0) -> tuple[Array, ...]:
        """The slices of ``x`` along ``axis``, as a tuple of arrays."""
        self._check("unstack", x)
        if len(x.shape) == 0:
            raise ValueError("unstack: x must have at least one dimension, got a 0-d array")
        (ax,) = normalize_axes(axis, len(x.shape), "unstack")
        return tuple(
            self._backend.getitem(x, _along(len(x.shape), ax, i)) for i in range(x.shape[ax])
        )
