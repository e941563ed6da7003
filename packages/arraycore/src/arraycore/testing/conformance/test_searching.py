"""Conformance of sorting, searching, set and the newer manipulation functions (sort, argsort,
searchsorted, nonzero, count_nonzero, unique_*, diff, cumulative_prod, roll, tril, triu,
meshgrid, unstack) against NumPy on every dtype the device has."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arraycore.testing import assert_close, to_host
from arraycore.testing import strategies as acst

SETTINGS = settings(max_examples=20, deadline=None)


def _values(dtype: np.dtype) -> np.ndarray:
    """A (3, 4) array with repeats (and a NaN and -0.0 for floating dtypes)."""
    if dtype.kind == "b":
        return np.array([[True, False, True, True], [False, False, True, False], [True] * 4])
    base = np.array([[3, 1, 2, 1], [0, 2, 2, 5], [1, 1, 4, 0]]).astype(dtype)
    if dtype.kind == "f":
        base[0, 2], base[2, 3] = np.nan, -0.0
    return base


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_and_argsort(xp: Any, axis: int, descending: bool) -> None:
    for dtype in acst.supported_dtypes(xp):
        host = _values(dtype)
        x = xp.asarray(host)
        order = np.argsort(host, axis=axis, kind="stable")
        if descending:  # stable descending: equal elements keep their order
            n = host.shape[axis]
            order = n - 1 - np.flip(np.argsort(np.flip(host, axis), axis, kind="stable"), axis)
        got = xp.argsort(x, axis=axis, descending=descending)
        assert got.dtype == xp.int64
        assert_close(got, order, err_msg=f"argsort {dtype} descending={descending}")
        want = np.take_along_axis(host, order, axis)
        assert_close(xp.sort(x, axis=axis, descending=descending), want, err_msg=f"sort {dtype}")


def test_sort_errors(xp: Any) -> None:
    with pytest.raises(ValueError, match="0-d"):
        xp.sort(xp.asarray(1.0))
    with pytest.raises(ValueError, match="axis 2"):
        xp.argsort(xp.asarray(np.zeros((2, 2), np.float32)), axis=2)


@SETTINGS
@given(data=st.data())
def test_searchsorted(xp: Any, data: st.DataObject) -> None:
    dtype = data.draw(acst.dtypes(xp, "numeric"), label="dtype")
    sorted_ = np.sort(data.draw(acst.arrays(dtype, acst.shapes(min_dims=1, max_dims=1))))
    values = data.draw(acst.arrays(dtype, acst.shapes(max_dims=2)), label="values")
    side: Any = data.draw(st.sampled_from(["left", "right"]), label="side")
    got = xp.searchsorted(xp.asarray(sorted_), xp.asarray(values), side=side)
    assert got.dtype == xp.int64
    assert_close(got, np.searchsorted(sorted_, values, side=side))


def test_searchsorted_with_a_sorter_and_nans(xp: Any) -> None:
    dtype = acst.supported_dtypes(xp, "real floating")[0]
    host = np.array([5.0, 1.0, np.nan, 2.0], dtype=dtype)
    sorter = np.argsort(host)
    values = np.array([0.0, 2.0, 6.0, np.nan], dtype=dtype)
    for side in ("left", "right"):
        got = xp.searchsorted(
            xp.asarray(host), xp.asarray(values), side=side, sorter=xp.asarray(sorter)
        )
        assert_close(got, np.searchsorted(host, values, side=side, sorter=sorter), err_msg=side)
    with pytest.raises(ValueError, match="side"):
        xp.searchsorted(xp.asarray(host), xp.asarray(values), side="middle")
    with pytest.raises(ValueError, match="1-D"):
        xp.searchsorted(xp.asarray(np.zeros((2, 2), dtype)), xp.asarray(values))


def test_nonzero_and_count_nonzero(xp: Any) -> None:
    for dtype in acst.supported_dtypes(xp):
        host = _values(dtype)
        host[1] = 0
        x = xp.asarray(host)
        got = xp.nonzero(x)
        assert isinstance(got, tuple) and len(got) == 2
        for g, w in zip(got, np.nonzero(host)):
            assert g.dtype == xp.int64
            assert_close(g, w, err_msg=f"nonzero {dtype}")
        for axis in (None, 0, 1, (0, 1)):
            for keepdims in (False, True):
                want = np.count_nonzero(host, axis=axis, keepdims=keepdims)
                got_count = xp.count_nonzero(x, axis=axis, keepdims=keepdims)
                assert got_count.dtype == xp.int64
                assert_close(got_count, np.asarray(want), err_msg=f"count_nonzero {axis}")
    empty = xp.nonzero(xp.asarray(np.zeros((2, 0), dtype=np.float32)))
    assert [tuple(e.shape) for e in empty] == [(0,), (0,)]
    with pytest.raises(ValueError, match="0-d"):
        xp.nonzero(xp.asarray(1.0))


def test_unique_functions(xp: Any) -> None:
    for dtype in acst.supported_dtypes(xp):
        host = _values(dtype)
        x = xp.asarray(host)
        want = np.unique_all(host)
        got = xp.unique_all(x)
        assert tuple(got._fields) == ("values", "indices", "inverse_indices", "counts")
        for field in got._fields:
            assert_close(getattr(got, field), getattr(want, field), err_msg=f"{field} {dtype}")
        assert tuple(got.inverse_indices.shape) == host.shape
        counts = xp.unique_counts(x)
        assert tuple(counts._fields) == ("values", "counts")
        assert_close(counts.counts, want.counts)
        inverse = xp.unique_inverse(x)
        assert tuple(inverse._fields) == ("values", "inverse_indices")
        assert_close(inverse.inverse_indices, want.inverse_indices)
        assert_close(xp.unique_values(x), want.values)
    nans = xp.asarray(np.array([np.nan, 1.0, np.nan], dtype=np.float32))
    assert to_host(xp.unique_values(nans)).size == 3  # every NaN is distinct


@pytest.mark.parametrize("n", [0, 1, 2])
def test_diff(xp: Any, n: int) -> None:
    for dtype in acst.supported_dtypes(xp):
        host = _values(dtype)
        if dtype.kind == "u":  # differences of unsigned integers wrap around, as in NumPy
            host = np.sort(host, axis=1)
        x = xp.asarray(host)
        with np.errstate(all="ignore"):
            assert_close(xp.diff(x, n=n), np.diff(host, n=n), err_msg=f"diff {dtype}")
            assert_close(xp.diff(x, axis=0, n=n), np.diff(host, axis=0, n=n))
    host = np.arange(6, dtype=np.float32).reshape(2, 3)
    ones = np.ones((2, 1), np.float32)
    x, edge = xp.asarray(host), xp.asarray(ones)
    assert_close(xp.diff(x, prepend=edge, append=edge), np.diff(host, prepend=ones, append=ones))
    with pytest.raises(ValueError, match="prepend/append"):
        xp.diff(x, prepend=xp.asarray(np.ones((3, 1), np.float32)))


def test_cumulative_prod(xp: Any) -> None:
    for dtype in acst.supported_dtypes(xp, "numeric"):
        host = np.array([[1, 2, 3], [2, 1, 2]]).astype(dtype)
        x = xp.asarray(host)
        for axis in (0, 1):
            want = np.cumulative_prod(host, axis=axis)
            assert_close(xp.cumulative_prod(x, axis=axis), want, err_msg=f"{dtype} {axis}")
        want = np.cumulative_prod(host[0], include_initial=True)
        assert_close(xp.cumulative_prod(x[0], include_initial=True), want)
    with pytest.raises(ValueError, match="required"):  # NumPy's words on that backend
        xp.cumulative_prod(xp.asarray(np.ones((2, 2), np.float32)))


def test_roll_tril_triu_meshgrid_unstack(xp: Any) -> None:
    host = np.arange(24).reshape(2, 3, 4)
    x = xp.asarray(host)
    cases: list[tuple[Any, Any]] = [(1, None), (-2, None), (1, 0), (5, -1), ((1, -1), (0, 2))]
    for shift, axis in [*cases, (0, 1)]:
        assert_close(xp.roll(x, shift, axis=axis), np.roll(host, shift, axis=axis))
    for k in (-1, 0, 2):
        assert_close(xp.tril(x, k=k), np.tril(host, k=k))
        assert_close(xp.triu(x, k=k), np.triu(host, k=k))
    a, b, c = (xp.asarray(np.arange(n)) for n in (2, 3, 4))
    for indexing in ("xy", "ij"):
        got = xp.meshgrid(a, b, c, indexing=indexing)
        want = np.meshgrid(np.arange(2), np.arange(3), np.arange(4), indexing=indexing)
        assert isinstance(got, list | tuple) and len(got) == 3
        for g, w in zip(got, want):
            assert_close(g, w, err_msg=indexing)
    for axis in (0, 1, -1):
        parts = xp.unstack(x, axis=axis)
        want_parts = [np.take(host, i, axis=axis) for i in range(host.shape[axis])]
        assert isinstance(parts, tuple) and len(parts) == len(want_parts)
        for g, w in zip(parts, want_parts):
            assert_close(g, w)
    with pytest.raises(ValueError, match="2 dimensions"):
        xp.tril(xp.asarray(np.arange(3)))
