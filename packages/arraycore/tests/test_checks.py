"""What a backend's primitives and overrides receive after arraycore's argument checks, and what
the checks of device index and label arrays cost (transfers to the host).

The backends below are the tiny test backend with a log of the calls that arraycore makes to its
primitives and overrides: real primitives on real arrays, observed, not replaced. The behaviour
every backend must show is in the conformance kit (``arraycore.testing.conformance.test_checks``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import arraycore
from arraycore import Namespace, _checks
from arraycore.backend import Array
from arraycore_tiny import TinyArray, TinyBackend


class LoggingTiny(TinyBackend):
    """The tiny backend, logging the index arrays its gather/scatter primitives receive and
    counting transfers to the host (each one waits for the device on a real device backend)."""

    def __init__(self, device: str | int | None = None) -> None:
        super().__init__(device)
        self.indices: list[tuple[str, np.ndarray]] = []
        self.transfers = 0

    def take(self, x: Array, indices: Array, axis: int) -> TinyArray:
        self.indices.append(("take", indices._data.copy()))
        return super().take(x, indices, axis)

    def scatter_add(self, out: Array, indices: Array, values: Array, axis: int) -> None:
        self.indices.append(("scatter_add", indices._data.copy()))
        super().scatter_add(out, indices, values, axis)

    def to_numpy(self, x: Array) -> np.ndarray:
        self.transfers += 1
        return super().to_numpy(x)


class OverridingTiny(LoggingTiny):
    """Overrides every function that arraycore guards, logging what each override receives."""

    def overrides(self) -> dict[str, Any]:
        self.received: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        ns: dict[str, Any] = {}

        def logged(name: str, fn: Any) -> Any:
            def override(*args: Any, **kwargs: Any) -> Any:
                self.received.append((name, args, kwargs))
                return fn(*args, **kwargs)

            return override

        def reference(name: str) -> Any:
            # arraycore's derived function on a second, plain namespace of this backend
            owner: Any = ns["plain"]
            for part in name.split("."):
                owner = getattr(owner, part)
            return owner

        ns["plain"] = Namespace(LoggingTiny())
        return {
            name: logged(name, lambda *a, _n=name, **k: reference(_n)(*a, **k))
            for name in _checks.GUARDS
        }


@pytest.fixture
def logging_xp() -> Namespace:
    arraycore.namespace("tiny")  # the registry knows tiny's arrays (their operators use it)
    return Namespace(LoggingTiny())


def _data(x: Any) -> np.ndarray:
    return np.asarray(x._data) if isinstance(x, TinyArray) else np.asarray(x)


def test_primitives_receive_non_negative_int64_indices_in_range(logging_xp: Namespace) -> None:
    xp, bk = logging_xp, logging_xp._backend
    assert isinstance(bk, LoggingTiny)
    x = xp.asarray(np.arange(12.0).reshape(3, 4))
    for where in ("device", "host"):
        for dtype in (np.int8, np.int32, np.int64, np.uint8):
            host = np.array([3, 0, 2] if dtype == np.uint8 else [-1, 0, -4, 3], dtype=dtype)
            indices = xp.asarray(host) if where == "device" else host
            bk.indices.clear()
            got = xp.take(x, indices, axis=1)
            np.testing.assert_array_equal(_data(got), np.take(_data(x), host, axis=1))
            ((op, received),) = bk.indices
            assert op == "take" and received.dtype == np.int64
            np.testing.assert_array_equal(received, host.astype(np.int64) % 4)
    bk.indices.clear()
    out = xp.zeros((3, 4))
    xp.inplace.scatter_add(out, xp.asarray(np.array([-3, 2, -1])), xp.ones((3, 4)), axis=0)
    ((op, received),) = bk.indices
    assert op == "scatter_add" and received.tolist() == [0, 2, 2]
    bk.indices.clear()
    along = xp.take_along_axis(x, xp.asarray(np.array([[-1], [0], [-4]])), axis=1)
    np.testing.assert_array_equal(_data(along).ravel(), [3.0, 4.0, 8.0])
    ((_, received),) = bk.indices
    assert received.min() >= 0 and received.max() < 12


def test_an_index_out_of_range_never_reaches_a_primitive(logging_xp: Namespace) -> None:
    xp, bk = logging_xp, logging_xp._backend
    assert isinstance(bk, LoggingTiny)
    x = xp.asarray(np.array([10.0, 20.0, 30.0]))
    out = xp.zeros(3)
    for bad in (-4, 3):  # the tiny backend would return element 2 for -4 and raise for 3
        indices = xp.asarray(np.array([0, bad]))
        with pytest.raises(IndexError, match=f"take: index {bad} is out of bounds"):
            xp.take(x, indices)
        with pytest.raises(IndexError, match=f"scatter_add: index {bad} is out of bounds"):
            xp.inplace.scatter_add(out, indices, xp.ones(2))
    assert bk.indices == []
    np.testing.assert_array_equal(_data(out), np.zeros(3))


def _probe(xp: Namespace) -> tuple[Namespace, Array, Array, Array, Any]:
    """A (10, 4) table, 8 device labels/indices in range, (8, 10) logits, and ``transfers(call)``:
    how many host transfers ``call()`` made."""
    bk = xp._backend
    assert isinstance(bk, LoggingTiny)

    def transfers(call: Any) -> int:
        before = bk.transfers
        call()
        return bk.transfers - before

    table = xp.asarray(np.ones((10, 4), dtype=np.float32))
    return xp, table, xp.asarray(np.arange(8) % 10), xp.zeros((8, 10), dtype=xp.float32), transfers


def test_device_checks_cost_one_transfer_host_checks_none(logging_xp: Namespace) -> None:
    xp, table, device_ids, logits, transfers = _probe(logging_xp)

    assert transfers(lambda: xp.take(table, device_ids, axis=0)) == 1
    assert transfers(lambda: xp.nn.softmax_cross_entropy(logits, device_ids)) == 1
    assert transfers(lambda: xp.nn.one_hot(device_ids, 10)) == 1
    assert transfers(lambda: xp.take(table, np.arange(8), axis=0)) == 0  # host indices
    many = xp.asarray(np.arange(3 * _checks.SMALL) % 10)  # checked by reductions
    assert transfers(lambda: xp.take(table, many, axis=0)) == 1
    with arraycore.checks(False):
        assert transfers(lambda: xp.take(table, device_ids, axis=0)) == 0
        assert transfers(lambda: xp.nn.softmax_cross_entropy(logits, device_ids)) == 0
        assert transfers(lambda: xp.nn.one_hot(device_ids, 10)) == 0
    assert transfers(lambda: xp.take(table, device_ids, axis=0)) == 1


def test_one_kind_of_check_is_switched_alone(logging_xp: Namespace) -> None:
    """``checks(False, only="labels")`` drops the label checks' transfer and keeps the index
    checks (and the reverse); an unknown kind is refused; nesting restores the outer setting."""
    xp, table, ids, logits, transfers = _probe(logging_xp)

    with arraycore.checks(False, only="labels"):
        assert not _checks.enabled("labels") and _checks.enabled("indices")
        assert transfers(lambda: xp.nn.softmax_cross_entropy(logits, ids)) == 0
        assert transfers(lambda: xp.nn.one_hot(ids, 10)) == 0
        assert transfers(lambda: xp.take(table, ids, axis=0)) == 1
        with pytest.raises(IndexError, match="take: index 10 is out of bounds"):
            xp.take(table, xp.asarray(np.array([10])), axis=0)
        with arraycore.checks(True, only="labels"):
            assert transfers(lambda: xp.nn.one_hot(ids, 10)) == 1
        with arraycore.checks(False, only="indices"):
            assert transfers(lambda: xp.take(table, ids, axis=0)) == 0
        assert transfers(lambda: xp.take(table, ids, axis=0)) == 1
    assert transfers(lambda: xp.nn.one_hot(ids, 10)) == 1
    with arraycore.checks(False), arraycore.checks(True, only="labels"):
        assert not _checks.enabled("labels")  # everything stays off inside checks(False)
    refused = pytest.raises(
        ValueError, match="only must be one of 'indices', 'labels', got 'values'"
    )
    with refused, arraycore.checks(False, only="values"):
        pass


def test_guarded_overrides_receive_checked_arguments() -> None:
    arraycore.namespace("tiny")
    xp = Namespace(OverridingTiny())
    bk = xp._backend
    assert isinstance(bk, OverridingTiny)
    x = xp.asarray(np.arange(6.0).reshape(2, 3))
    got = xp.take(x, xp.asarray(np.array([-1, 0], dtype=np.int8)), axis=-1)
    np.testing.assert_array_equal(_data(got), [[2.0, 0.0], [5.0, 3.0]])
    name, args, kwargs = bk.received[-1]
    assert name == "take" and kwargs == {"axis": 1}
    assert args[1].dtype == np.int64 and _data(args[1]).tolist() == [2, 0]
    xp.setitem(x, (-1, -1), xp.asarray(np.full((1, 1), 7.0)))
    name, args, _ = bk.received[-1]
    assert name == "setitem" and args[1] == (1, 2) and tuple(args[2].shape) == ()
    xp.full(np.int64(2), 1.0)
    assert bk.received[-1][:2] == ("full", ((2,), 1.0))
    ones, row = xp.asarray(np.ones((1, 3))), xp.asarray(np.ones(2))
    bk.received.clear()
    with pytest.raises(IndexError, match="take: index 3 is out of bounds for axis 1 with size 3"):
        xp.take(x, xp.asarray(np.array([3])), axis=1)
    with pytest.raises(IndexError, match="take_along_axis: index -4 is out of bounds"):
        xp.take_along_axis(x, xp.asarray(np.array([[-4], [0]])), axis=1)
    with pytest.raises(IndexError, match="scatter_add: index 2 is out of bounds"):
        xp.inplace.scatter_add(x, xp.asarray(np.array([2])), ones, axis=0)
    with pytest.raises(IndexError, match="scatter_add: index 2 is out of bounds"):
        xp.nn.scatter_add(x, xp.asarray(np.array([2])), ones, axis=0)
    with pytest.raises(IndexError, match="setitem: index 2 is out of bounds for axis 0"):
        xp.setitem(x, 2, 1.0)
    with pytest.raises(ValueError, match=r"inplace.copy: a value of shape \(2,\)"):
        xp.inplace.copy(row, out=x)
    with pytest.raises(ValueError, match="one_hot: label 3 is out of range for 3 classes"):
        xp.nn.one_hot(xp.asarray(np.array([3])), 3)
    with pytest.raises(ValueError, match="softmax_cross_entropy: label -1 is out of range"):
        xp.nn.softmax_cross_entropy(x, xp.asarray(np.array([0, -1])))
    for name in ("full", "zeros", "ones", "empty"):
        with pytest.raises(ValueError, match=f"{name}: negative dimension"):
            getattr(xp, name)((2, -1), *([0.0] if name == "full" else []))
    assert bk.received == [], "an override ran with arguments that failed a check"


def test_every_guarded_name_is_a_namespace_function() -> None:
    xp = arraycore.namespace("tiny")
    for name in _checks.GUARDS:
        owner: Any = xp
        for part in name.split("."):
            owner = getattr(owner, part)
        assert callable(owner), name


def test_numpy_backend_refuses_what_numpy_itself_would_wrap_or_misname() -> None:
    xp = arraycore.namespace("numpy")
    x = np.arange(3.0)
    with pytest.raises(IndexError, match=r"^take: index 3 is out of bounds for axis 0 with size 3"):
        xp.take(x, np.array([3]))  # numpy.take's own message names no function
    with pytest.raises(ValueError, match=r"^full: negative dimension in shape \(-1,\)"):
        xp.full((-1,), 0.0)
    with pytest.raises(ValueError, match="one_hot: label 3 is out of range"):
        xp.nn.one_hot(np.array([3]), 3)  # numpy's fast one_hot gave an all-zero row
