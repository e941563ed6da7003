"""Conformance of the reductions: sum, prod, mean, var, std, max, min, argmax, argmin, all, any
and cumulative_sum, over ``axis`` None, an int, a tuple (possibly empty) or negative axes, with
and without ``keepdims``, on generated shapes including empty and size-1 axes.

Result dtypes are NumPy 2's, which follow the standard: ``sum``/``prod``/``cumulative_sum`` of
integers smaller than 64 bits accumulate in ``int64`` (``uint64`` for unsigned) and bools in
``int64``; ``mean``/``var``/``std`` of floats keep the dtype. Floating results use the dtype's
tolerance scaled by the number of terms, since a backend may add in any order.

Where NumPy goes beyond the standard it is the reference: an empty ``mean``/``var``/``std`` is
NaN (NumPy warns; the kit does not check warnings), ``max``/``min``/``argmax``/``argmin`` over a
zero-size axis raise ``ValueError``, and integer ``mean``/``var`` give the default float.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arraycore.testing import assert_close
from arraycore.testing import strategies as acst

SETTINGS = settings(max_examples=15, deadline=None)

REDUCTIONS: dict[str, Any] = {
    "sum": "numeric",
    "prod": "numeric",
    "max": "numeric",
    "min": "numeric",
    "all": None,
    "any": None,
    "mean": "real floating",
    "var": "real floating",
    "std": "real floating",
}


def _terms(shape: tuple[int, ...], axis: Any) -> int:
    if axis is None:
        return max(math.prod(shape), 1)
    axes = (axis,) if isinstance(axis, int) else axis
    return max(math.prod(shape[a] for a in axes), 1)


def _quiet(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Call ``fn`` with NumPy's empty-slice and invalid-value warnings silenced."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        return fn(*args, **kwargs)


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
@SETTINGS
@given(data=st.data())
def test_reduction(xp: Any, name: str, data: st.DataObject) -> None:
    dtype = data.draw(acst.dtypes(xp, REDUCTIONS[name]), label="dtype")
    # prod of up to 256 small integers overflows: keep prod's inputs to a few elements.
    max_side = 2 if name == "prod" else acst.MAX_SIDE
    shape = data.draw(acst.shapes(max_side=max_side), label="shape")
    domain = "unit" if name == "prod" and dtype.kind == "f" else "any"
    if name == "prod" and dtype.kind in "iu":
        domain = "base"
    host = data.draw(acst.arrays(dtype, shape, domain), label="x")
    axis = data.draw(acst.axes(len(shape)), label="axis")
    keepdims = data.draw(st.booleans(), label="keepdims")
    kwargs: dict[str, Any] = {"axis": axis, "keepdims": keepdims}
    if name in ("var", "std"):
        kwargs["correction"] = data.draw(st.sampled_from([0, 1, 0.5]), label="correction")
    x = acst.on_device(xp, host, data.draw(acst.layouts(), label="layout"))
    ref = getattr(np, name)
    reduced = range(len(shape)) if axis is None else (axis,) if isinstance(axis, int) else axis
    if name in ("max", "min") and any(shape[a] == 0 for a in reduced):
        with pytest.raises(ValueError):
            ref(host, **kwargs)
        with pytest.raises(ValueError):
            getattr(xp, name)(x, **kwargs)
        return
    expected = _quiet(ref, host, **kwargs)
    result = _quiet(getattr(xp, name), x, **kwargs)
    assert_close(result, expected, scale=_terms(shape, axis), err_msg=f"{name}({kwargs})")


@pytest.mark.parametrize("name", ["sum", "prod"])
@SETTINGS
@given(data=st.data())
def test_sum_prod_dtype_argument(xp: Any, name: str, data: st.DataObject) -> None:
    """``dtype=`` casts before accumulating; without it small ints accumulate in 64 bits."""
    src = data.draw(acst.dtypes(xp, ("integral", "bool")), label="dtype")
    dst = data.draw(acst.dtypes(xp, "numeric"), label="accumulate in")
    # Few elements, so that even int8 products of values in [-3, 3] do not overflow.
    host = data.draw(acst.arrays(src, acst.shapes(max_dims=2, max_side=2), "base"), label="x")
    axis = data.draw(acst.axes(host.ndim), label="axis")
    x = xp.asarray(host)
    ref = getattr(np, name)
    assert_close(getattr(xp, name)(x, axis=axis), ref(host, axis=axis))
    if np.can_cast(src, dst):
        assert_close(getattr(xp, name)(x, axis=axis, dtype=dst), ref(host, axis=axis, dtype=dst))


def test_mean_var_of_integers_give_the_default_float(xp: Any) -> None:
    if "float64" not in xp.__array_namespace_info__().dtypes():
        pytest.skip(f"the device of backend {xp.name!r} has no float64 (NumPy's result)")
    host = np.array([[1, 2, 4], [3, 5, 9]], dtype=np.int32)
    for name in ("mean", "var", "std"):
        for axis in (None, 0, 1):
            assert_close(
                getattr(xp, name)(xp.asarray(host), axis=axis), getattr(np, name)(host, axis=axis)
            )


def test_reduction_of_empty_arrays(xp: Any) -> None:
    """Identities over empty axes: 0, 1, True, False; NaN for mean/var/std; errors for max."""
    for dtype in acst.supported_dtypes(xp, "real floating"):
        host = np.zeros((0, 3), dtype=dtype)
        x = xp.asarray(host)
        for name in ("sum", "prod", "mean", "var", "std"):
            for axis in (None, 0, 1, (0, 1), ()):
                expected = _quiet(getattr(np, name), host, axis=axis)
                assert_close(_quiet(getattr(xp, name), x, axis=axis), expected, err_msg=name)
        for name in ("max", "min", "argmax", "argmin"):
            with pytest.raises(ValueError):
                getattr(xp, name)(x)
            with pytest.raises(ValueError):
                getattr(xp, name)(x, axis=0)
            # Over the non-empty axis of an empty array the result is simply empty.
            assert_close(getattr(xp, name)(x, axis=1), getattr(np, name)(host, axis=1))
    flags = xp.asarray(np.zeros((2, 0), dtype=bool))
    assert_close(xp.all(flags, axis=1), np.ones(2, dtype=bool))
    assert_close(xp.any(flags, axis=1), np.zeros(2, dtype=bool))
    assert_close(xp.sum(xp.asarray(np.zeros(0, np.int8))), np.int64(0))


@pytest.mark.parametrize("name", ["argmax", "argmin"])
@SETTINGS
@given(data=st.data())
def test_arg_reduction(xp: Any, name: str, data: st.DataObject) -> None:
    """int64 indices of the first extremum (ties drawn on purpose), axis None or an int."""
    dtype = data.draw(acst.dtypes(xp, "numeric"), label="dtype")
    shape = data.draw(acst.shapes(min_side=1, allow_empty=False), label="shape")
    # Few distinct values, so ties are frequent: the first occurrence must win.
    host = data.draw(acst.arrays(dtype, shape, "base"), label="x")
    axis = data.draw(acst.axes(len(shape), allow_tuple=False), label="axis")
    keepdims = data.draw(st.booleans(), label="keepdims")
    x = acst.on_device(xp, host, data.draw(acst.layouts(), label="layout"))
    result = getattr(xp, name)(x, axis=axis, keepdims=keepdims)
    expected = getattr(np, name)(host, axis=axis, keepdims=keepdims).astype(np.int64)
    assert_close(result, expected, err_msg=f"{name}(axis={axis}, keepdims={keepdims})")


def test_arg_reduction_ties_and_nan(xp: Any) -> None:
    host = np.array([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, 2.0, 2.0], [0.0, 0.0, 5.0, 5.0]])
    for dtype in acst.supported_dtypes(xp, "numeric"):
        h = host.astype(dtype)
        x = xp.asarray(h)
        for axis in (None, 0, 1, -1):
            assert_close(xp.argmax(x, axis=axis), np.argmax(h, axis=axis).astype(np.int64))
            assert_close(xp.argmin(x, axis=axis), np.argmin(h, axis=axis).astype(np.int64))
    # NaN counts as the extremum (first NaN wins), as in NumPy.
    for dtype in acst.supported_dtypes(xp, "real floating"):
        h = np.array([1.0, np.nan, 3.0, np.nan], dtype=dtype)
        assert_close(xp.argmax(xp.asarray(h)), np.int64(1))
        assert_close(xp.argmin(xp.asarray(h)), np.int64(1))
        with np.errstate(invalid="ignore"):
            assert_close(xp.max(xp.asarray(h)), np.max(h))
            assert_close(xp.min(xp.asarray(h)), np.min(h))


@SETTINGS
@given(data=st.data())
def test_cumulative_sum(xp: Any, data: st.DataObject) -> None:
    dtype = data.draw(acst.dtypes(xp), label="dtype")
    shape = data.draw(acst.shapes(min_dims=1), label="shape")
    host = data.draw(acst.arrays(dtype, shape), label="x")
    axis: int | None = data.draw(st.integers(-len(shape), len(shape) - 1), label="axis")
    if len(shape) == 1 and data.draw(st.booleans(), label="axis None"):
        axis = None
    include_initial = data.draw(st.booleans(), label="include_initial")
    x = acst.on_device(xp, host, data.draw(acst.layouts(), label="layout"))
    result = xp.cumulative_sum(x, axis=axis, include_initial=include_initial)
    expected = np.cumulative_sum(host, axis=axis, include_initial=include_initial)
    terms = shape[axis if axis is not None else 0]
    assert_close(result, expected, scale=max(terms, 1))
    if dtype.kind in "biu":
        cast = data.draw(acst.dtypes(xp, "numeric"), label="dtype=")
        if np.can_cast(dtype, cast):
            assert_close(
                xp.cumulative_sum(x, axis=axis, dtype=cast),
                np.cumulative_sum(host, axis=axis, dtype=cast),
                scale=max(terms, 1),
            )


def test_cumulative_sum_fixed(xp: Any) -> None:
    host = np.array([[1, 2, 3], [4, 5, 6]], dtype=np.int32)
    x = xp.asarray(host)
    assert_close(xp.cumulative_sum(x, axis=1), np.array([[1, 3, 6], [4, 9, 15]], np.int64))
    assert_close(
        xp.cumulative_sum(x, axis=0, include_initial=True),
        np.array([[0, 0, 0], [1, 2, 3], [5, 7, 9]], np.int64),
    )
    with pytest.raises(ValueError):
        xp.cumulative_sum(x)  # axis is required for more than one dimension
    empty = xp.asarray(np.zeros(0, dtype=np.float32))
    assert_close(xp.cumulative_sum(empty, include_initial=True), np.zeros(1, np.float32))


def test_reduction_axis_errors(xp: Any) -> None:
    x = xp.asarray(np.ones((2, 3), dtype=np.float32))
    for name in ("sum", "max", "mean", "any"):
        with pytest.raises((ValueError, IndexError)):
            getattr(xp, name)(x, axis=2)
        with pytest.raises((ValueError, IndexError)):
            getattr(xp, name)(x, axis=(0, 0))
    with pytest.raises((ValueError, IndexError)):
        xp.argmax(x, axis=-3)
