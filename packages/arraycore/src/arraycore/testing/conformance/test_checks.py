"""Conformance of arraycore's argument checks: every backend raises the same error before its
primitive (or override) runs, and nothing is written when a check fails.

- Indices (``take``, ``take_along_axis``, ``scatter_add``, ``x[key] = value``) follow NumPy and
  the standard: ``-n <= i < n`` for an axis of size ``n``, negative ones counting from the end.
  Anything else is an ``IndexError`` naming the function, the index, the axis and its size,
  for index arrays on the device and on the host (NumPy arrays, lists) alike.
- Class labels (``nn.one_hot``, ``nn.softmax_cross_entropy``) lie in ``[0, classes)``, else a
  ``ValueError`` names the function, the label and the number of classes.
- ``x[key] = value`` with a value that does not broadcast to ``x[key]`` is a ``ValueError``;
  ``full``, ``zeros``, ``ones`` and ``empty`` refuse negative (``ValueError``) and non-integer
  (``TypeError``) shapes, naming themselves.
- ``with arraycore.checks(False):`` turns off the checks of index and label *values* (which
  cost a synchronisation for device arrays): indices then wrap around modulo ``n`` and labels
  out of range give all-zero one-hot rows that add nothing to the loss. Everything else stays
  checked.

NumPy arrays index themselves: ``x[3] = 1`` on a ``numpy.ndarray`` is NumPy's own code, so only
the error type is checked there; ``xp.setitem`` (and the indexing of ``ArrayBase`` arrays) is
arraycore's and names ``setitem``.
"""

from __future__ import annotations

import re
import threading
from typing import Any

import numpy as np
import pytest

import arraycore
from arraycore import ArrayBase
from arraycore._checks import SMALL
from arraycore.testing import assert_close, to_host

WHERE = ["device", "host"]


def _indices(xp: Any, values: list[int], where: str, dtype: Any = np.int64) -> Any:
    """``values`` as an index array of the backend under test, or as a NumPy array."""
    host = np.asarray(values, dtype=dtype)
    return xp.asarray(host) if where == "device" else host


def _out_of_bounds(op: str, index: int, axis: int, size: int) -> str:
    return rf"^{op}: index {index} is out of bounds for axis {axis} with size {size} "


# -- take, take_along_axis, scatter_add --------------------------------------------------------------
@pytest.mark.parametrize("where", WHERE)
@pytest.mark.parametrize("bad", [-4, 3, 7, -100])
def test_take_refuses_an_index_out_of_range(xp: Any, where: str, bad: int) -> None:
    x = xp.asarray(np.array([10, 20, 30], dtype=np.int32))
    with pytest.raises(IndexError, match=_out_of_bounds("take", bad, 0, 3)):
        xp.take(x, _indices(xp, [0, bad, 1], where))
    grid = xp.asarray(np.arange(6, dtype=np.float32).reshape(2, 3))
    with pytest.raises(IndexError, match=_out_of_bounds("take", bad, 1, 3)):
        xp.take(grid, _indices(xp, [bad], where), axis=-1)
    with pytest.raises(IndexError, match=_out_of_bounds("take", bad, 0, 2)):
        xp.take(grid, _indices(xp, [bad, 0], where), axis=0)


@pytest.mark.parametrize("where", WHERE)
def test_take_counts_negative_indices_from_the_end(xp: Any, where: str) -> None:
    host = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = xp.asarray(host)
    for dtype in (np.int8, np.int16, np.int32, np.int64):
        picked = [-4, -1, 0, 3, -2]
        assert_close(xp.take(x, _indices(xp, picked, where, dtype), axis=1), host[:, picked])
    assert_close(xp.take(x, _indices(xp, [-3, 2, -1], where), axis=0), host[[-3, 2, -1]])
    assert_close(xp.take(x, [2, -3], axis=0), host[[2, -3]])  # a list is host data too
    assert_close(xp.take(x, _indices(xp, [], where), axis=0), host[:0])


@pytest.mark.parametrize("bad", [-6, 5])
def test_long_index_and_label_arrays_are_checked_too(xp: Any, bad: int) -> None:
    """Beyond ``SMALL`` elements a device array is checked by reductions on the device."""
    count = 2 * SMALL + 3
    host = np.arange(count, dtype=np.int64) % 5
    host[count // 2 + 1] = bad
    x = xp.asarray(np.arange(5, dtype=np.float32))
    with pytest.raises(IndexError, match=_out_of_bounds("take", bad, 0, 5)):
        xp.take(x, xp.asarray(host))
    out = xp.zeros((5,), dtype=xp.float32)
    with pytest.raises(IndexError, match=_out_of_bounds("scatter_add", bad, 0, 5)):
        xp.inplace.scatter_add(out, xp.asarray(host), xp.ones((count,), dtype=xp.float32))
    assert_close(out, np.zeros(5, dtype=np.float32))
    labels = xp.asarray(host.reshape(-1, 1).astype(np.int32))
    with pytest.raises(ValueError, match=rf"^one_hot: label {bad} is out of range for 5 classes"):
        xp.nn.one_hot(labels, 5)
    host[count // 2 + 1] = -5  # in range: counts from the end
    assert_close(xp.take(x, xp.asarray(host)), np.take(np.arange(5, dtype=np.float32), host))


def test_take_with_unsigned_and_small_index_dtypes_checks_their_values(xp: Any) -> None:
    x = xp.asarray(np.arange(5, dtype=np.float32))
    with pytest.raises(IndexError, match=_out_of_bounds("take", 200, 0, 5)):
        xp.take(x, xp.asarray(np.array([0, 200], dtype=np.uint8)))
    with pytest.raises(IndexError, match=_out_of_bounds("take", -100, 0, 5)):
        xp.take(x, xp.asarray(np.array([-100, 1], dtype=np.int8)))


@pytest.mark.parametrize("where", WHERE)
def test_an_empty_axis_has_no_index_in_range(xp: Any, where: str) -> None:
    x = xp.zeros((0, 2), dtype=xp.float32)
    for enabled in (True, False):
        with (
            arraycore.checks(enabled),
            pytest.raises(IndexError, match=r"^take: axis 0 has size 0"),
        ):
            xp.take(x, _indices(xp, [0], where), axis=0)
    assert tuple(xp.take(x, _indices(xp, [], where), axis=0).shape) == (0, 2)


def test_take_along_axis_refuses_an_index_out_of_range(xp: Any) -> None:
    host = np.arange(6, dtype=np.float32).reshape(2, 3)
    x = xp.asarray(host)
    for bad in (3, -4):
        indices = xp.asarray(np.array([[0], [bad]]))
        with pytest.raises(IndexError, match=_out_of_bounds("take_along_axis", bad, 1, 3)):
            xp.take_along_axis(x, indices, axis=1)
    indices = np.array([[-3, -1], [2, -2]])
    assert_close(
        xp.take_along_axis(x, xp.asarray(indices), axis=-1),
        np.take_along_axis(host, indices, axis=-1),
    )
    with pytest.raises(TypeError, match=r"^take_along_axis: indices must be integers"):
        xp.take_along_axis(x, xp.asarray(np.zeros((2, 1), dtype=np.float32)), axis=1)


@pytest.mark.parametrize("where", WHERE)
def test_scatter_add_refuses_an_index_out_of_range_and_writes_nothing(xp: Any, where: str) -> None:
    out = xp.zeros((3, 2), dtype=xp.float32)
    values = xp.ones((3, 2), dtype=xp.float32)
    for bad in (3, -4):
        # the good indices come first: a scatter that started would have written them
        indices = _indices(xp, [0, 1, bad], where)
        with pytest.raises(IndexError, match=_out_of_bounds("scatter_add", bad, 0, 3)):
            xp.inplace.scatter_add(out, indices, values, axis=0)
        assert_close(out, np.zeros((3, 2), dtype=np.float32), err_msg="inplace.scatter_add wrote")
        with pytest.raises(IndexError, match=_out_of_bounds("scatter_add", bad, 0, 3)):
            xp.nn.scatter_add(out, indices, values, axis=0)
        assert_close(out, np.zeros((3, 2), dtype=np.float32), err_msg="nn.scatter_add wrote")
    with pytest.raises(IndexError, match=_out_of_bounds("scatter_add", 2, 1, 2)):
        wide = xp.ones((3, 3), dtype=xp.float32)
        xp.inplace.scatter_add(out, _indices(xp, [1, 2, 0], where), wide, axis=-1)
    assert_close(out, np.zeros((3, 2), dtype=np.float32))
    # negative indices count from the end and accumulate like the others
    xp.inplace.scatter_add(out, _indices(xp, [-1, 2, -3], where), values, axis=0)
    assert_close(out, np.array([[1, 1], [0, 0], [2, 2]], dtype=np.float32))


# -- setitem -------------------------------------------------------------------------------------------
def test_setitem_refuses_an_index_out_of_range_and_writes_nothing(xp: Any) -> None:
    host = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = xp.asarray(host)
    for key, index, axis, size in (((3, 0), 3, 0, 3), ((0, -5), -5, 1, 4), ((-4,), -4, 0, 3)):
        with pytest.raises(IndexError, match=_out_of_bounds("setitem", index, axis, size)):
            xp.setitem(x, key, 1.0)
        with pytest.raises(IndexError) as info:
            x[key] = 1.0
        if isinstance(x, ArrayBase):  # NumPy's and CuPy's arrays index themselves
            assert re.match(_out_of_bounds("setitem", index, axis, size), str(info.value))
    assert_close(x, host)
    x[-1, -4] = 100.0  # negative indices count from the end
    host[-1, -4] = 100.0
    assert_close(x, host)


def test_setitem_refuses_a_value_that_does_not_broadcast_and_writes_nothing(xp: Any) -> None:
    host = np.zeros((3, 4), dtype=np.float32)
    x = xp.asarray(host)
    row = xp.asarray(np.ones(3, dtype=np.float32))
    block = xp.asarray(np.ones((3, 3), dtype=np.float32))
    for key, value, shape, target in (
        (0, row, r"\(3,\)", r"\(4,\)"),
        ((slice(None), slice(None, 2)), block, r"\(3, 3\)", r"\(3, 2\)"),
        (Ellipsis, xp.asarray(np.ones((2, 3, 4), dtype=np.float32)), r"\(2, 3, 4\)", r"\(3, 4\)"),
    ):
        message = rf"^setitem: a value of shape {shape} does not broadcast to the shape {target}"
        with pytest.raises(ValueError, match=message):
            xp.setitem(x, key, value)
        with pytest.raises(ValueError) as info:
            x[key] = value
        if isinstance(x, ArrayBase):
            assert re.match(message, str(info.value))
    with pytest.raises(ValueError, match=r"^inplace.copy: a value of shape \(3,\) does not"):
        xp.inplace.copy(row, out=x)
    assert_close(x, host)
    # what does broadcast is written, leading size-1 axes included (as in NumPy)
    x[1] = xp.asarray(np.full((1, 1, 4), 2.0, dtype=np.float32))
    x[:, 3:] = xp.asarray(np.full((3, 1), 5.0, dtype=np.float32))
    host[1] = 2.0
    host[:, 3:] = 5.0
    assert_close(x, host)


# -- creation ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["full", "zeros", "ones", "empty"])
def test_creation_refuses_a_bad_shape(xp: Any, name: str) -> None:
    def make(shape: Any) -> Any:
        fn = getattr(xp, name)
        return fn(shape, 1.0) if name == "full" else fn(shape)

    shape: Any
    for shape in ((-1,), (2, -3), -2):
        with pytest.raises(ValueError, match=rf"^{name}: negative dimension in shape"):
            make(shape)
    for shape in ((2.5,), (2, None), "ab", 2.0):
        with pytest.raises(TypeError, match=rf"^{name}: shape must be ints"):
            make(shape)
    assert tuple(make((2, 0)).shape) == (2, 0)


# -- labels ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["int64", "int32", "int8", "uint8"])
def test_labels_out_of_range_are_refused(xp: Any, dtype: str) -> None:
    bad_values = [3, 100] if dtype == "uint8" else [3, -1, 100]
    logits = xp.zeros((2, 3), dtype=xp.float32)
    for bad in bad_values:
        labels = xp.asarray(np.array([0, bad], dtype=dtype))
        message = rf"label {bad} is out of range for 3 classes \(labels must lie in \[0, 3\)"
        with pytest.raises(ValueError, match=rf"^one_hot: {message}"):
            xp.nn.one_hot(labels, 3)
        with pytest.raises(ValueError, match=rf"^softmax_cross_entropy: {message}"):
            xp.nn.softmax_cross_entropy(logits, labels)
    with pytest.raises(ValueError, match=r"^one_hot: label 0 is out of range for 0 classes"):
        xp.nn.one_hot(xp.asarray(np.array([0], dtype=dtype)), 0)
    assert tuple(xp.nn.one_hot(xp.asarray(np.zeros(0, dtype=dtype)), 0).shape) == (0, 0)


# -- checks off -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("where", WHERE)
def test_checks_off_wraps_indices_and_ignores_labels_out_of_range(xp: Any, where: str) -> None:
    host = np.array([10, 20, 30], dtype=np.int32)
    x = xp.asarray(host)
    with arraycore.checks(False):
        wrapped = [-4, 3, 5, -1, 0, -7]
        assert_close(xp.take(x, _indices(xp, wrapped, where)), np.take(host, wrapped, mode="wrap"))
        out = xp.zeros((3,), dtype=xp.int32)
        xp.inplace.scatter_add(out, _indices(xp, [3, -4, 1], where), xp.ones((3,), dtype=xp.int32))
        assert_close(out, np.array([1, 1, 1], dtype=np.int32))
        grid = np.arange(6, dtype=np.float32).reshape(2, 3)
        along = np.array([[4], [-5]])
        assert_close(
            xp.take_along_axis(xp.asarray(grid), xp.asarray(along), axis=1),
            np.take_along_axis(grid, along % 3, axis=1),
        )
        labels = xp.asarray(np.array([0, 3, -1, 2]))
        assert_close(
            xp.nn.one_hot(labels, 3, dtype=xp.float32),
            np.array([[1, 0, 0], [0, 0, 0], [0, 0, 0], [0, 0, 1]], dtype=np.float32),
        )
        loss, _ = xp.nn.softmax_cross_entropy(xp.zeros((4, 3), dtype=xp.float32), labels, scale=1.0)
        assert_close(xp.asarray(loss), np.asarray(2 * np.log(3.0), dtype=np.float32))
        # checks that need no values stay on
        with pytest.raises(TypeError, match=r"^take: indices must be integers"):
            xp.take(x, xp.asarray(np.zeros(1, dtype=np.float32)))
        with pytest.raises(IndexError, match=_out_of_bounds("setitem", 3, 0, 3)):
            xp.setitem(x, 3, 1)
        with pytest.raises(ValueError, match=r"^full: negative dimension"):
            xp.full((-1,), 1.0)
    with pytest.raises(IndexError, match=_out_of_bounds("take", 3, 0, 3)):
        xp.take(x, _indices(xp, [3], where))


def test_checks_setting_is_per_thread_and_restored(xp: Any) -> None:
    x = xp.asarray(np.arange(3, dtype=np.float32))
    seen: list[BaseException | None] = []

    def other_thread() -> None:
        try:
            xp.take(x, xp.asarray(np.array([3])))
            seen.append(None)
        except IndexError as exc:
            seen.append(exc)

    with arraycore.checks(False):
        thread = threading.Thread(target=other_thread)
        thread.start()
        thread.join()
        assert_close(xp.take(x, xp.asarray(np.array([3]))), np.array([0.0], dtype=np.float32))
        with arraycore.checks(True), pytest.raises(IndexError):
            xp.take(x, xp.asarray(np.array([3])))
        assert_close(xp.take(x, xp.asarray(np.array([-4]))), np.array([2.0], dtype=np.float32))
    assert isinstance(seen[0], IndexError), "a new thread starts with the checks on"
    assert to_host(x).tolist() == [0.0, 1.0, 2.0]
