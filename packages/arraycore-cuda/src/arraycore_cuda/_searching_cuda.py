"""Sorting, searching and set functions on CUDA with CuPy (``cupy.sort``, ``cupy.argsort``,
``cupy.unique``: arraycore's derived versions run on the host; ``cupy.searchsorted`` and
``cupy.nonzero``: one kernel each instead of arraycore's compositions of primitives).

Each checks its arguments with arraycore's checks first, so errors are the same on every backend.

Built from the ``cupy`` module alone (no device is touched), like the other override tables.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from arraycore._searching import (
    UniqueAllResult,
    UniqueCountsResult,
    UniqueInverseResult,
    check_nonzero,
    check_searchsorted,
    sort_axis,
)

#: The names :func:`search_table` overrides.
SEARCH_NAMES = (
    "sort", "argsort", "searchsorted", "nonzero", "unique_all", "unique_counts",
    "unique_inverse", "unique_values",
)  # fmt: skip


def search_table(cp: Any) -> dict[str, Callable[..., Any]]:
    """``{name: function}`` for every name of :data:`SEARCH_NAMES`, on CuPy arrays."""

    def argsort(x: Any, /, *, axis: int = -1, descending: bool = False, stable: bool = True) -> Any:
        axis = sort_axis("argsort", x, axis)
        if not descending:
            return cp.argsort(x, axis=axis).astype(cp.int64)  # CuPy's sort is stable
        n = x.shape[axis]  # stable and descending: sort the reversed array, map positions back
        order = cp.argsort(cp.flip(x, axis=axis), axis=axis)
        return (n - 1 - cp.flip(order, axis=axis)).astype(cp.int64)

    def sort(x: Any, /, *, axis: int = -1, descending: bool = False, stable: bool = True) -> Any:
        axis = sort_axis("sort", x, axis)
        if not descending:
            return cp.sort(x, axis=axis)
        # a flipped ascending sort would reverse equal elements (-0.0 and 0.0)
        return cp.take_along_axis(x, argsort(x, axis=axis, descending=True), axis=axis)

    def searchsorted(x1: Any, x2: Any, /, *, side: str = "left", sorter: Any = None) -> Any:
        check_searchsorted(x1, side, sorter)
        if hasattr(x2, "dtype") and x2.dtype != x1.dtype:  # compare in the promoted dtype
            common = np.result_type(x1.dtype, x2.dtype)
            x1, x2 = x1.astype(common), x2.astype(common)
        # CuPy's kernel orders NaNs last, as sort does
        return cp.searchsorted(x1, x2, side=side, sorter=sorter).astype(cp.int64)

    def nonzero(x: Any, /) -> tuple[Any, ...]:
        check_nonzero(x)
        return tuple(i.astype(cp.int64) for i in cp.nonzero(x))

    def _unique(x: Any) -> tuple[Any, Any, Any, Any]:
        values, index, inverse, counts = cp.unique(
            x.reshape(-1), return_index=True, return_inverse=True, return_counts=True,
            equal_nan=False,
        )  # fmt: skip
        i64 = cp.int64
        return values, index.astype(i64), inverse.reshape(x.shape).astype(i64), counts.astype(i64)

    def unique_all(x: Any, /) -> UniqueAllResult:
        return UniqueAllResult(*_unique(x))

    def unique_counts(x: Any, /) -> UniqueCountsResult:
        values, _, _, counts = _unique(x)
        return UniqueCountsResult(values, counts)

    def unique_inverse(x: Any, /) -> UniqueInverseResult:
        values, _, inverse, _ = _unique(x)
        return UniqueInverseResult(values, inverse)

    def unique_values(x: Any, /) -> Any:
        return cp.unique(x.reshape(-1), equal_nan=False)

    local: dict[str, Callable[..., Any]] = {
        "sort": sort, "argsort": argsort, "searchsorted": searchsorted, "nonzero": nonzero,
        "unique_all": unique_all,
        "unique_counts": unique_counts, "unique_inverse": unique_inverse,
        "unique_values": unique_values,
    }  # fmt: skip
    return local
