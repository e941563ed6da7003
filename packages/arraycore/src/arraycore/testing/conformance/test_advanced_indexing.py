"""Conformance of advanced indexing: integer arrays and boolean masks in ``x[key]`` and
``x[key] = value``, against NumPy's answers (the standard's rules, and NumPy's where the standard
leaves slices beside index arrays to the implementation)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arraycore import ArrayBase
from arraycore.testing import assert_close
from arraycore.testing import strategies as acst

SETTINGS = settings(max_examples=25, deadline=None)
HOST = np.arange(60).reshape(3, 4, 5)
I = np.asarray  # reads as an index array in the keys below

# keys over an array of shape (3, 4, 5), with NumPy arrays standing for device index arrays
KEYS: list[tuple[Any, ...]] = [
    (I([0, 2]),),
    (I([2, 0, 2]),),  # repeated indices repeat the elements
    (I([-1, 0]),),  # negative indices count from the end
    (I([0, 2]), I([1, 3])),  # zipped coordinates
    (I([[0], [2]]), I([1, 2, 3])),  # index arrays broadcast together
    (slice(None), I([[0, 1], [3, 2]])),  # the gathered axes stand where the array stood
    (I([0, 2]), slice(1, 3), I([1, 4])),  # arrays apart: the gathered axes come first
    (1, I([0, 3])),  # an int beside an array is a 0-d index array
    (I([-1, 0]), ..., I([2])),
    (..., I([4, 0])),
    (None, I([1]), slice(None)),
    (I(2),),  # a 0-d index array is an int
    (HOST[:, :, 0] > 20,),  # a mask over the leading axes
    (HOST > 30,),  # a mask over every axis
    (HOST > 1000,),  # a mask with no True
    (slice(None), HOST[0] > 5),  # a mask after a slice
    (HOST[:, 0, 0] > 0, 2),  # a mask beside an int
]


def _device_key(xp: Any, key: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(xp.asarray(k) if isinstance(k, np.ndarray) else k for k in key)


@pytest.mark.parametrize("key", KEYS, ids=[str(i) for i in range(len(KEYS))])
def test_getitem_with_index_arrays_and_masks(xp: Any, key: tuple[Any, ...]) -> None:
    for dtype in acst.supported_dtypes(xp, ("integral", "real floating", "bool")):
        host = HOST.astype(dtype) if dtype != np.bool_ else HOST % 3 == 0
        x = xp.asarray(host)
        want = host[key]
        assert_close(xp.getitem(x, _device_key(xp, key)), want, err_msg=f"{key} {dtype}")
        got = x[_device_key(xp, key)]
        assert tuple(got.shape) == want.shape and got.dtype == want.dtype


@pytest.mark.parametrize("index_dtype", ["int8", "int16", "int32", "int64", "uint8", "uint64"])
def test_index_arrays_of_every_integer_dtype(xp: Any, index_dtype: str) -> None:
    x = xp.asarray(HOST)
    idx = np.array([2, 0, 1], dtype=index_dtype)
    assert_close(x[xp.asarray(idx)], HOST[idx])
    assert_close(x[:, xp.asarray(idx)], HOST[:, idx])


def test_python_lists_and_bools_as_indices(xp: Any) -> None:
    x = xp.asarray(HOST)
    assert_close(x[[0, 2]], HOST[[0, 2]])
    assert_close(x[[True, False, True]], HOST[[True, False, True]])
    assert tuple(x[True].shape) == (1, 3, 4, 5)
    assert tuple(x[False].shape) == (0, 3, 4, 5)
    mask = xp.asarray(np.array(True))
    assert_close(x[mask], HOST[np.array(True)])


@SETTINGS
@given(data=st.data())
def test_random_gathers_match_numpy(xp: Any, data: st.DataObject) -> None:
    shape = data.draw(acst.shapes(min_dims=1), label="shape")
    dtype = data.draw(acst.dtypes(xp), label="dtype")
    host = data.draw(acst.arrays(dtype, shape), label="x")
    axis = data.draw(st.integers(0, len(shape) - 1), label="axis")
    if data.draw(st.booleans(), label="mask"):
        mask = data.draw(acst.arrays(np.dtype("bool"), shape[: axis + 1]), label="mask")
        key: tuple[Any, ...] = (mask,)
    else:
        size = shape[axis]
        if size == 0:
            return
        idx = data.draw(acst.arrays(np.dtype("int64"), acst.shapes(max_dims=2), "any"), label="idx")
        key = (*([slice(None)] * axis), np.remainder(idx, size) - size * (idx % 2))
    x = xp.asarray(host)
    assert_close(xp.getitem(x, _device_key(xp, key)), host[key], err_msg=str(key))


SETS: list[tuple[tuple[Any, ...], Any]] = [
    ((HOST > 30,), 0),  # a scalar into a mask
    ((HOST[:, 0, 0] > 0,), np.arange(5)),  # a broadcast row into the masked rows
    ((I([0, 2]),), 7),
    ((slice(None), I([1, 3])), np.arange(30).reshape(3, 2, 5)),
    ((I([0, 2]), I([1, 3])), np.arange(5)),
    ((I([1, 1, 2]),), np.arange(60, 120).reshape(3, 4, 5)),  # a repeated row: the last wins
    ((I([0, 0, 0]), I([1, 1, 1]), I([2, 2, 2])), np.array([5, 6, 7])),  # last write wins
]


@pytest.mark.parametrize(("key", "value"), SETS, ids=[str(i) for i in range(len(SETS))])
def test_setitem_with_index_arrays_and_masks(xp: Any, key: tuple[Any, ...], value: Any) -> None:
    for dtype in acst.supported_dtypes(xp, ("integral", "real floating", "bool")):
        host = HOST.astype(dtype) if dtype != np.bool_ else HOST % 3 == 0
        want = host.copy()
        want[key] = np.asarray(value).astype(dtype) if dtype != np.bool_ else value
        x = xp.asarray(host)
        v = xp.asarray(np.asarray(value).astype(dtype)) if isinstance(value, np.ndarray) else value
        if dtype == np.bool_ and not isinstance(value, np.ndarray):
            v = bool(value)
        if isinstance(x, ArrayBase | np.ndarray):  # CuPy's own ``[]=`` picks any repeat
            x[_device_key(xp, key)] = v
            assert_close(x, want, err_msg=f"{key} {dtype}")
        y = xp.asarray(host)  # arraycore's own path also where arrays are NumPy's
        xp.setitem(y, _device_key(xp, key), v)
        assert_close(y, want, err_msg=f"xp.setitem {key} {dtype}")


def test_advanced_index_errors_name_the_problem(xp: Any) -> None:
    """arraycore's messages (``xp.getitem``; NumPy's own arrays index with NumPy's messages)."""
    x = xp.asarray(HOST)
    cases: list[tuple[type[Exception], str, Any]] = [
        (IndexError, r"index 5 is out of bounds for axis 0 with size 3", I([0, 5])),
        (IndexError, r"index -4 is out of bounds for axis 0", I([-4])),
        (IndexError, r"\(2,\), \(3,\) do not broadcast", (I([0, 1]), I([0, 1, 2]))),
        (IndexError, r"boolean index of shape \(4, 5\)", HOST[0] > 3),
        (IndexError, "integers or bools", I([0.0, 1.0]).astype(np.float32)),
        (IndexError, "too many indices", (HOST > 3, 0)),
    ]
    for error, message, key in cases:
        device_key = _device_key(xp, key if isinstance(key, tuple) else (key,))
        with pytest.raises(error, match=message):
            xp.getitem(x, device_key)
    with pytest.raises(ValueError, match=r"value of shape \(3,\) does not broadcast"):
        xp.setitem(x, (xp.asarray(I([0, 1])),), xp.asarray(np.arange(3)))
    assert_close(x, HOST)  # a failed assignment leaves the array as it was
