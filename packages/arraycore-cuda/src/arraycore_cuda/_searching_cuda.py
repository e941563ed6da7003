"""Sorting and set functions on CUDA with CuPy (``cupy.sort``, ``cupy.argsort``, ``cupy.unique``),
where arraycore's derived versions run on the host.

Built from the ``cupy`` module alone (no device is touched), like the other override tables.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from arraycore._searching import UniqueAllResult, UniqueCountsResult, UniqueInverseResult

#: The names :func:`search_table` overrides.
SEARCH_NAMES = (
    "sort", "argsort", "unique_all", "unique_counts", "unique_inverse", "unique_values",
)  # fmt: skip


def search_table(cp: Any) -> dict[str, Callable[..., Any]]:
    """``{name: function}`` for every name of :data:`SEARCH_NAMES`, on CuPy arrays."""

    def sort(x: Any, /, *, axis: int = -1, descending: bool = False, stable: bool = True) -> Any:
        result = cp.sort(x, axis=axis)  # CuPy's sort is stable
        return cp.flip(result, axis=axis) if descending else result

    def argsort(x: Any, /, *, axis: int = -1, descending: bool = False, stable: bool = True) -> Any:
        if not descending:
            return cp.argsort(x, axis=axis).astype(cp.int64)
        n = x.shape[axis]  # stable and descending: sort the reversed array, map positions back
        order = cp.argsort(cp.flip(x, axis=axis), axis=axis)
        return (n - 1 - cp.flip(order, axis=axis)).astype(cp.int64)

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
        "sort": sort, "argsort": argsort, "unique_all": unique_all,
        "unique_counts": unique_counts, "unique_inverse": unique_inverse,
        "unique_values": unique_values,
    }  # fmt: skip
    return local
