"""Conformance of the manipulation functions: reshape, permute_dims, expand_dims, squeeze,
broadcast_to, broadcast_arrays, concat, stack, flip, tile, repeat and moveaxis, on every dtype and
layout, with empty and size-1 axes, negative axes and the errors the standard asks for.

Layout functions are exact: results must equal NumPy's element for element.
``reshape(copy=False)`` is not compared (arraycore's generic path refuses it, since it cannot
promise a view on every backend).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arraycore.testing import assert_close, to_host
from arraycore.testing import strategies as acst

SETTINGS = settings(max_examples=15, deadline=None)


def _draw_array(xp: Any, data: st.DataObject, **shape_kwargs: Any) -> tuple[np.ndarray, Any]:
    dtype = data.draw(acst.dtypes(xp), label="dtype")
    host = data.draw(acst.arrays(dtype, acst.shapes(**shape_kwargs)), label="x")
    return host, acst.on_device(xp, host, data.draw(acst.layouts(), label="layout"))


@st.composite
def _reshape_target(draw: st.DrawFn, shape: tuple[int, ...]) -> tuple[int, ...]:
    """Another shape of the same size, possibly with one -1."""
    size = math.prod(shape)
    if size == 0:
        new = list(draw(st.permutations(shape)))
        if draw(st.booleans()):
            new.append(1)
    else:
        new = []
        rest = size
        for factor in range(2, rest + 1):
            while rest % factor == 0:
                new.append(factor)
                rest //= factor
        new = list(draw(st.permutations(new)))
        # Merge neighbours at random and sprinkle size-1 axes.
        merged: list[int] = []
        for f in new:
            if merged and draw(st.booleans()):  # type: ignore[arg-type]
                merged[-1] *= f
            else:
                merged.append(f)
        new = merged + [1] * draw(st.integers(0, 1))
        if new and draw(st.booleans()):  # type: ignore[arg-type]
            new[draw(st.integers(0, len(new) - 1))] = -1
    return tuple(new)


@SETTINGS
@given(data=st.data())
def test_reshape(xp: Any, data: st.DataObject) -> None:
    host, x = _draw_array(xp, data)
    target = data.draw(_reshape_target(host.shape), label="shape")
    assert_close(xp.reshape(x, target), np.reshape(host, target))
    copied = xp.reshape(x, target, copy=True)
    assert_close(copied, np.reshape(host, target))
    if host.size:  # a writable copy that does not share memory with x
        first = host.reshape(-1)[0]
        copied[(0,) * len(copied.shape)] = not first if host.dtype == np.bool_ else first + 1
    assert_close(x, host, err_msg="reshape(copy=True) shares memory with its input")


def test_reshape_int_shape_and_errors(xp: Any) -> None:
    host = np.arange(6, dtype=np.int32).reshape(2, 3)
    x = xp.asarray(host)
    assert_close(xp.reshape(x, 6), host.reshape(6))
    assert_close(xp.reshape(x, (-1,)), host.reshape(-1))
    assert_close(xp.reshape(x, (3, -1)), host.reshape(3, -1))
    for bad in ((4, 2), (-1, -1), (4, -1)):
        with pytest.raises(ValueError):
            xp.reshape(x, bad)


@SETTINGS
@given(data=st.data())
def test_permute_dims(xp: Any, data: st.DataObject) -> None:
    host, x = _draw_array(xp, data)
    perm = data.draw(st.permutations(range(host.ndim)), label="axes")
    assert_close(xp.permute_dims(x, tuple(perm)), np.permute_dims(host, tuple(perm)))


def test_permute_dims_errors(xp: Any) -> None:
    x = xp.asarray(np.zeros((2, 3, 4), np.float32))
    for bad in ((0, 1), (0, 1, 1), (0, 1, 3)):
        with pytest.raises((ValueError, IndexError)):
            xp.permute_dims(x, bad)


@SETTINGS
@given(data=st.data())
def test_expand_dims(xp: Any, data: st.DataObject) -> None:
    host, x = _draw_array(xp, data, max_dims=3)
    axis = data.draw(st.integers(-host.ndim - 1, host.ndim), label="axis")
    assert_close(xp.expand_dims(x, axis=axis), np.expand_dims(host, axis))


def test_expand_dims_out_of_range(xp: Any) -> None:
    """An invalid position is the standard's IndexError (NumPy's AxisError is one too)."""
    x = xp.asarray(np.zeros((2, 3), np.float32))
    for axis in (3, -4):
        with pytest.raises(IndexError):
            xp.expand_dims(x, axis=axis)


@SETTINGS
@given(data=st.data())
def test_squeeze(xp: Any, data: st.DataObject) -> None:
    host, x = _draw_array(xp, data)
    ones = [i for i, s in enumerate(host.shape) if s == 1]
    picked = data.draw(st.lists(st.sampled_from(ones), unique=True) if ones else st.just([]))
    axis: Any = tuple(a - host.ndim if data.draw(st.booleans()) else a for a in picked)
    if len(axis) == 1 and data.draw(st.booleans(), label="axis as int"):
        axis = axis[0]
    assert_close(xp.squeeze(x, axis=axis), np.squeeze(host, axis=axis))


def test_squeeze_errors(xp: Any) -> None:
    x = xp.asarray(np.zeros((1, 3, 1), np.float32))
    with pytest.raises(ValueError):
        xp.squeeze(x, axis=1)  # size 3
    with pytest.raises(ValueError):
        xp.squeeze(x, axis=(0, 1))
    with pytest.raises((ValueError, IndexError)):
        xp.squeeze(x, axis=3)


# -- broadcasting ----------------------------------------------------------------------------------
@SETTINGS
@given(data=st.data())
def test_broadcast_to(xp: Any, data: st.DataObject) -> None:
    dtype = data.draw(acst.dtypes(xp), label="dtype")
    (shape,), target = data.draw(acst.broadcastable_shapes(1), label="shapes")
    # Prepend axes and widen size-1 axes of the input to get a strictly bigger target.
    extra = data.draw(acst.shapes(max_dims=2), label="new leading axes")
    target = (*extra, *(data.draw(st.integers(1, 3)) if s == 1 else s for s in target))
    host = data.draw(acst.arrays(dtype, shape), label="x")
    x = acst.on_device(xp, host, data.draw(acst.layouts(), label="layout"))
    assert_close(xp.broadcast_to(x, target), np.broadcast_to(host, target))


@SETTINGS
@given(data=st.data())
def test_broadcast_arrays(xp: Any, data: st.DataObject) -> None:
    n = data.draw(st.integers(1, 3), label="how many")
    shapes, _ = data.draw(acst.broadcastable_shapes(n), label="shapes")
    hosts = [
        data.draw(acst.arrays(data.draw(acst.dtypes(xp)), s), label=f"x{i}")
        for i, s in enumerate(shapes)
    ]
    arrays = [acst.on_device(xp, h, data.draw(acst.layouts())) for h in hosts]
    results = xp.broadcast_arrays(*arrays)
    expected = np.broadcast_arrays(*hosts)
    assert len(results) == len(expected)
    for got, want in zip(results, expected, strict=True):
        assert_close(got, want)


def test_broadcast_errors(xp: Any) -> None:
    x = xp.asarray(np.zeros((2, 3), np.float32))
    for bad in ((3,), (2, 4), (4, 3, 3)):
        with pytest.raises(ValueError):
            xp.broadcast_to(x, bad)
    with pytest.raises(ValueError):
        xp.broadcast_arrays(x, xp.asarray(np.zeros((3, 2), np.float32)))


# -- joining ---------------------------------------------------------------------------------------
@SETTINGS
@given(data=st.data())
def test_concat(xp: Any, data: st.DataObject) -> None:
    shape = data.draw(acst.shapes(min_dims=1), label="shape")
    axis = data.draw(st.integers(-len(shape), len(shape) - 1), label="axis")
    use_none = data.draw(st.booleans(), label="axis=None")
    n = data.draw(st.integers(1, 3), label="how many")
    hosts = []
    dtypes = []
    for i in range(n):
        along = list(shape)
        along[axis] = data.draw(st.integers(0, 3), label=f"size {i}")
        if use_none:  # flattened first: any shapes
            along = list(data.draw(acst.shapes(), label=f"shape {i}"))
        dtype = data.draw(acst.dtypes(xp), label=f"dtype {i}")
        dtypes.append(dtype)
        hosts.append(data.draw(acst.arrays(dtype, tuple(along)), label=f"x{i}"))
    if np.result_type(*dtypes).name not in xp.__array_namespace_info__().dtypes():
        return
    arrays = [acst.on_device(xp, h, data.draw(acst.layouts())) for h in hosts]
    if use_none:
        assert_close(xp.concat(arrays, axis=None), np.concat(hosts, axis=None))
    else:
        assert_close(xp.concat(arrays, axis=axis), np.concat(hosts, axis=axis))
        assert_close(xp.concat(tuple(arrays), axis=axis), np.concat(hosts, axis=axis))


def test_concat_default_axis_mixed_dtypes_and_errors(xp: Any) -> None:
    a = np.arange(6, dtype=np.int8).reshape(2, 3)
    b = np.ones((1, 3), dtype=np.float32)
    assert_close(xp.concat([xp.asarray(a), xp.asarray(b)]), np.concat([a, b]))
    assert_close(xp.concat([xp.asarray(a), xp.asarray(a)], axis=-1), np.concat([a, a], axis=-1))
    with pytest.raises(ValueError):
        xp.concat([xp.asarray(a), xp.asarray(np.ones((2, 2), np.int8))])
    with pytest.raises(ValueError):
        xp.concat([xp.asarray(np.int8(1)), xp.asarray(np.int8(2))])  # 0-d arrays


@SETTINGS
@given(data=st.data())
def test_stack(xp: Any, data: st.DataObject) -> None:
    shape = data.draw(acst.shapes(max_dims=3), label="shape")
    n = data.draw(st.integers(1, 3), label="how many")
    dtype = data.draw(acst.dtypes(xp), label="dtype")
    hosts = [data.draw(acst.arrays(dtype, shape), label=f"x{i}") for i in range(n)]
    axis = data.draw(st.integers(-len(shape) - 1, len(shape)), label="axis")
    arrays = [acst.on_device(xp, h, data.draw(acst.layouts())) for h in hosts]
    assert_close(xp.stack(arrays, axis=axis), np.stack(hosts, axis=axis))


def test_stack_errors(xp: Any) -> None:
    with pytest.raises(ValueError):
        xp.stack([xp.asarray(np.zeros(2, np.float32)), xp.asarray(np.zeros(3, np.float32))])


# -- reordering and repeating -----------------------------------------------------------------------
@SETTINGS
@given(data=st.data())
def test_flip(xp: Any, data: st.DataObject) -> None:
    host, x = _draw_array(xp, data)
    axis = data.draw(acst.axes(host.ndim), label="axis")
    assert_close(xp.flip(x, axis=axis), np.flip(host, axis=axis))


@SETTINGS
@given(data=st.data())
def test_tile(xp: Any, data: st.DataObject) -> None:
    host, x = _draw_array(xp, data, max_dims=3, max_side=3)
    reps = data.draw(st.lists(st.integers(0, 3), max_size=4), label="repetitions")
    assert_close(xp.tile(x, tuple(reps)), np.tile(host, tuple(reps)))


@SETTINGS
@given(data=st.data())
def test_repeat(xp: Any, data: st.DataObject) -> None:
    host, x = _draw_array(xp, data, max_dims=3)
    axis: int | None = None
    if host.ndim and data.draw(st.booleans(), label="with axis"):
        axis = data.draw(st.integers(-host.ndim, host.ndim - 1), label="axis")
    length = host.size if axis is None else host.shape[axis]
    if data.draw(st.booleans(), label="array repeats"):
        counts = np.asarray(
            data.draw(st.lists(st.integers(0, 3), min_size=length, max_size=length)),
            dtype=np.int64,
        )
        result = xp.repeat(x, xp.asarray(counts), axis=axis)
        assert_close(result, np.repeat(host, counts, axis=axis))
    else:
        count = data.draw(st.integers(0, 3), label="repeats")
        assert_close(xp.repeat(x, count, axis=axis), np.repeat(host, count, axis=axis))


def test_repeat_errors(xp: Any) -> None:
    x = xp.asarray(np.arange(3))
    with pytest.raises(ValueError):
        xp.repeat(x, -1)
    with pytest.raises(ValueError):
        xp.repeat(x, xp.asarray(np.array([1, 2])))


@SETTINGS
@given(data=st.data())
def test_moveaxis(xp: Any, data: st.DataObject) -> None:
    host, x = _draw_array(xp, data, min_dims=1)
    n = host.ndim
    count = data.draw(st.integers(1, n), label="how many axes")
    source = data.draw(st.permutations(range(n)), label="source")[:count]
    destination = data.draw(st.permutations(range(n)), label="destination")[:count]
    source = [s - n if data.draw(st.booleans()) else s for s in source]
    if count == 1 and data.draw(st.booleans(), label="ints"):
        src: Any = source[0]
        dst: Any = destination[0]
    else:
        src, dst = tuple(source), tuple(destination)
    assert_close(xp.moveaxis(x, src, dst), np.moveaxis(host, src, dst))
    assert_close(to_host(x), host)
