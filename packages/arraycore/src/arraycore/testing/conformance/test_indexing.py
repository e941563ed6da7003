"""Conformance of indexing: take (negative indices, every integer index dtype), take_along_axis,
and basic indexing through the array objects, ``x[key]`` and ``x[key] = value``, with ints
(negative too), slices with any step (negative too), ``None`` and ``Ellipsis``, on contiguous
and non-contiguous arrays.

Integer-array indexing and boolean masks are in ``test_advanced_indexing.py``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from arraycore.testing import assert_close, to_host
from arraycore.testing import strategies as acst

SETTINGS = settings(max_examples=25, deadline=None)


def _indices(draw: Any, size: int, count_max: int = 5) -> list[int]:
    if size == 0:
        return []
    picked: list[int] = draw(st.lists(st.integers(-size, size - 1), max_size=count_max))
    return picked


@SETTINGS
@given(data=st.data())
def test_take(xp: Any, data: st.DataObject) -> None:
    dtype = data.draw(acst.dtypes(xp), label="dtype")
    host = data.draw(acst.arrays(dtype, acst.shapes(min_dims=1)), label="x")
    x = acst.on_device(xp, host, data.draw(acst.layouts(), label="layout"))
    axis = data.draw(st.integers(-host.ndim, host.ndim - 1), label="axis")
    picked = _indices(data.draw, host.shape[axis])
    index_dtype = data.draw(acst.dtypes(xp, "signed integer"), label="index dtype")
    indices = np.asarray(picked, dtype=index_dtype)
    expected = np.take(host, indices, axis=axis)
    assert_close(xp.take(x, xp.asarray(indices), axis=axis), expected)
    if host.ndim == 1:
        assert_close(xp.take(x, xp.asarray(indices)), expected, err_msg="axis omitted for 1-D")


def test_take_unsigned_indices(xp: Any) -> None:
    host = np.arange(12, dtype=np.float32).reshape(3, 4)
    indices = np.array([3, 0, 0, 2], dtype=np.uint8)
    assert_close(xp.take(xp.asarray(host), xp.asarray(indices), axis=1), host[:, indices])


@SETTINGS
@given(data=st.data())
def test_take_along_axis(xp: Any, data: st.DataObject) -> None:
    dtype = data.draw(acst.dtypes(xp), label="dtype")
    host = data.draw(acst.arrays(dtype, acst.shapes(min_dims=1)), label="x")
    axis = data.draw(st.integers(-host.ndim, host.ndim - 1), label="axis")
    size = host.shape[axis]
    # indices: same rank; size 1 or x's size on the other axes (broadcast); any length on axis.
    shape = [1 if data.draw(st.booleans()) else s for s in host.shape]
    shape[axis] = data.draw(st.integers(0, 4)) if size else 0
    indices = data.draw(
        hnp.arrays(np.int64, tuple(shape), elements=st.integers(-size, max(size - 1, 0))),
        label="indices",
    )
    x = acst.on_device(xp, host, data.draw(acst.layouts(), label="layout"))
    result = xp.take_along_axis(x, xp.asarray(indices), axis=axis)
    assert_close(result, np.take_along_axis(host, indices, axis=axis))


def test_take_along_axis_argsort_pattern(xp: Any) -> None:
    """The standard use: picking with arg-reduction indices kept with keepdims."""
    host = np.array([[3.0, 1.0, 2.0], [0.5, 4.0, -1.0]], dtype=np.float32)
    x = xp.asarray(host)
    index = xp.argmax(x, axis=1, keepdims=True)
    assert_close(xp.take_along_axis(x, index, axis=1), np.max(host, axis=1, keepdims=True))
    assert_close(xp.take_along_axis(x, index, axis=-1), np.max(host, axis=1, keepdims=True))


# -- basic indexing ----------------------------------------------------------------------------------
@SETTINGS
@given(data=st.data())
def test_getitem(xp: Any, data: st.DataObject) -> None:
    dtype = data.draw(acst.dtypes(xp), label="dtype")
    host = data.draw(acst.arrays(dtype, acst.shapes()), label="x")
    x = acst.on_device(xp, host, data.draw(acst.layouts(), label="layout"))
    key = data.draw(hnp.basic_indices(host.shape, allow_newaxis=True), label="key")
    assert_close(x[key], host[key], err_msg=f"x[{key!r}]")


@SETTINGS
@given(data=st.data())
def test_setitem(xp: Any, data: st.DataObject) -> None:
    dtype = data.draw(acst.dtypes(xp), label="dtype")
    host = data.draw(acst.arrays(dtype, acst.shapes()), label="x")
    x = acst.on_device(xp, host, data.draw(acst.layouts(), label="layout"))
    key = data.draw(hnp.basic_indices(host.shape, allow_newaxis=True), label="key")
    target_shape = host[key].shape
    kind = data.draw(st.sampled_from(["scalar", "array", "broadcast"]), label="value kind")
    if kind == "scalar":
        value: Any = data.draw(acst.scalars(dtype), label="value")
        device_value: Any = value
    else:
        shape = target_shape
        if kind == "broadcast":  # a trailing part of the target's shape, some axes size 1
            shape = tuple(
                1 if data.draw(st.booleans()) else s
                for s in target_shape[data.draw(st.integers(0, len(target_shape))) :]
            )
        value = data.draw(acst.arrays(dtype, shape), label="value")
        device_value = acst.on_device(xp, value, data.draw(acst.layouts(), label="value layout"))
    expected = host.copy()
    expected[key] = value
    x[key] = device_value
    assert_close(x, expected, err_msg=f"x[{key!r}] = {kind}")


def test_getitem_fixed_keys(xp: Any) -> None:
    host = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    x = xp.asarray(host)
    keys: list[Any] = [
        0,
        -1,
        (1, 2),
        (-1, -1, -1),
        slice(None, None, -1),
        (Ellipsis, 1),
        (None, 0, Ellipsis, None),
        (slice(None), slice(None, None, 2), slice(3, 0, -2)),
        (1, None, slice(1, None)),
        Ellipsis,
        (),
        (slice(5, 9),),  # out-of-range slices are empty, not errors
        (0, slice(2, 1)),
    ]
    for key in keys:
        assert_close(x[key], host[key], err_msg=f"x[{key!r}]")
    scalar = x[1, 2, 3]
    assert tuple(scalar.shape) == () and int(scalar) == 23


def test_getitem_out_of_bounds(xp: Any) -> None:
    x = xp.asarray(np.zeros((2, 3), np.float32))
    for key in ((2,), (0, 3), (-3,), (0, 0, 0)):
        with pytest.raises(IndexError):
            x[key]


def test_setitem_through_views_and_errors(xp: Any) -> None:
    host = np.zeros((3, 4), dtype=np.float32)
    x = xp.asarray(host)
    x[1] = 5.0
    x[:, ::-2] = xp.asarray(np.array([1.0, 2.0], dtype=np.float32))
    x[..., 0] = -1
    host[1] = 5.0
    host[:, ::-2] = np.array([1.0, 2.0], dtype=np.float32)
    host[..., 0] = -1
    assert_close(x, host)
    with pytest.raises(IndexError):
        x[3, 0] = 1.0
    with pytest.raises(ValueError):
        x[0] = xp.asarray(np.ones(3, dtype=np.float32))  # (3,) does not broadcast to (4,)


def test_what_is_not_an_index_is_an_index_error(xp: Any) -> None:
    """Floats, float arrays and two ellipses are not indices (index arrays and masks are: see
    test_advanced_indexing)."""
    x = xp.asarray(np.arange(6, dtype=np.float32))
    for key in (1.0, xp.asarray(np.array([0.0, 1.0], np.float32)), (0, ..., ...), "a"):
        with pytest.raises(IndexError):
            xp.getitem(x, key)
    assert_close(to_host(x), np.arange(6, dtype=np.float32))
