"""Conformance of sort and argsort: stable in both directions, NaNs and signed zeros, every
dtype (float16 included where the device has it), empty and strided inputs, bad axes.

The reference is an independent stable sort (Python's ``sorted`` on each lane), not NumPy's:
NumPy has no ``descending``. The rule checked: ascending puts NaNs last, descending first;
elements that compare equal (``-0.0 == 0.0``, NaNs among themselves) keep their order.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arraycore.testing import assert_close, to_host
from arraycore.testing import strategies as acst

SETTINGS = settings(max_examples=40, deadline=None)
ALL_DTYPES = (*acst.KIT_DTYPES, "float16")


def reference_argsort(host: np.ndarray, axis: int, descending: bool) -> np.ndarray:
    """Stable argsort of every lane along ``axis`` with Python's ``sorted``."""
    lanes = np.moveaxis(host, axis, -1)
    flat = lanes.reshape(-1, lanes.shape[-1]) if lanes.size else lanes.reshape(0, lanes.shape[-1])
    out = np.empty(flat.shape, np.int64)
    sign = -1.0 if descending else 1.0
    for r, row in enumerate(flat):
        values = [float(v) for v in row]

        def key(i: int, values: list[float] = values) -> tuple[bool, float]:
            nan = values[i] != values[i]  # NaNs last ascending, first descending
            return (nan != descending, 0.0 if nan else sign * values[i])

        out[r] = sorted(range(len(values)), key=key)
    return np.moveaxis(out.reshape(lanes.shape), -1, axis)


@st.composite
def tied_arrays(draw: st.DrawFn, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    """Values with many ties; floats also get NaNs and zeros of both signs."""
    if dtype.kind == "b":
        return np.asarray(draw(acst.arrays(dtype, shape)))
    values = [-0.0, 0.0, 1.0, 2.0, 3.0]
    if dtype.kind == "f":
        values += [np.nan, -1.5, np.inf, -np.inf]
    elif dtype.kind == "i":
        values += [-1.0, -3.0]
    picks = draw(st.lists(st.sampled_from(values), min_size=int(np.prod(shape)),
                          max_size=int(np.prod(shape))))  # fmt: skip
    return np.array(picks, dtype=np.float64).reshape(shape).astype(dtype)


def _check_sorted(xp: Any, x: Any, host: np.ndarray, axis: int, descending: bool) -> None:
    order = reference_argsort(host, axis, descending)
    msg = f"{host.dtype} axis={axis} descending={descending}"
    got = xp.argsort(x, axis=axis, descending=descending)
    assert got.dtype == xp.int64, msg
    assert_close(got, order, err_msg=f"argsort {msg}")
    result = xp.sort(x, axis=axis, descending=descending)
    want = np.take_along_axis(host, order, axis)
    assert_close(result, want, err_msg=f"sort {msg}")
    if host.dtype.kind == "f":  # -0.0 and 0.0 compare equal: their order is the input's
        assert (np.signbit(to_host(result)) == np.signbit(want)).all(), f"signed zeros {msg}"


@SETTINGS
@given(data=st.data())
def test_sort_and_argsort_are_stable_both_ways(xp: Any, data: st.DataObject) -> None:
    dtype = data.draw(acst.dtypes(xp, names=ALL_DTYPES), label="dtype")
    shape = data.draw(acst.shapes(min_dims=1, max_dims=3, max_side=6), label="shape")
    host = data.draw(tied_arrays(dtype, shape), label="x")
    axis = data.draw(st.integers(-len(shape), len(shape) - 1), label="axis")
    descending = data.draw(st.booleans(), label="descending")
    x = acst.on_device(xp, host, data.draw(acst.layouts(), label="layout"))
    _check_sorted(xp, x, host, axis, descending)
    np.testing.assert_array_equal(to_host(x), host)  # the input is left as it was


def test_defaults_and_the_stable_keyword(xp: Any) -> None:
    host = np.array([[3.0, -0.0, np.nan, 0.0, 1.0], [2.0, 2.0, -1.0, np.nan, 2.0]], np.float32)
    x = xp.asarray(host)
    _check_sorted(xp, x, host, -1, False)
    _check_sorted(xp, x, host, 0, True)
    assert_close(xp.sort(x), np.sort(host, axis=-1))  # axis=-1, ascending by default
    for descending in (False, True):  # stable=False: sorted, in any order of equal elements
        order = to_host(xp.argsort(x, descending=descending, stable=False))
        want = np.take_along_axis(host, reference_argsort(host, -1, descending), -1)
        assert_close(np.take_along_axis(host, order, -1), want)
        assert_close(xp.sort(x, descending=descending, stable=False), want)


@pytest.mark.parametrize(("shape", "axis"), [((0,), 0), ((3, 0), 1), ((3, 0), 0), ((0, 2), -1)])
def test_empty_arrays(xp: Any, shape: tuple[int, ...], axis: int) -> None:
    host = np.zeros(shape, np.float32)
    x = xp.asarray(host)
    for descending in (False, True):
        assert_close(xp.sort(x, axis=axis, descending=descending), host)
        assert_close(xp.argsort(x, axis=axis, descending=descending), host.astype(np.int64))


def test_a_long_axis(xp: Any) -> None:
    host = (np.arange(3000, dtype=np.int64) * 7919 % 101).astype(np.int32).reshape(2, 1500)
    x = xp.asarray(host)
    for descending in (False, True):
        _check_sorted(xp, x, host, 1, descending)


def test_errors_name_the_function_and_axis(xp: Any) -> None:
    for name in ("sort", "argsort"):
        fn = getattr(xp, name)
        with pytest.raises(ValueError, match=f"{name}: .*0-d"):
            fn(xp.asarray(1.0))
        for axis in (2, -3):
            with pytest.raises(ValueError, match=f"{name}: axis {axis} is out of range"):
                fn(xp.asarray(np.zeros((2, 2), np.float32)), axis=axis)
