"""Conformance of the creation functions: asarray (lists, scalars, NumPy arrays, backend arrays,
``dtype=`` and ``copy=``), empty/zeros/ones/full (with dtype inference), arange, linspace, eye and
the ``*_like`` functions.

Dtype inference follows the standard: Python ``bool`` gives ``bool``, ``int`` the default integer
(``int64``) and ``float`` the default real floating dtype, which is ``float64`` where the device
has it and ``float32`` elsewhere (``xp.__array_namespace_info__().default_dtypes()``). NumPy
arrays keep their dtype. Contents of ``empty`` are unspecified, so only its shape and dtype are
checked.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arraycore.testing import assert_close, to_host
from arraycore.testing import strategies as acst

SETTINGS = settings(max_examples=15, deadline=None)


def _default_float(xp: Any) -> np.dtype:
    dtype: np.dtype = np.dtype(xp.__array_namespace_info__().default_dtypes()["real floating"])
    return dtype


def _expected(xp: Any, obj: Any) -> np.ndarray:
    """``numpy.asarray(obj)`` with Python floats in the default float of the device."""
    host = np.asarray(obj)
    return host.astype(_default_float(xp)) if host.dtype.kind == "f" else host


PYTHON_OBJECTS = [
    True,
    0,
    -7,
    2.5,
    [],
    [1, 2, 3],
    [True, False],
    [1.5, -2.0],
    [1, 2.5],  # mixed int and float: float
    [[1, 2], [3, 4], [5, 6]],
    [[[0.5]], [[1.5]]],
    [[], []],
]


@pytest.mark.parametrize("obj", PYTHON_OBJECTS, ids=repr)
def test_asarray_python_objects(xp: Any, obj: Any) -> None:
    assert_close(xp.asarray(obj), _expected(xp, obj))


def test_asarray_infers_the_default_dtypes(xp: Any) -> None:
    defaults = xp.__array_namespace_info__().default_dtypes()
    assert xp.asarray(3).dtype == defaults["integral"] == np.int64
    assert xp.asarray(3.0).dtype == defaults["real floating"]
    assert xp.asarray(True).dtype == np.bool_
    assert xp.asarray(3).shape == ()


@SETTINGS
@given(data=st.data())
def test_asarray_numpy_arrays_keep_dtype(xp: Any, data: st.DataObject) -> None:
    """NumPy input of any layout (views, transposes, negative strides) keeps dtype and values."""
    dtype = data.draw(acst.dtypes(xp), label="dtype")
    host = data.draw(acst.arrays(dtype, acst.shapes()), label="x")
    view = data.draw(
        st.sampled_from(["plain", "reversed", "transposed", "fortran"]), label="host layout"
    )
    if view == "reversed":
        host = host[(slice(None, None, -1),) * host.ndim]
    elif view == "transposed":
        host = host.T
    elif view == "fortran":
        host = np.asfortranarray(host)
    assert_close(xp.asarray(host), host)
    assert_close(xp.from_numpy(host), host)
    other = data.draw(acst.dtypes(xp), label="dtype=")
    if dtype.kind != "f" or other.kind == "f":  # float to int/bool casts are not compared
        assert_close(xp.asarray(host, dtype=other), host.astype(other))


def test_asarray_numpy_scalars(xp: Any) -> None:
    for value in (np.float32(1.5), np.int8(-3), np.bool_(True), np.uint8(200)):
        assert_close(xp.asarray(value), np.asarray(value))


def test_negative_zero_keeps_its_sign(xp: Any) -> None:
    """-0.0 reaches the device as -0.0 however it is given: a 0-d or 1-d NumPy array, a NumPy
    or Python scalar, a fill value (CuPy 14 fills new 0-d arrays, and zeros, with a memset)."""
    for dtype in acst.supported_dtypes(xp, "real floating"):
        zero = np.array(-0.0, dtype)
        made = {
            "asarray(0-d)": xp.asarray(zero),
            "asarray(1-d)": xp.asarray(zero.reshape(1)),
            "asarray(numpy scalar)": xp.asarray(zero[()]),
            "asarray(float)": xp.asarray(-0.0, dtype=dtype),
            "full(())": xp.full((), -0.0, dtype=dtype),
            "full((3,))": xp.full((3,), -0.0, dtype=dtype),
            "copysign(1, -0.0)": xp.copysign(xp.ones((), dtype=dtype), xp.asarray(zero)),
        }
        for how, x in made.items():
            assert np.all(np.signbit(to_host(x))), f"{how} of -0.0 ({dtype}) lost its sign"


def test_asarray_list_with_dtype(xp: Any) -> None:
    for dtype in acst.supported_dtypes(xp):
        assert_close(xp.asarray([[1, 0], [0, 1]], dtype=dtype), np.eye(2, dtype=dtype))


def test_asarray_of_a_backend_array_and_copy(xp: Any) -> None:
    host = np.arange(6, dtype=np.float32).reshape(2, 3)
    x = xp.asarray(host)
    same = xp.asarray(x)
    assert_close(same, host)
    copied = xp.asarray(x, copy=True)
    copied[0, 0] = 100.0
    assert_close(x, host, err_msg="asarray(copy=True) shares memory")
    shared = xp.asarray(x, copy=False)
    shared[0, 0] = 50.0
    assert float(to_host(x)[0, 0]) == 50.0, "asarray(copy=False) made a copy"
    converted = xp.asarray(x, dtype=xp.int32)
    assert_close(converted, np.asarray(to_host(x)).astype(np.int32))
    with pytest.raises(ValueError):
        xp.asarray(x, dtype=xp.int32, copy=False)


def test_asarray_rejects_unsupported_dtypes(xp: Any) -> None:
    with pytest.raises(TypeError):
        xp.asarray([1 + 2j])
    with pytest.raises(TypeError):
        xp.asarray(np.array(["a", "b"]))


# -- empty, zeros, ones, full ----------------------------------------------------------------------
@pytest.mark.parametrize("name", ["empty", "zeros", "ones"])
@SETTINGS
@given(data=st.data())
def test_empty_zeros_ones(xp: Any, name: str, data: st.DataObject) -> None:
    shape = data.draw(acst.shapes(), label="shape")
    dtype = data.draw(st.one_of(st.none(), acst.dtypes(xp)), label="dtype")
    as_int = len(shape) == 1 and data.draw(st.booleans(), label="shape as int")
    arg = shape[0] if as_int else shape
    result = getattr(xp, name)(arg, dtype=dtype)
    want_dtype = _default_float(xp) if dtype is None else dtype
    if name == "empty":
        assert tuple(result.shape) == shape and result.dtype == want_dtype
    else:
        assert_close(result, getattr(np, name)(shape, dtype=want_dtype))


@SETTINGS
@given(data=st.data())
def test_full(xp: Any, data: st.DataObject) -> None:
    shape = data.draw(acst.shapes(), label="shape")
    dtype = data.draw(acst.dtypes(xp), label="dtype")
    value = data.draw(acst.scalars(dtype), label="fill_value")
    assert_close(xp.full(shape, value, dtype=dtype), np.full(shape, value, dtype=dtype))
    # Without dtype, the fill value decides: bool, int64, or the default float.
    expected = np.full(shape, value)
    if expected.dtype.kind == "f":
        expected = expected.astype(_default_float(xp))
    assert_close(xp.full(shape, value), expected)


def test_full_dtype_inference(xp: Any) -> None:
    assert xp.full((2,), True).dtype == np.bool_
    assert xp.full((2,), 3).dtype == np.int64
    assert xp.full((2,), 3.0).dtype == _default_float(xp)
    assert_close(xp.full(3, -1.5, dtype=xp.float32), np.full(3, -1.5, np.float32))


def test_negative_shapes_raise(xp: Any) -> None:
    for name in ("zeros", "ones", "empty"):
        with pytest.raises(ValueError):
            getattr(xp, name)((2, -1))
    with pytest.raises(ValueError):
        xp.full((-3,), 1.0)


# -- *_like ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["empty_like", "zeros_like", "ones_like", "full_like"])
@SETTINGS
@given(data=st.data())
def test_like(xp: Any, name: str, data: st.DataObject) -> None:
    dtype = data.draw(acst.dtypes(xp), label="dtype of x")
    host = data.draw(acst.arrays(dtype, acst.shapes()), label="x")
    x = acst.on_device(xp, host, data.draw(acst.layouts(), label="layout"))
    new_dtype = data.draw(st.one_of(st.none(), acst.dtypes(xp)), label="dtype")
    want = dtype if new_dtype is None else new_dtype
    args: tuple[Any, ...] = ()
    if name == "full_like":
        args = (data.draw(acst.scalars(want), label="fill_value"),)
    result = getattr(xp, name)(x, *args, dtype=new_dtype)
    if name == "empty_like":
        assert tuple(result.shape) == host.shape and result.dtype == want
    else:
        assert_close(result, getattr(np, name)(host, *args, dtype=want))
    assert_close(x, host, err_msg=f"{name} changed its input")


# -- arange, linspace, eye -------------------------------------------------------------------------
ARANGE_CASES = [
    (5,),
    (0,),
    (-3,),
    (2, 9),
    (9, 2),
    (2, 9, 3),
    (9, 2, -2),
    (-5, 5, 4),
    (0.0, 1.0, 0.25),
    (1.5, -2.0, -0.5),
    (0, 1, 0.1),
    (3.0,),
]


@pytest.mark.parametrize("args", ARANGE_CASES, ids=repr)
def test_arange(xp: Any, args: tuple[Any, ...]) -> None:
    expected = np.arange(*args)
    if expected.dtype.kind == "f":
        expected = expected.astype(_default_float(xp))
    assert_close(xp.arange(*args), expected)
    for dtype in acst.supported_dtypes(xp, "numeric"):
        if dtype.kind == "u" and min(np.arange(*args, dtype=np.float64), default=0) < 0:
            continue
        if all(float(a).is_integer() for a in args) or dtype.kind == "f":
            ref = np.arange(*args, dtype=np.float64).astype(dtype)
            assert_close(xp.arange(*args, dtype=dtype), ref, err_msg=str(dtype))


def test_arange_keywords_and_errors(xp: Any) -> None:
    assert_close(xp.arange(1, stop=7, step=2), np.arange(1, 7, 2))
    with pytest.raises((ValueError, ZeroDivisionError)):  # NumPy: ZeroDivisionError
        xp.arange(0, 5, 0)


@SETTINGS
@given(
    start=st.floats(-10, 10),
    stop=st.floats(-10, 10),
    num=st.integers(0, 12),
    endpoint=st.booleans(),
)
def test_linspace(xp: Any, start: float, stop: float, num: int, endpoint: bool) -> None:
    expected = np.linspace(start, stop, num, endpoint=endpoint)
    assert_close(
        xp.linspace(start, stop, num, endpoint=endpoint), expected.astype(_default_float(xp))
    )
    for dtype in acst.supported_dtypes(xp, "real floating"):
        assert_close(
            xp.linspace(start, stop, num, dtype=dtype, endpoint=endpoint),
            np.linspace(start, stop, num, endpoint=endpoint).astype(dtype),
            err_msg=str(dtype),
        )


@SETTINGS
@given(n_rows=st.integers(0, 5), n_cols=st.none() | st.integers(0, 5), k=st.integers(-6, 6))
def test_eye(xp: Any, n_rows: int, n_cols: int | None, k: int) -> None:
    assert_close(xp.eye(n_rows, n_cols, k=k), np.eye(n_rows, n_cols, k=k, dtype=_default_float(xp)))
    for dtype in acst.supported_dtypes(xp):
        assert_close(
            xp.eye(n_rows, n_cols, k=k, dtype=dtype), np.eye(n_rows, n_cols, k=k, dtype=dtype)
        )
