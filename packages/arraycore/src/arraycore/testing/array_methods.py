"""NumPy's array methods, as calls that run alike on ``numpy.ndarray`` and any backend's arrays.

:data:`CASES` is a table of method calls (``x.sum(axis=1)``, ``x.reshape(2, -1)``,
``x.take([0, 2], axis=1, mode="clip")``, ...) on the kit's inputs (:data:`INPUTS`); the
conformance kit runs each on the backend under test and on a NumPy copy of its input and compares
(:func:`assert_same`). :func:`script` is a short user's script written against NumPy's methods,
which must give the same results on every backend.

>>> import arraycore
>>> xp = arraycore.namespace("numpy")
>>> results = script(xp)
>>> results["accuracy"]
'accuracy 0.750'
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import numpy as np

from . import assert_close


def _host_inputs() -> dict[str, np.ndarray]:
    """The arrays the cases run on: distinct values (NumPy's default sort is not stable)."""
    f = ((np.arange(24, dtype=np.float32) * 7) % 24 / 8 - 1.25).reshape(2, 3, 4)
    return {
        "float32 3-d": f,
        "float32 square": np.array([[2, -1, 0.5], [4, 3.25, -2], [1, 0, 6]], np.float32),
        "int32 2-d": ((np.arange(12, dtype=np.int32) * 5) % 12 - 4).reshape(3, 4),
        "int8 2-d": np.array([[1, -2, 3], [4, 5, -6]], np.int8),
        "uint8 1-d": np.array([3, 1, 2, 250], np.uint8),
        "bool 2-d": np.array([[True, False, True], [False, False, True]]),
        "float32 size-1 axes": np.array([[[1.5], [-2.0], [0.25]]], np.float32),
        "float32 0-d": np.array(2.375, np.float32),
    }


def _where(test: Callable[[np.ndarray], bool]) -> tuple[str, ...]:
    return tuple(name for name, host in _host_inputs().items() if test(host))


#: Input names, by what the cases need of them.
INPUTS = tuple(_host_inputs())
NUMERIC = _where(lambda h: h.dtype.kind != "b")
FLOAT = _where(lambda h: h.dtype.kind == "f")
ND = _where(lambda h: h.ndim > 0)
ND_NUMERIC = _where(lambda h: h.ndim > 0 and h.dtype.kind != "b")
MULTI = _where(lambda h: h.ndim > 1)  # at least two axes
LONG = _where(lambda h: h.ndim > 0 and min(h.shape) > 1)  # every axis has two elements or more
MATRIX = _where(lambda h: h.ndim == 2)


def host_input(name: str) -> np.ndarray:
    """A fresh NumPy copy of input ``name`` of :data:`INPUTS`."""
    return _host_inputs()[name]


def _sorted_flat(x: Any) -> Any:
    y = x.flatten()
    y.sort()
    return y


def _in_place(method: str, *args: Any, **kwargs: Any) -> Callable[[Any], Any]:
    def call(x: Any) -> Any:
        y = x.copy()
        result = getattr(y, method)(*args, **kwargs)
        assert result is None, f"x.{method}(...) sorts or fills in place and returns None"
        return y

    return call


#: Each case: (the inputs it runs on, the call). Labels are what a user writes.
CASES: dict[str, tuple[tuple[str, ...], Callable[[Any], Any]]] = {
    "x.sum()": (INPUTS, lambda x: x.sum()),
    "x.sum(axis=-1)": (ND, lambda x: x.sum(axis=-1)),
    "x.sum(axis=(0, -1), keepdims=True)": (MULTI, lambda x: x.sum(axis=(0, -1), keepdims=True)),
    "x.sum(0, None, None, True)": (ND, lambda x: x.sum(0, None, None, True)),
    "x.sum(dtype='int32')": (NUMERIC, lambda x: x.sum(dtype="int32")),
    "x.prod(axis=0)": (ND, lambda x: x.prod(axis=0)),
    "x.mean()": (INPUTS, lambda x: x.mean()),
    "x.mean(axis=0, keepdims=True)": (ND, lambda x: x.mean(axis=0, keepdims=True)),
    "x.mean(dtype='float32')": (INPUTS, lambda x: x.mean(dtype="float32")),
    "x.std()": (NUMERIC, lambda x: x.std()),
    "x.std(axis=0, ddof=1)": (LONG, lambda x: x.std(axis=0, ddof=1)),
    "x.var(0, None, None, 1)": (LONG, lambda x: x.var(0, None, None, 1)),
    "x.var(axis=-1, keepdims=True)": (ND, lambda x: x.var(axis=-1, keepdims=True)),
    "x.min()": (INPUTS, lambda x: x.min()),
    "x.max(axis=0)": (ND, lambda x: x.max(axis=0)),
    "x.min(axis=-1, keepdims=True)": (ND, lambda x: x.min(axis=-1, keepdims=True)),
    "x.argmin()": (INPUTS, lambda x: x.argmin()),
    "x.argmax(axis=-1)": (ND, lambda x: x.argmax(axis=-1)),
    "x.argmax(axis=0, keepdims=True)": (ND, lambda x: x.argmax(axis=0, keepdims=True)),
    "x.all()": (INPUTS, lambda x: x.all()),
    "x.any(axis=0)": (ND, lambda x: x.any(axis=0)),
    "x.cumsum()": (INPUTS, lambda x: x.cumsum()),
    "x.cumsum(axis=-1)": (ND, lambda x: x.cumsum(axis=-1)),
    "x.cumprod(axis=0)": (ND, lambda x: x.cumprod(axis=0)),
    "x.reshape(-1)": (INPUTS, lambda x: x.reshape(-1)),
    "x.reshape(2, -1)": (_where(lambda h: h.size % 2 == 0), lambda x: x.reshape(2, -1)),
    "x.reshape((1, -1))": (INPUTS, lambda x: x.reshape((1, -1))),
    "x.astype('float32')": (INPUTS, lambda x: x.astype("float32")),
    "x.astype(int)": (INPUTS, lambda x: x.astype(int)),
    "x.astype(float)": (INPUTS, lambda x: x.astype(float)),
    "x.astype(bool)": (INPUTS, lambda x: x.astype(bool)),
    "x.astype('int8', casting='same_kind')": (
        ("int32 2-d", "int8 2-d"),
        lambda x: x.astype("int8", casting="same_kind"),
    ),
    "x.astype(x.dtype, copy=False).dtype": (INPUTS, lambda x: x.astype(x.dtype, copy=False).dtype),
    "x.tolist()": (INPUTS, lambda x: x.tolist()),
    "x.item()": (("float32 0-d",), lambda x: x.item()),
    "x.item(2)": (ND, lambda x: x.item(2)),
    "x.item(-1)": (ND, lambda x: x.item(-1)),
    "x.item(1, 2)": (MATRIX, lambda x: x.item(1, 2)),
    "x.item((0, 1, 2))": (("float32 3-d",), lambda x: x.item((0, 1, 2))),
    "x.copy()": (INPUTS, lambda x: x.copy()),
    "x.flatten()": (INPUTS, lambda x: x.flatten()),
    "x.ravel()": (INPUTS, lambda x: x.ravel()),
    "x.squeeze()": (INPUTS, lambda x: x.squeeze()),
    "x.squeeze(axis=-1)": (("float32 size-1 axes",), lambda x: x.squeeze(axis=-1)),
    "x.transpose()": (INPUTS, lambda x: x.transpose()),
    "x.transpose(1, 0)": (MATRIX, lambda x: x.transpose(1, 0)),
    "x.transpose((2, 0, 1))": (("float32 3-d",), lambda x: x.transpose((2, 0, 1))),
    "x.swapaxes(0, -1)": (ND, lambda x: x.swapaxes(0, -1)),
    "x.clip(0, 2)": (NUMERIC, lambda x: x.clip(0, 2)),
    "x.clip(min=-1)": (NUMERIC, lambda x: x.clip(min=-1)),
    "x.round()": (FLOAT, lambda x: x.round()),
    "x.round(2)": (NUMERIC, lambda x: x.round(2)),
    "x.round(-1)": (FLOAT, lambda x: x.round(-1)),
    "x.conj()": (NUMERIC, lambda x: x.conj()),
    "x.real": (NUMERIC, lambda x: x.real),
    "x.imag": (FLOAT, lambda x: x.imag),
    "x.dot(x.T)": (MATRIX, lambda x: x.dot(x.T)),
    "x.dot(x[0])": (("float32 square", "int32 2-d"), lambda x: x.dot(x[0])[:2]),
    "x.dot(x[0].T)": (("float32 3-d",), lambda x: x.dot(x[0].T)),
    "x[0].dot(x[0])": (("float32 square",), lambda x: x[0].dot(x[0])),
    "x.dot(2)": (NUMERIC, lambda x: x.dot(2)),
    "x.nonzero()": (ND, lambda x: x.nonzero()),
    "x.fill(2)": (INPUTS, _in_place("fill", 2)),
    "x.fill(2.75)": (INPUTS, _in_place("fill", 2.75)),
    "x.sort()": (ND, _in_place("sort")),
    "x.sort(axis=0)": (ND, _in_place("sort", axis=0)),
    "x.sort(kind='stable')": (ND, _in_place("sort", kind="stable")),
    "x.argsort()": (ND_NUMERIC, lambda x: x.argsort()),
    "x.argsort(axis=0)": (ND_NUMERIC, lambda x: x.argsort(axis=0)),
    "x.argsort(axis=None, kind='stable')": (ND, lambda x: x.argsort(axis=None, kind="stable")),
    "x.repeat(2)": (INPUTS, lambda x: x.repeat(2)),
    "x.repeat(2, axis=0)": (ND, lambda x: x.repeat(2, axis=0)),
    "x.repeat([1, 0], axis=-1)": (("uint8 1-d",), lambda x: x[:2].repeat([1, 0], axis=-1)),
    "x.take([0, 2])": (ND, lambda x: x.take([0, 2])),
    "x.take(-1)": (INPUTS, lambda x: x.take(-1)),
    "x.take([[0, 1], [1, 0]], axis=-1)": (LONG, lambda x: x.take([[0, 1], [1, 0]], axis=-1)),
    "x.take([0, 9], axis=0, mode='clip')": (ND, lambda x: x.take([0, 9], axis=0, mode="clip")),
    "x.take([-4, 5], axis=0, mode='wrap')": (ND, lambda x: x.take([-4, 5], axis=0, mode="wrap")),
    "x.diagonal()": (MULTI, lambda x: x.diagonal()),
    "x.diagonal(1, 1, 2)": (("float32 3-d",), lambda x: x.diagonal(1, 1, 2)),
    "x.diagonal(offset=-1)": (MATRIX, lambda x: x.diagonal(offset=-1)),
    "x.trace()": (MATRIX, lambda x: x.trace()),
    "x.trace(axis1=1, axis2=2)": (("float32 3-d",), lambda x: x.trace(axis1=1, axis2=2)),
    "x.searchsorted(1)": (NUMERIC, lambda x: _sorted_flat(x).searchsorted(1)),
    "x.searchsorted([0.5, 2], side='right')": (
        FLOAT,
        lambda x: _sorted_flat(x).searchsorted([0.5, 2], side="right"),
    ),
    "x.tobytes()": (INPUTS, lambda x: x.tobytes()),
    "x.nbytes, x.itemsize, x.dtype.kind": (INPUTS, lambda x: (x.nbytes, x.itemsize, x.dtype.kind)),
    "len(x), list(x)": (ND, lambda x: (len(x), list(x))),
    "str(x)": (INPUTS, str),
    "f'{x:.3f}'": (("float32 0-d",), lambda x: f"{x:.3f}"),
    "f'{x}'": (INPUTS, lambda x: f"{x}"),
    "x.flatten()[1].item() in x": (ND_NUMERIC, lambda x: (x.flatten()[1].item() in x, 99 in x)),
    "copy.copy(x), copy.deepcopy(x)": (INPUTS, lambda x: (copy.copy(x), copy.deepcopy(x))),
    "divmod(x, 3)": (NUMERIC, lambda x: divmod(x, 3)),
    "float(x.sum()), int(x.max())": (NUMERIC, lambda x: (float(x.sum()), int(x.max()))),
}

#: Cases whose NumPy result is float64 by NumPy's rules (``x.dot(2)`` takes 2 as an int64 array, so
#: float32 becomes float64): skipped on devices
#: without float64 (``x.mean()`` of integers gives the device's default float there instead).
FLOAT64_CASES = frozenset({"x.astype(float)", "x.dot(2)"})


def float64_free(want: Any, has_float64: bool) -> Any:
    """NumPy's result as a device without float64 gives it: float64 arrays become float32."""
    if has_float64 or not isinstance(want, np.ndarray | np.generic) or want.dtype != np.float64:
        return want
    return np.asarray(want, dtype=np.float32)


def assert_same(got: Any, want: Any, *, has_float64: bool = True, label: str = "") -> None:
    """``got`` (from the backend's arrays) is ``want`` (from NumPy's): arrays with the same
    shape, dtype and values (float dtypes within the kit's tolerance), Python objects equal and
    of the same type, tuples and lists element by element."""
    if isinstance(want, tuple | list):
        assert type(got) is type(want), f"{label}: {type(got).__name__}, not {type(want).__name__}"
        assert len(got) == len(want), f"{label}: {len(got)} items, not {len(want)}"
        for g, w in zip(got, want, strict=True):
            assert_same(g, w, has_float64=has_float64, label=label)
    elif isinstance(want, np.ndarray | np.generic):
        assert hasattr(got, "__array_namespace__"), f"{label}: {type(got).__name__}, not an array"
        assert_close(got, float64_free(want, has_float64), err_msg=label)
    elif isinstance(want, float):
        assert type(got) is float, f"{label}: {type(got).__name__}, not float"
        np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=label)
    else:
        assert type(got) is type(want), f"{label}: {type(got).__name__}, not {type(want).__name__}"
        assert got == want, f"{label}: {got!r} != {want!r}"


def script(xp: Any) -> dict[str, Any]:
    """A short piece of user code written with NumPy's array methods: scaling features,
    a linear classifier's scores, its accuracy, and printing. Every value it returns is a Python
    object (lists, numbers, strings), so two backends' results compare with ``==``."""
    features = xp.asarray(
        [[0.5, 2.0, -1.0], [1.5, -0.5, 0.0], [2.5, 1.0, 3.0], [-1.0, 0.25, 1.0]], dtype="float32"
    )
    labels = xp.asarray([1, 0, 1, 1])
    centred = (features - features.mean(axis=0)) / features.std(axis=0, ddof=1)
    weights = xp.asarray([[1.0, -1.0], [0.5, 0.25], [-0.75, 2.0]], dtype="float32")
    scores = centred.dot(weights).clip(-2, 2)
    predicted = scores.argmax(axis=1)
    ranked = scores.max(axis=1).argsort()
    order = scores.copy()
    order.sort(axis=0)
    return {
        "shape": scores.reshape(2, -1).transpose().shape,
        "scores": scores.round(3).tolist(),
        "predicted": predicted.astype("int32").tolist(),
        "accuracy": f"accuracy {(predicted == labels).mean():.3f}",
        "correct": int((predicted == labels).sum()),
        "best": (scores.max().item(), scores.argmax().item(), scores.item(2, 1)),
        "ranked": ranked.tolist(),
        "sorted": order.flatten().round(3).tolist(),
        "cumulative": labels.cumsum().tolist(),
        "kinds": (scores.dtype.kind, labels.dtype.kind, predicted.dtype.kind),
        "bytes": (scores.nbytes, scores.itemsize, len(scores.tobytes())),
        "rows": [f"{row.sum():.2f}" for row in scores],
    }
