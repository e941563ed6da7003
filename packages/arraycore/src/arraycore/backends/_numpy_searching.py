"""The NumPy backend's sorting, searching and set functions: NumPy's own, behind arraycore's
argument checks (the same errors as on every backend), with the standard's semantics where
NumPy's function differs (``descending``, stable order, sorted unique values, int64 indices).

arraycore's derived versions of ``sort``, ``argsort`` and ``unique_*`` run on the host path; on
this backend the host is the device, so these overrides compute in place, without the copies
(and are not listed among the backend's host functions).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .. import _searching as s

_INT64 = np.dtype("int64")


def sort(x: Any, /, *, axis: int = -1, descending: bool = False, stable: bool = True) -> Any:
    """``x`` sorted along ``axis`` (stable; NaNs last, first when ``descending``)."""
    return s._host_sort(np.asarray(x), s.sort_axis("sort", x, axis), bool(descending))


def argsort(x: Any, /, *, axis: int = -1, descending: bool = False, stable: bool = True) -> Any:
    """Indices (int64) that sort ``x`` along ``axis``; equal elements keep their order."""
    return s._host_argsort(np.asarray(x), s.sort_axis("argsort", x, axis), bool(descending))


def searchsorted(x1: Any, x2: Any, /, *, side: str = "left", sorter: Any = None) -> Any:
    """``numpy.searchsorted`` (int64) after arraycore's checks."""
    s.check_searchsorted(x1, side, sorter)
    found = np.searchsorted(x1, x2, side=side, sorter=sorter)  # type: ignore[call-overload]
    return found.astype(_INT64, copy=False)


def nonzero(x: Any, /) -> tuple[Any, ...]:
    """``numpy.nonzero`` (int64 index arrays) after arraycore's checks."""
    s.check_nonzero(x)
    return tuple(i.astype(_INT64, copy=False) for i in np.nonzero(x))


def unique_all(x: Any, /) -> s.UniqueAllResult:
    """Sorted distinct values, first indices, inverse indices (of ``x``'s shape), counts."""
    return s.UniqueAllResult(*s._host_unique(np.asarray(x)))


def unique_counts(x: Any, /) -> s.UniqueCountsResult:
    """Sorted distinct values and their counts (int64)."""
    values, _, _, counts = s._host_unique(np.asarray(x))
    return s.UniqueCountsResult(values, counts)


def unique_inverse(x: Any, /) -> s.UniqueInverseResult:
    """Sorted distinct values and each element's index among them (int64, ``x``'s shape)."""
    values, _, inverse, _ = s._host_unique(np.asarray(x))
    return s.UniqueInverseResult(values, inverse)


def unique_values(x: Any, /) -> Any:
    """The sorted distinct values (``numpy.unique_values`` does not sort since NumPy 2.3)."""
    return np.unique(np.asarray(x).reshape(-1), equal_nan=False)


#: ``{name: function}`` for :meth:`NumpyBackend.overrides`.
TABLE: dict[str, Callable[..., Any]] = {
    "sort": sort,
    "argsort": argsort,
    "searchsorted": searchsorted,
    "nonzero": nonzero,
    "unique_all": unique_all,
    "unique_counts": unique_counts,
    "unique_inverse": unique_inverse,
    "unique_values": unique_values,
}
