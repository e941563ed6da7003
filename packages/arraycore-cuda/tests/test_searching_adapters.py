"""The logic of the CuPy adapters of :mod:`arraycore_cuda._searching_cuda` (argument checks,
stable descending order, int64 results, namedtuples), with NumPy's functions in CuPy's place.

This checks what the adapters add around CuPy, not CuPy or a GPU: CuPy has NumPy's signatures
for these functions, so NumPy can run the adapter code anywhere. CuPy's kernels themselves are
checked by the conformance kit on a GPU (``nox -s "conformance(cuda)"``).
"""

from __future__ import annotations

import types
from typing import Any

import numpy as np
import pytest

import arraycore
from arraycore_cuda._searching_cuda import SEARCH_NAMES, search_table


def _stand_in() -> Any:
    """The few ``cupy`` functions the adapters call, from NumPy (CuPy's sorts are stable)."""
    return types.SimpleNamespace(
        sort=lambda a, axis: np.sort(a, axis=axis, kind="stable"),
        argsort=lambda a, axis: np.argsort(a, axis=axis, kind="stable"),
        flip=np.flip,
        take_along_axis=np.take_along_axis,
        searchsorted=np.searchsorted,
        nonzero=np.nonzero,
        unique=np.unique,
        int64=np.int64,
    )


TABLE = search_table(_stand_in())
REF = arraycore.namespace("numpy")


def _same(got: Any, want: Any) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    if got.dtype.kind == "f":
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


def test_the_table_has_every_name() -> None:
    assert set(TABLE) == set(SEARCH_NAMES)


def test_sort_and_argsort_match_the_reference() -> None:
    x = np.array([[0.0, -0.0, np.nan, 1.0, -0.0], [2.0, 2.0, -1.0, np.nan, 0.0]])
    for axis in (0, 1, -1):
        for descending in (False, True):
            kw = {"axis": axis, "descending": descending}
            _same(TABLE["argsort"](x, **kw), REF.argsort(x, **kw))
            _same(TABLE["sort"](x, **kw), REF.sort(x, **kw))


def test_searchsorted_and_nonzero_match_the_reference() -> None:
    x1 = np.array([-1, 0, 2, 2, 7], dtype=np.int8)
    x2 = np.array([[-1.5, 2.0], [2.5, np.nan]], dtype=np.float32)
    for side in ("left", "right"):
        _same(TABLE["searchsorted"](x1, x2, side=side), REF.searchsorted(x1, x2, side=side))
    sorter = np.array([4, 3, 2, 1, 0])
    _same(
        TABLE["searchsorted"](x1[::-1].copy(), x2, sorter=sorter),
        REF.searchsorted(x1[::-1].copy(), x2, sorter=sorter),
    )
    mask = np.array([[0, 3, 0], [1, 0, 2]], dtype=np.int16)
    for got, want in zip(TABLE["nonzero"](mask), REF.nonzero(mask), strict=True):
        _same(got, want)


def test_unique_functions_match_the_reference() -> None:
    x = np.array([[3.0, np.nan, 1.0], [1.0, np.nan, 3.0]])
    for name in ("unique_all", "unique_counts", "unique_inverse"):
        got, want = TABLE[name](x), getattr(REF, name)(x)
        assert type(got) is type(want)
        for g, w in zip(got, want, strict=True):
            _same(g, w)
    _same(TABLE["unique_values"](x), REF.unique_values(x))


def test_errors_are_arraycores() -> None:
    for name in ("sort", "argsort"):
        with pytest.raises(ValueError, match=f"{name}: x must have at least one dimension"):
            TABLE[name](np.asarray(1.0))
        with pytest.raises(ValueError, match=f"{name}: axis 2 is out of range"):
            TABLE[name](np.zeros((2, 2)), axis=2)
    with pytest.raises(ValueError, match="searchsorted: side must be"):
        TABLE["searchsorted"](np.arange(3), np.arange(2), side="middle")
    with pytest.raises(ValueError, match="searchsorted: sorter must be integer indices"):
        TABLE["searchsorted"](np.arange(3), np.arange(2), sorter=np.arange(2))
    with pytest.raises(ValueError, match="nonzero: x must have at least one dimension"):
        TABLE["nonzero"](np.asarray(1))
