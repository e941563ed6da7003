"""Conformance of searchsorted, nonzero and count_nonzero beyond the basic cases: every dtype,
NaNs and signed zeros, both of arraycore's searchsorted strategies (one broadcast pass, and the
binary search it switches to for large inputs), sorters, mixed dtypes, empty and 0-d inputs,
strided inputs, negative and tuple axes, keepdims, and the errors."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arraycore import _searching
from arraycore.testing import assert_close
from arraycore.testing import strategies as acst

from .test_sorting import ALL_DTYPES, tied_arrays

SETTINGS = settings(max_examples=30, deadline=None)
#: The strategy fixture only sets a module constant, the same for every example.
FIXTURE_SETTINGS = settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@pytest.fixture(params=["one pass", "binary search"])
def strategy(request: pytest.FixtureRequest) -> Iterator[str]:
    """Which of arraycore's two ways searchsorted takes (backends that override it ignore it)."""
    saved = _searching.SEARCH_CHUNK
    _searching.SEARCH_CHUNK = saved if request.param == "one pass" else 0
    try:
        yield request.param
    finally:
        _searching.SEARCH_CHUNK = saved


SIDES: tuple[Any, ...] = ("left", "right")


def _sorted_host(data: st.DataObject, dtype: np.dtype, n: int) -> np.ndarray:
    return np.sort(data.draw(tied_arrays(dtype, (n,)), label="x1"))  # NaNs last, as sort has them


@FIXTURE_SETTINGS
@given(data=st.data())
def test_searchsorted_every_dtype(xp: Any, strategy: str, data: st.DataObject) -> None:
    dtype = data.draw(acst.dtypes(xp, names=ALL_DTYPES), label="dtype")
    x1 = _sorted_host(data, dtype, data.draw(st.integers(0, 9), label="n"))
    x2 = data.draw(tied_arrays(dtype, data.draw(acst.shapes(max_dims=2))), label="x2")
    side: Any = data.draw(st.sampled_from(["left", "right"]), label="side")
    got = xp.searchsorted(
        acst.on_device(xp, x1, data.draw(acst.layouts())), acst.on_device(xp, x2), side=side
    )
    assert got.dtype == xp.int64
    assert_close(got, np.searchsorted(x1, x2, side=side).astype(np.int64), err_msg=strategy)


def test_searchsorted_with_a_sorter_mixed_dtypes_and_0d(xp: Any, strategy: str) -> None:
    host = np.array([5, 1, 4, 1, 3], dtype=np.int16)
    for sorter_dtype in (np.int64, np.int32, np.uint8):
        sorter: Any = np.argsort(host, kind="stable").astype(sorter_dtype)
        values = np.array([[0, 1, 2], [5, 6, 3]], dtype=np.int16)
        for side in SIDES:
            got = xp.searchsorted(
                xp.asarray(host), xp.asarray(values), side=side, sorter=xp.asarray(sorter)
            )
            assert_close(got, np.searchsorted(host, values, side=side, sorter=sorter))
    floats = acst.supported_dtypes(xp, "real floating")[-1]
    x1 = np.array([-1, 0, 2, 2, 7], dtype=np.int8)
    x2 = np.array([-1.5, 0.0, 2.0, 2.5, 9.0], dtype=floats)  # compared in the promoted dtype
    for side in SIDES:
        got = xp.searchsorted(xp.asarray(x1), xp.asarray(x2), side=side)
        assert_close(got, np.searchsorted(x1.astype(floats), x2, side=side))
        scalar = xp.searchsorted(xp.asarray(x1), xp.asarray(np.array(2, np.int8)), side=side)
        assert tuple(scalar.shape) == ()
        assert_close(scalar, np.asarray(np.searchsorted(x1, 2, side=side)))


def test_searchsorted_errors(xp: Any) -> None:
    x1 = xp.asarray(np.arange(4, dtype=np.float32))
    v = xp.asarray(np.array([1.0], np.float32))
    with pytest.raises(ValueError, match=r"searchsorted: x1 must be 1-D, got shape \(2, 2\)"):
        xp.searchsorted(xp.asarray(np.zeros((2, 2), np.float32)), v)
    with pytest.raises(ValueError, match=r"searchsorted: x1 must be 1-D, got shape \(\)"):
        xp.searchsorted(xp.asarray(1.0), v)
    with pytest.raises(ValueError, match="searchsorted: side must be 'left' or 'right'"):
        xp.searchsorted(x1, v, side="middle")
    for bad in (np.arange(3), np.arange(4, dtype=np.float32), np.arange(8).reshape(2, 4)):
        with pytest.raises(ValueError, match=r"searchsorted: sorter must be integer indices"):
            xp.searchsorted(x1, v, sorter=xp.asarray(bad))


@SETTINGS
@given(data=st.data())
def test_nonzero_every_dtype(xp: Any, data: st.DataObject) -> None:
    dtype = data.draw(acst.dtypes(xp, names=ALL_DTYPES), label="dtype")
    shape = data.draw(acst.shapes(min_dims=1, max_dims=4), label="shape")
    host = data.draw(tied_arrays(dtype, shape), label="x")  # -0.0 is zero, NaN is not
    got = xp.nonzero(acst.on_device(xp, host, data.draw(acst.layouts())))
    want = np.nonzero(host)
    assert isinstance(got, tuple) and len(got) == len(shape)
    for g, w in zip(got, want):
        assert g.dtype == xp.int64
        assert_close(g, w.astype(np.int64))


def test_nonzero_of_0d_is_an_error(xp: Any) -> None:
    for value in (0, 1.0, True):
        with pytest.raises(ValueError, match=r"nonzero: .*0-d"):
            xp.nonzero(xp.asarray(value))


@SETTINGS
@given(data=st.data())
def test_count_nonzero(xp: Any, data: st.DataObject) -> None:
    dtype = data.draw(acst.dtypes(xp, names=ALL_DTYPES), label="dtype")
    shape = data.draw(acst.shapes(max_dims=4), label="shape")
    host = data.draw(tied_arrays(dtype, shape), label="x")
    axis = data.draw(acst.axes(len(shape)), label="axis")
    keepdims = data.draw(st.booleans(), label="keepdims")
    x = acst.on_device(xp, host, data.draw(acst.layouts()))
    got = xp.count_nonzero(x, axis=axis, keepdims=keepdims)
    want = np.asarray(np.count_nonzero(host, axis=axis, keepdims=keepdims), dtype=np.int64)
    assert got.dtype == xp.int64
    assert_close(got, want, err_msg=f"axis={axis} keepdims={keepdims}")


def test_count_nonzero_errors(xp: Any) -> None:
    x = xp.asarray(np.ones((2, 3), np.float32))
    with pytest.raises(ValueError, match="count_nonzero: axis 2 is out of range"):
        xp.count_nonzero(x, axis=2)
    with pytest.raises(ValueError, match="count_nonzero: repeated axis"):
        xp.count_nonzero(x, axis=(0, -2))
