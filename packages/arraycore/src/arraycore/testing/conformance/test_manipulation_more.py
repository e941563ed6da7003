"""Conformance of diff, roll, tril, triu, meshgrid, unstack and cumulative_prod against NumPy on
every dtype the device has (float16 included), with empty, 0-d and strided inputs, negative and
tuple axes, and the errors (which name the function and the shapes or axis)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arraycore.testing import assert_close
from arraycore.testing import strategies as acst

from .test_sorting import ALL_DTYPES

SETTINGS = settings(max_examples=30, deadline=None)


def _draw_x(data: st.DataObject, xp: Any, min_dims: int, max_dims: int = 3) -> tuple[Any, Any]:
    dtype = data.draw(acst.dtypes(xp, names=ALL_DTYPES), label="dtype")
    shape = data.draw(acst.shapes(min_dims=min_dims, max_dims=max_dims), label="shape")
    host = data.draw(acst.arrays(dtype, shape), label="x")
    return host, acst.on_device(xp, host, data.draw(acst.layouts(), label="layout"))


@SETTINGS
@given(data=st.data())
def test_diff(xp: Any, data: st.DataObject) -> None:
    host, x = _draw_x(data, xp, 1)
    axis = data.draw(st.integers(-host.ndim, host.ndim - 1), label="axis")
    n = data.draw(st.integers(0, 3), label="n")
    edges: dict[str, Any] = {}
    for name in ("prepend", "append"):
        if data.draw(st.booleans(), label=name):
            shape = list(host.shape)
            shape[axis] = data.draw(st.integers(0, 2), label=f"{name} size")
            edges[name] = data.draw(acst.arrays(host.dtype, tuple(shape)), label=name)
    # the standard: prepend and append are joined first, also for n=0 (NumPy returns x then)
    parts = [edges.get("prepend"), host, edges.get("append")]
    joined = np.concatenate([p for p in parts if p is not None], axis=axis)
    with np.errstate(all="ignore"):  # unsigned differences wrap around, as in NumPy
        want = np.diff(joined, axis=axis, n=n)
    got = xp.diff(x, axis=axis, n=n, **{k: xp.asarray(v) for k, v in edges.items()})
    assert_close(got, want, err_msg=f"axis={axis} n={n} {list(edges)}")


def test_diff_errors(xp: Any) -> None:
    x = xp.asarray(np.arange(6, dtype=np.float32).reshape(2, 3))
    with pytest.raises(ValueError, match=r"diff: .*0-d"):
        xp.diff(xp.asarray(1.0))
    with pytest.raises(ValueError, match="diff: n must be >= 0, got -1"):
        xp.diff(x, n=-1)
    with pytest.raises(ValueError, match="diff: axis 2 is out of range"):
        xp.diff(x, axis=2)
    with pytest.raises(ValueError, match=r"diff: prepend/append of shape \(3, 1\) must match"):
        xp.diff(x, prepend=xp.asarray(np.ones((3, 1), np.float32)))
    with pytest.raises(ValueError, match=r"diff: prepend/append of shape \(2,\) must match"):
        xp.diff(x, append=xp.asarray(np.ones(2, np.float32)))


@SETTINGS
@given(data=st.data())
def test_roll(xp: Any, data: st.DataObject) -> None:
    host, x = _draw_x(data, xp, 0)
    shift: Any = data.draw(st.integers(-9, 9), label="shift")
    axis: Any = None
    if host.ndim and data.draw(st.booleans(), label="along axes"):
        axis = tuple(data.draw(st.lists(st.integers(-host.ndim, host.ndim - 1), max_size=3)))
        if len(axis) == 1 and data.draw(st.booleans()):
            axis = axis[0]
        elif data.draw(st.booleans(), label="a shift per axis"):
            shift = tuple(data.draw(st.integers(-9, 9)) for _ in axis)
    got = xp.roll(x, shift, axis=axis)
    assert_close(got, np.roll(host, shift, axis=axis), err_msg=f"shift={shift} axis={axis}")


def test_roll_always_returns_a_new_array(xp: Any) -> None:
    host = np.arange(6, dtype=np.int32).reshape(2, 3)
    for shift, axis in ((3, 1), (0, 0), (2, 0), (6, None), ((0, 0), (0, 1))):
        x = xp.asarray(host)
        got = xp.roll(x, shift, axis=axis)
        assert_close(got, np.roll(host, shift, axis=axis))
        xp.inplace.fill(-1, out=got)
        assert_close(x, host, err_msg=f"roll({shift}, axis={axis}) returned its input")
    x = xp.asarray(host)
    with pytest.raises(ValueError, match="roll: 2 shifts for 1 axes"):
        xp.roll(x, (1, 2), axis=(0,))
    with pytest.raises(ValueError, match="roll: axis 2 is out of range"):
        xp.roll(x, 1, axis=2)


@SETTINGS
@given(data=st.data())
def test_tril_and_triu(xp: Any, data: st.DataObject) -> None:
    host, x = _draw_x(data, xp, 2, 4)
    k = data.draw(st.integers(-5, 5), label="k")
    assert_close(xp.tril(x, k=k), np.tril(host, k=k), err_msg=f"tril k={k}")
    assert_close(xp.triu(x, k=k), np.triu(host, k=k), err_msg=f"triu k={k}")
    assert_close(xp.tril(x), np.tril(host))  # k=0 by default
    assert_close(xp.triu(x), np.triu(host))


def test_tril_and_triu_errors(xp: Any) -> None:
    for name in ("tril", "triu"):
        for shape in ((), (3,)):
            with pytest.raises(ValueError, match=f"{name}: x must have at least 2 dimensions"):
                getattr(xp, name)(xp.asarray(np.zeros(shape, np.float32)))


@SETTINGS
@given(data=st.data())
def test_meshgrid(xp: Any, data: st.DataObject) -> None:
    dtype = data.draw(acst.dtypes(xp, names=ALL_DTYPES), label="dtype")
    count = data.draw(st.integers(0, 4), label="count")
    hosts = [data.draw(acst.arrays(dtype, (data.draw(st.integers(0, 4)),))) for _ in range(count)]
    indexing: Any = data.draw(st.sampled_from(["xy", "ij"]), label="indexing")
    got = xp.meshgrid(*(acst.on_device(xp, h, data.draw(acst.layouts())) for h in hosts),
                      indexing=indexing)  # fmt: skip
    want = np.meshgrid(*hosts, indexing=indexing)
    assert isinstance(got, list) and len(got) == len(want) == count
    for g, w in zip(got, want):
        assert_close(g, w, err_msg=f"indexing={indexing}")
    if count:
        assert_close(xp.meshgrid(*(xp.asarray(h) for h in hosts))[0], np.meshgrid(*hosts)[0])


def test_meshgrid_errors(xp: Any) -> None:
    a = xp.asarray(np.arange(3, dtype=np.float32))
    with pytest.raises(ValueError, match="meshgrid: indexing must be 'xy' or 'ij'"):
        xp.meshgrid(a, a, indexing="xz")
    with pytest.raises(ValueError, match=r"meshgrid: arrays must be 1-D, got shape \(2, 2\)"):
        xp.meshgrid(a, xp.asarray(np.zeros((2, 2), np.float32)))
    with pytest.raises(TypeError, match="meshgrid: arrays must have one dtype"):
        xp.meshgrid(a, xp.asarray(np.arange(3, dtype=np.int32)))


@SETTINGS
@given(data=st.data())
def test_unstack(xp: Any, data: st.DataObject) -> None:
    host, x = _draw_x(data, xp, 1, 4)
    axis = data.draw(st.integers(-host.ndim, host.ndim - 1), label="axis")
    got = xp.unstack(x, axis=axis)
    assert isinstance(got, tuple) and len(got) == host.shape[axis]
    for i, part in enumerate(got):
        assert_close(part, np.take(host, i, axis=axis), err_msg=f"axis={axis} part {i}")
    if not data.draw(st.booleans()):
        got = xp.unstack(x)  # axis=0 by default
        assert len(got) == host.shape[0]


def test_unstack_errors(xp: Any) -> None:
    with pytest.raises(ValueError, match=r"unstack: .*0-d"):
        xp.unstack(xp.asarray(1.0))
    with pytest.raises(ValueError, match="unstack: axis -3 is out of range"):
        xp.unstack(xp.asarray(np.zeros((2, 2), np.float32)), axis=-3)


@SETTINGS
@given(data=st.data())
def test_cumulative_prod(xp: Any, data: st.DataObject) -> None:
    dtype = data.draw(acst.dtypes(xp, names=ALL_DTYPES), label="dtype")
    shape = data.draw(acst.shapes(min_dims=1, max_dims=3), label="shape")
    host = data.draw(acst.arrays(dtype, shape, "base"), label="x")
    x = acst.on_device(xp, host, data.draw(acst.layouts()))
    axis: int | None = data.draw(st.integers(-len(shape), len(shape) - 1), label="axis")
    if len(shape) == 1 and data.draw(st.booleans()):
        axis = None  # allowed for 1-D input only
    include_initial = data.draw(st.booleans(), label="include_initial")
    # dtype=: none, or one at least as wide as the input's accumulation (no overflow to compare)
    wide = [d for d in acst.supported_dtypes(xp) if d.kind == "f" or d == np.int64]
    requested = data.draw(st.sampled_from([None, *wide]), label="dtype=")
    kwargs = {"axis": axis, "include_initial": include_initial, "dtype": requested}
    want = np.cumulative_prod(host, **kwargs)
    got = xp.cumulative_prod(x, **kwargs)
    assert_close(got, want, scale=4, err_msg=str(kwargs))  # 4: another order of the products


def test_cumulative_prod_errors(xp: Any) -> None:
    # (the NumPy backend binds numpy.cumulative_prod, which words it its own way)
    with pytest.raises(ValueError, match="axis 2 is out of"):
        xp.cumulative_prod(xp.asarray(np.ones((2, 2), np.float32)), axis=2)
