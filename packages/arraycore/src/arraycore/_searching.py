"""Sorting, searching and set functions: sort, argsort, searchsorted, nonzero, count_nonzero and
the four unique_* functions.

``nonzero``, ``count_nonzero`` and ``searchsorted`` are built from the primitives (on the device;
``nonzero`` reads one count back, as any data-dependent shape must). Sorting and the set
functions run on the host in arraycore's derived version (listed by ``arraycore info``, see
``docs/host-path.md``): a backend with a device sort overrides them (NumPy binds its own, the
CUDA backend CuPy's, the OpenCL backend sorts with a bitonic network).

The order is the same everywhere: stable, NaNs last (first when ``descending``), equal elements
(``-0.0`` and ``0.0`` too) in their original order in both directions. The checks below
(:func:`sort_axis`, :func:`check_searchsorted`, :func:`check_nonzero`) are shared with the
backends' overrides, so that every backend refuses the same arguments with the same error.
"""

from __future__ import annotations

import builtins
import math
from typing import Any, NamedTuple

import numpy as np

from . import _advanced_indexing, _host
from ._base import NamespaceBase
from .backend import Array, normalize_axes

_INT64 = np.dtype("int64")

#: Most comparisons searchsorted broadcasts in one pass (len(x1) * x2.size); beyond, it runs a
#: binary search of all of x2 at once, in len(x1).bit_length() steps.
SEARCH_CHUNK = 1 << 22


class UniqueAllResult(NamedTuple):
    values: Any
    indices: Any
    inverse_indices: Any
    counts: Any


class UniqueCountsResult(NamedTuple):
    values: Any
    counts: Any


class UniqueInverseResult(NamedTuple):
    values: Any
    inverse_indices: Any


def sort_axis(op: str, x: Any, axis: int) -> int:
    """``axis`` of ``x`` for ``sort``/``argsort`` as a non-negative int (0-d ``x``: an error)."""
    if len(x.shape) == 0:
        raise ValueError(f"{op}: x must have at least one dimension, got a 0-d array")
    (ax,) = normalize_axes(axis, len(x.shape), op)
    return ax


def _host_sort(a: np.ndarray, axis: int, descending: bool) -> np.ndarray:
    if not descending:
        result: np.ndarray = np.sort(a, axis=axis, kind="stable")
        return result
    # not a flipped ascending sort: that would reverse equal elements (-0.0 and 0.0)
    return np.take_along_axis(a, _host_argsort(a, axis, True), axis=axis)


def _host_argsort(a: np.ndarray, axis: int, descending: bool) -> np.ndarray:
    if not descending:
        return np.argsort(a, axis=axis, kind="stable").astype(_INT64)
    # stable and descending: sort the reversed array, then map the positions back
    n = a.shape[axis]
    order = np.argsort(np.flip(a, axis=axis), axis=axis, kind="stable")
    result: np.ndarray = (n - 1 - np.flip(order, axis=axis)).astype(_INT64)
    return result


def _host_unique(a: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """values, first indices, inverse indices (of ``a``'s shape) and counts, each NaN distinct."""
    flat = a.reshape(-1)
    values, indices, inverse, counts = np.unique(
        flat, return_index=True, return_inverse=True, return_counts=True, equal_nan=False
    )
    i64 = _INT64
    return values, indices.astype(i64), inverse.reshape(a.shape).astype(i64), counts.astype(i64)


def check_searchsorted(x1: Any, side: str, sorter: Any) -> None:
    """The argument checks of ``searchsorted`` (shared with the backends' overrides)."""
    if len(x1.shape) != 1:
        raise ValueError(f"searchsorted: x1 must be 1-D, got shape {tuple(x1.shape)}")
    if side not in ("left", "right"):
        raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
    if sorter is not None and (
        tuple(sorter.shape) != tuple(x1.shape) or sorter.dtype.kind not in "iu"
    ):
        raise ValueError(
            f"searchsorted: sorter must be integer indices of x1's shape "
            f"{tuple(x1.shape)}, got {sorter.dtype} of shape {tuple(sorter.shape)}"
        )


def check_nonzero(x: Any) -> None:
    """``nonzero`` of a 0-d array is an error (the standard's rule)."""
    if len(x.shape) == 0:
        raise ValueError("nonzero: x must have at least one dimension, got a 0-d array")


class SearchingFunctions(NamespaceBase):
    """Sorting, searching and set functions (see the module docstring for where each runs)."""

    @_host.host_function("sort")
    def sort(
        self,
        x: Array,
        /,
        *,
        axis: int = -1,
        descending: builtins.bool = False,
        stable: builtins.bool = True,
    ) -> Array:
        """``x`` sorted along ``axis`` (stable; NaNs last, first when ``descending``)."""
        self._check("sort", x)
        ax = sort_axis("sort", x, axis)
        return _host.run(self, _host_sort, x, axis=ax, descending=bool(descending))

    @_host.host_function("argsort")
    def argsort(
        self,
        x: Array,
        /,
        *,
        axis: int = -1,
        descending: builtins.bool = False,
        stable: builtins.bool = True,
    ) -> Array:
        """Indices (int64) that sort ``x`` along ``axis``; equal elements keep their order,
        also when ``descending``."""
        self._check("argsort", x)
        ax = sort_axis("argsort", x, axis)
        return _host.run(self, _host_argsort, x, axis=ax, descending=bool(descending))

    def searchsorted(
        self, x1: Array, x2: Array, /, *, side: str = "left", sorter: Array | None = None
    ) -> Array:
        """Indices (int64) where the elements of ``x2`` would be inserted into the sorted 1-D
        ``x1`` to keep it sorted (``side="left"``: before equal elements; ``"right"``: after)."""
        self._check("searchsorted", x1, x2)
        check_searchsorted(x1, side, sorter)
        if sorter is not None:
            self._check("searchsorted", sorter)
            x1 = self.take(x1, sorter, axis=0)
        a, v = self._promote("searchsorted", x1, x2)
        n, count = a.shape[0], math.prod(v.shape)
        if n == 0 or count == 0:
            return self._backend.full(tuple(v.shape), 0, _INT64)
        flat = self._backend.reshape(v, (count,))
        if n * count > SEARCH_CHUNK:
            found = self._bisect(a, flat, side)
        else:  # one pass: (count, n) comparisons, summed
            hits = self._sorts_before(a, self._backend.reshape(flat, (count, 1)), side)
            found = self.sum(hits, axis=1, dtype=_INT64)
        return self._backend.reshape(found, tuple(v.shape))

    def _bisect(self, a: Array, v: Array, side: str) -> Array:
        """Binary search of every element of the 1-D ``v`` in the sorted 1-D ``a``, all at once:
        ``n.bit_length()`` steps of a ``take`` and a few element-wise primitives."""
        bk = self._backend
        n = a.shape[0]
        lo = bk.full(tuple(v.shape), 0, _INT64)
        hi = bk.full(tuple(v.shape), n, _INT64)
        one, two, last = (bk.full((), k, _INT64) for k in (1, 2, n - 1))
        for _ in range(n.bit_length()):  # enough halvings of [0, n]
            mid = bk.binary("floor_divide", bk.binary("add", lo, hi), two)
            probe = bk.take(a, bk.binary("minimum", mid, last), 0)
            # lo == hi is settled (then mid == lo == hi, so hi = mid changes nothing)
            right = bk.binary(
                "logical_and", bk.binary("less", lo, hi), self._sorts_before(probe, v, side)
            )
            lo = bk.where(right, bk.binary("add", mid, one), lo)
            hi = bk.where(right, hi, mid)
        return lo

    def _sorts_before(self, a: Array, v: Array, side: str) -> Array:
        """Whether ``a[j]`` goes before the value ``v`` (NaNs sort last, as in ``sort``)."""
        bk = self._backend
        hits = bk.binary("less" if side == "left" else "less_equal", a, v)
        if a.dtype.kind != "f":
            return hits
        nan_value = bk.unary("isnan", v)
        if side == "left":  # every number goes before a NaN value, a NaN element does not
            nan_value = bk.binary(
                "logical_and", nan_value, bk.unary("logical_not", bk.unary("isnan", a))
            )
        return bk.binary("logical_or", hits, nan_value)

    def nonzero(self, x: Array, /) -> tuple[Array, ...]:
        """The indices (int64, one array per axis) of the non-zero elements, in row-major order."""
        self._check("nonzero", x)
        check_nonzero(x)
        mask = self.not_equal(x, self._backend.full((), 0, x.dtype))
        return tuple(_advanced_indexing.nonzero_coordinates(self, mask))

    def count_nonzero(
        self, x: Array, /, *, axis: Any = None, keepdims: builtins.bool = False
    ) -> Array:
        """The number (int64) of non-zero elements along ``axis`` (all axes by default)."""
        self._check("count_nonzero", x)
        axes = normalize_axes(axis, len(x.shape), "count_nonzero")
        nonzero = self.not_equal(x, self._backend.full((), 0, x.dtype))
        return self.sum(nonzero, axis=axes, keepdims=keepdims, dtype=_INT64)

    def _unique(self, op: str, x: Array) -> UniqueAllResult:
        """All four results of the unique functions, built on ``argsort`` (the device's where the
        backend sorts on the device): a stable sort puts each value's first occurrence first in
        its group; groups start where a sorted element differs from the one before (NaN differs
        from everything, so every NaN is its own group)."""
        self._check(op, x)
        bk = self._backend
        n = math.prod(x.shape)
        flat = bk.reshape(x, (n,))
        if n == 0:
            empty = bk.full((0,), 0, _INT64)
            return UniqueAllResult(flat, empty, bk.full(tuple(x.shape), 0, _INT64), empty)
        order = self.argsort(flat, stable=True)
        ranked = bk.take(flat, order, 0)
        new_group = bk.full((1,), True, np.dtype("bool"))
        if n > 1:
            later = bk.getitem(ranked, (slice(1, None),))
            earlier = bk.getitem(ranked, (slice(0, n - 1),))
            new_group = self.concat([new_group, bk.binary("not_equal", later, earlier)])
        starts = _advanced_indexing.flat_nonzero(self, new_group)
        values = bk.take(ranked, starts, 0)
        indices = bk.take(order, starts, 0)
        ends = self.concat([bk.getitem(starts, (slice(1, None),)), bk.full((1,), n, _INT64)])
        counts = bk.binary("subtract", ends, starts)
        group = bk.binary(
            "subtract", self.cumulative_sum(bk.astype(new_group, _INT64)), bk.full((), 1, _INT64)
        )
        inverse = bk.full((n,), 0, _INT64)
        bk.scatter_add(inverse, order, group, 0)  # order is a permutation: each slot once
        return UniqueAllResult(values, indices, bk.reshape(inverse, tuple(x.shape)), counts)

    def unique_values(self, x: Array, /) -> Array:
        """The distinct elements of ``x``, sorted, as a 1-D array (every NaN distinct)."""
        return self._unique("unique_values", x).values

    def unique_counts(self, x: Array, /) -> UniqueCountsResult:
        """``(values, counts)``: the distinct elements and how often each occurs (int64)."""
        found = self._unique("unique_counts", x)
        return UniqueCountsResult(found.values, found.counts)

    def unique_inverse(self, x: Array, /) -> UniqueInverseResult:
        """``(values, inverse_indices)``: the distinct elements, and for each element of ``x``
        the index of its value (int64, of ``x``'s shape)."""
        found = self._unique("unique_inverse", x)
        return UniqueInverseResult(found.values, found.inverse_indices)

    def unique_all(self, x: Array, /) -> UniqueAllResult:
        """``(values, indices, inverse_indices, counts)``: the distinct elements, the flat index
        of each one's first occurrence, each element's value index and the counts (int64)."""
        return self._unique("unique_all", x)
