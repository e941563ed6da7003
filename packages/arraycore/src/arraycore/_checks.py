"""Checks of argument values, run by arraycore before a backend's primitive or override.

Shapes, dtypes and axes are checked where the namespace receives them. This module holds the
checks that need more than that, written once for every backend:

- index arrays (``take``, ``take_along_axis``, ``scatter_add``): integers in ``[-n, n)`` for an
  axis of size ``n``; negative ones count from the end and are normalised here, so a backend's
  primitive (or override) receives int64 indices in ``[0, n)``. Anything else is an
  ``IndexError`` naming the function, the index, the axis and its size;
- class labels (``nn.one_hot``, ``nn.softmax_cross_entropy``): integers in ``[0, classes)``,
  else a ``ValueError`` naming the function, the label and the number of classes;
- the value of ``setitem`` (``x[key] = value``), which must broadcast to ``x[key]``, and the
  shape of the creation functions (``full``, ``zeros``, ``ones``, ``empty``).

Every check runs before anything is written: a ``scatter_add`` or ``setitem`` that fails leaves
its target as it was. :func:`guard` puts the same checks in front of a backend's overrides of
these functions (NumPy's ``take`` and ``full``, CuPy's ``take``, the shared softmax
cross-entropy kernel, ...), so every backend raises the same errors.

Cost. The values of an index or label array that lives on the host (a NumPy array, also every
array of the NumPy backend) are checked on the host, with no device work. Those of a device
array are copied to the host (up to :data:`SMALL` elements), or reduced to their ``min`` and
``max`` on the device and those two scalars copied: either way one transfer, which waits for
the queued work (a synchronisation). ``with arraycore.checks(False):`` turns these
data-dependent checks off: indices outside ``[-n, n)`` then wrap around modulo
``n`` (as NumPy's ``take(..., mode="wrap")``; nothing is read or written outside the array) and
labels outside ``[0, classes)`` give all-zero one-hot rows, which add nothing to the loss.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

import numpy as np

from . import _linalg_host, _nn
from .backend import Array, Key, Shape, normalize_axes

if TYPE_CHECKING:
    from ._base import NamespaceBase

_ENABLED: ContextVar[bool] = ContextVar("arraycore_checks", default=True)
_INT64 = np.dtype("int64")
#: Device index and label arrays of at most this many elements are checked by copying them to
#: the host (one transfer, no kernel: on PoCL a transfer costs what a reduction and a transfer of
#: its result cost, and it saves the kernel launches); larger ones by two reductions.
SMALL = 4096
#: Per namespace: the (2,) bool device array [True, False] that packs a min and a max into one
#: array, so that both reach the host in one transfer.
_SELECT: weakref.WeakKeyDictionary[NamespaceBase, Array] = weakref.WeakKeyDictionary()


#: The kinds of data-dependent check that :func:`checks` can turn off one at a time.
KINDS = ("indices", "labels")
_OFF: ContextVar[frozenset[str]] = ContextVar("arraycore_checks_off", default=frozenset())


@contextlib.contextmanager
def checks(enabled: bool, *, only: str | None = None) -> Iterator[None]:
    """Turn the data-dependent argument checks on or off inside a ``with`` block.

    Those are the checks of the *values* of index arrays (``take``, ``take_along_axis``,
    ``scatter_add``: each index in ``[-n, n)``) and of class labels (``nn.one_hot``,
    ``nn.softmax_cross_entropy``: each label in ``[0, classes)``). They are on by default; for
    arrays on a device each costs a synchronisation with the device (one transfer to the host
    of the array, or of its minimum and maximum), which ``checks(False)`` saves. Inside it, indices
    outside ``[-n, n)`` wrap around modulo ``n`` and labels outside ``[0, classes)`` give
    all-zero one-hot rows (no loss). Shape, dtype and axis checks stay on. The setting lives in
    a ContextVar, like :func:`arraycore.use`: each thread and async task has its own.

    ``only="labels"`` or ``only="indices"`` switches one kind alone (nnlayers' ``fit`` turns the
    label checks off once it has checked a feed's labels on the host, so that a step on a GPU
    does not wait to copy them back); ``checks(False)`` without it switches every kind, and
    nothing inside a ``checks(False)`` block turns one back on.

    >>> import arraycore
    >>> xp = arraycore.namespace("numpy")
    >>> with arraycore.checks(False):
    ...     xp.take(xp.asarray([10, 20, 30]), xp.asarray([3, -4])).tolist()
    [10, 30]
    """
    if only is None:
        token = _ENABLED.set(bool(enabled))
        try:
            yield
        finally:
            _ENABLED.reset(token)
        return
    if only not in KINDS:
        raise ValueError(f"checks: only must be one of {', '.join(map(repr, KINDS))}, got {only!r}")
    off = _OFF.get()
    narrowed = _OFF.set(off - {only} if enabled else off | {only})
    try:
        yield
    finally:
        _OFF.reset(narrowed)


def enabled(kind: str | None = None) -> bool:
    """Whether the data-dependent checks of ``kind`` (``"indices"`` or ``"labels"``; ``None``:
    the switch of :func:`checks` without ``only``) are on here, as :func:`checks` set them in
    this thread or task.

    A caller that checks values itself can leave them to arraycore while this is True (as
    nnlayers' graph does with fed class labels where arraycore's own check runs on the host).

    >>> import arraycore
    >>> arraycore.checks_enabled("labels")
    True
    >>> with arraycore.checks(False, only="labels"):
    ...     arraycore.checks_enabled("labels"), arraycore.checks_enabled("indices")
    (False, True)
    """
    return _ENABLED.get() and (kind is None or kind not in _OFF.get())


# -- values of index and label arrays ----------------------------------------------------------
def _bounds(xp: NamespaceBase, a: Array) -> tuple[int, int]:
    """``(min, max)`` of the non-empty integer array ``a``: on the host for NumPy arrays; for
    device arrays of up to :data:`SMALL` elements from one transfer of the array itself, else
    from a min and a max reduction on the device and one transfer of both scalars."""
    if isinstance(a, np.ndarray | np.generic):
        return int(np.minimum.reduce(a, axis=None)), int(np.maximum.reduce(a, axis=None))
    bk = xp._backend
    if a.size <= SMALL:
        return _bounds(xp, bk.to_numpy(a))
    flat = bk.reshape(a, (a.size,)) if len(a.shape) != 1 else a
    low = bk.reduce("min", flat, (0,), False)
    high = bk.reduce("max", flat, (0,), False)
    select = _SELECT.get(xp)
    if select is None:
        select = _SELECT[xp] = bk.from_numpy(np.array([True, False]))
    pair = bk.to_numpy(bk.where(select, low, high))
    return int(pair[0]), int(pair[1])


def index_error(op: str, index: int, axis: int, size: int) -> IndexError:
    """The error for ``index`` outside ``[-size, size)`` on ``axis``."""
    valid = f"valid indices are {-size} to {size - 1}" if size else "the axis is empty"
    return IndexError(
        f"{op}: index {index} is out of bounds for axis {axis} with size {size} ({valid})"
    )


def index_array(
    xp: NamespaceBase, op: str, indices: Any, size: int, axis: int, flat: bool
) -> Array:
    """``indices`` for an axis of ``size`` as int64 indices in ``[0, size)``, arrays of ``xp``.

    ``indices`` is an integer array of ``xp`` or host data (a NumPy array, a list, an int);
    ``flat`` requires it to be 1-D. Negative indices count from the end. An index outside
    ``[-size, size)`` is an :class:`IndexError` (with :func:`checks` off it wraps around).
    """
    host = isinstance(indices, np.ndarray | np.generic) or (
        isinstance(indices, list | tuple | int) and not xp._is_array(indices)
    )
    if host:
        given = indices
        indices = np.asarray(indices)
        if indices.size == 0 and not isinstance(given, np.ndarray | np.generic):
            indices = indices.astype(_INT64)  # [] is float64 to NumPy
    else:
        xp._check(op, indices)
    if indices.dtype.kind not in "iu":
        raise TypeError(
            f"{op}: indices must be integers, got {indices.dtype} (shape {tuple(indices.shape)})"
        )
    if flat and len(indices.shape) != 1:
        raise ValueError(f"{op}: indices must be 1-D, got shape {tuple(indices.shape)}")
    count = indices.size
    if count and size == 0:
        raise IndexError(f"{op}: axis {axis} has size 0, so none of the {count} indices is in it")
    check = count > 0 and enabled("indices")
    if host:
        result = indices.astype(_INT64, copy=False)
        wrap = count > 0
        if check:
            low, high = _bounds(xp, indices)
            if low < -size or high >= size:
                raise index_error(op, low if low < -size else high, axis, size)
            wrap = low < 0
        if wrap:
            result = np.remainder(result, size)
        return result if xp._is_array(result) else xp._backend.from_numpy(result)
    bk = xp._backend
    idx = xp._cast(indices, _INT64)
    if check:
        low, high = _bounds(xp, idx)
        if low < -size or high >= size:
            raise index_error(op, low if low < -size else high, axis, size)
        if low >= 0:
            return idx
    elif count == 0:
        return idx
    return bk.binary("remainder", idx, bk.full((), size, _INT64))


#: The unsigned integer dtype of each integer size (label range checks: as unsigned, a negative
#: label is larger than any class).
UNSIGNED = {n: np.dtype(f"u{n}") for n in (1, 2, 4, 8)}


def check_labels(xp: NamespaceBase, op: str, labels: Array, classes: int) -> None:
    """Raise a ValueError naming ``op`` unless every one of the integer ``labels`` (an array of
    ``xp``) lies in ``[0, classes)``; nothing is checked with :func:`checks` off."""
    if labels.size == 0 or not enabled("labels"):
        return
    if isinstance(labels, np.ndarray) and labels.dtype.kind in "iu":
        # one reduction on the host: as unsigned, a negative label is larger than any class
        unsigned = labels.view(UNSIGNED[labels.dtype.itemsize])
        if np.maximum.reduce(unsigned, axis=None) < classes:
            return
    low, high = _bounds(xp, labels)
    if low < 0 or high >= classes:
        raise ValueError(
            f"{op}: label {low if low < 0 else high} is out of range for {classes} classes "
            f"(labels must lie in [0, {classes}); labels of shape {tuple(labels.shape)})"
        )


# -- the functions that take index arrays --------------------------------------------------------
def take_args(xp: NamespaceBase, x: Array, indices: Any, axis: int | None) -> tuple[int, Array]:
    """``(axis, indices)`` of ``take(x, indices, axis=axis)``, checked and normalised."""
    xp._check("take", x)
    if axis is None:
        if len(x.shape) != 1:
            raise ValueError(f"take: axis is required for a {len(x.shape)}-D array {x.shape}")
        axis = 0
    (ax,) = normalize_axes(axis, len(x.shape), "take")
    return ax, index_array(xp, "take", indices, x.shape[ax], ax, flat=True)


def take_along_axis_args(xp: NamespaceBase, x: Array, indices: Any, axis: int) -> tuple[int, Array]:
    """``(axis, indices)`` of ``take_along_axis(x, indices, axis=axis)``: same rank as ``x``,
    every index in range, normalised."""
    op = "take_along_axis"
    xp._check(op, x)
    if isinstance(indices, list | tuple):
        indices = np.asarray(indices)
    n = len(x.shape)
    if len(indices.shape) != n:
        raise ValueError(
            f"{op}: indices {tuple(indices.shape)} need the rank of x {tuple(x.shape)}"
        )
    (ax,) = normalize_axes(axis, n, op)
    off = [i for i in range(n) if i != ax]
    if any(indices.shape[i] not in (1, x.shape[i]) and x.shape[i] != 1 for i in off):
        raise ValueError(
            f"{op}: indices of shape {tuple(indices.shape)} do not broadcast with x of shape "
            f"{tuple(x.shape)} off axis {ax}"
        )
    return ax, index_array(xp, op, indices, x.shape[ax], ax, flat=False)


def scatter_add_args(
    xp: NamespaceBase, op: str, out: Array, indices: Any, values: Array, axis: int
) -> tuple[int, Array, Array]:
    """``(axis, indices, values)`` of ``scatter_add(out, indices, values, axis)``: indices
    checked and normalised, ``values`` of ``out``'s dtype and of the shape they scatter to."""
    xp._check(op, out, values)
    (ax,) = normalize_axes(axis, len(out.shape), op)
    shape = tuple(out.shape)
    idx = index_array(xp, op, indices, shape[ax], ax, flat=True)
    expected = (*shape[:ax], idx.shape[0], *shape[ax + 1 :])
    if tuple(values.shape) != expected:
        raise ValueError(
            f"{op}: values of shape {tuple(values.shape)} do not match out {shape} with "
            f"{idx.shape[0]} indices on axis {ax} (expected {expected})"
        )
    return ax, idx, xp.astype(values, out.dtype, copy=False)


# -- setitem and creation -----------------------------------------------------------------------------
def indexed_shape(shape: Shape, key: Key) -> Shape:
    """The shape of ``x[key]`` for an array of ``shape`` and a normalised basic ``key``."""
    out: list[int] = []
    axis = 0
    for k in key:
        if k is None:
            out.append(1)
            continue
        if isinstance(k, slice):
            out.append(len(range(*k.indices(shape[axis]))))
        axis += 1
    return (*out, *shape[axis:])


def setitem_value(xp: NamespaceBase, op: str, x: Array, key: Key, value: Any) -> Array:
    """``value`` (an array of ``xp`` or a Python scalar) as an array of ``x``'s dtype whose
    shape broadcasts to ``x[key]``, or a ValueError naming ``op`` and both shapes.

    Leading size-1 axes beyond the rank of ``x[key]`` are dropped, as NumPy does.
    """
    v = xp._as_operand(value, x.dtype, op)
    target = indexed_shape(tuple(x.shape), key)
    shape = tuple(v.shape)
    extra = len(shape) - len(target)
    if extra > 0 and all(s == 1 for s in shape[:extra]):
        shape = shape[extra:]
        v = xp._backend.reshape(v, shape)
    lead = len(target) - len(shape)
    if lead < 0 or any(s not in (1, t) for s, t in zip(shape, target[lead:])):
        raise ValueError(
            f"{op}: a value of shape {tuple(getattr(value, 'shape', ()))} does not broadcast "
            f"to the shape {target} of the target (an array of shape {tuple(x.shape)} indexed "
            f"with {_key_text(key)})"
        )
    return v


def _key_text(key: Key) -> str:
    parts = [":" if k == slice(None) else "None" if k is None else _slice_text(k) for k in key]
    return "[" + ", ".join(parts) + "]"


def _slice_text(k: int | slice) -> str:
    if isinstance(k, int):
        return str(k)
    text = ":".join("" if v is None else str(v) for v in (k.start, k.stop, k.step))
    return text.removesuffix(":")


# -- guards in front of a backend's overrides --------------------------------------------------------
Guard = Callable[["NamespaceBase", Callable[..., Any]], Callable[..., Any]]


def _creation(op: str) -> Guard:
    def make(xp: NamespaceBase, fn: Callable[..., Any]) -> Callable[..., Any]:
        def checked(shape: Any, *args: Any, **kwargs: Any) -> Any:
            return fn(xp._shape(shape, op), *args, **kwargs)

        return checked

    return make


def _take(xp: NamespaceBase, fn: Callable[..., Any]) -> Callable[..., Any]:
    def take(x: Array, indices: Any, /, *, axis: int | None = None) -> Any:
        ax, idx = take_args(xp, x, indices, axis)
        return fn(x, idx, axis=ax)

    return take


def _take_along_axis(xp: NamespaceBase, fn: Callable[..., Any]) -> Callable[..., Any]:
    def take_along_axis(x: Array, indices: Array, /, *, axis: int = -1) -> Any:
        ax, idx = take_along_axis_args(xp, x, indices, axis)
        return fn(x, idx, axis=ax)

    return take_along_axis


def _scatter_add(op: str) -> Guard:
    def make(xp: NamespaceBase, fn: Callable[..., Any]) -> Callable[..., Any]:
        def scatter_add(out: Array, indices: Any, values: Array, axis: int = 0) -> Any:
            ax, idx, vals = scatter_add_args(xp, op, out, indices, values, axis)
            return fn(out, idx, vals, axis=ax)

        return scatter_add

    return make


def _setitem(xp: NamespaceBase, fn: Callable[..., Any]) -> Callable[..., Any]:
    def setitem(x: Array, key: Any, value: Any, /) -> Any:
        xp._check("setitem", x)
        norm = xp._normalize_key(x, key, "setitem")
        return fn(x, norm, setitem_value(xp, "setitem", x, norm, value))

    return setitem


def _copy(xp: NamespaceBase, fn: Callable[..., Any]) -> Callable[..., Any]:
    def copy(src: Any, *, out: Array) -> Any:
        xp._check("inplace.copy", out)
        key = tuple(slice(None) for _ in out.shape)
        return fn(setitem_value(xp, "inplace.copy", out, key, src), out=out)

    return copy


def one_hot(xp: NamespaceBase, indices: Array, num_classes: Any) -> None:
    """The checks of ``nn.one_hot``: arguments (:func:`arraycore._nn.check_one_hot`), labels."""
    xp._check("nn.one_hot", indices)
    if type(num_classes) is int and num_classes >= 0 and indices.dtype.kind in "iu":
        classes = num_classes  # what check_one_hot accepts, without its generic dtype tests
    else:
        classes = _nn.check_one_hot("one_hot", xp, indices, num_classes)
    check_labels(xp, "one_hot", indices, classes)


def softmax_cross_entropy(xp: NamespaceBase, logits: Array, labels: Array) -> None:
    """The checks of ``nn.softmax_cross_entropy``: shapes and dtypes, then the labels."""
    op = "softmax_cross_entropy"
    xp._check(f"nn.{op}", logits, labels)
    shape = tuple(logits.shape)
    if (
        shape
        and logits.dtype.kind == "f"
        and labels.dtype.kind in "iu"
        and tuple(labels.shape) == shape[:-1]
    ):
        classes = int(shape[-1])  # what check_cross_entropy accepts, without its generic tests
    else:
        classes = _nn.check_cross_entropy(op, xp, logits, labels)
    check_labels(xp, op, labels, classes)


def _one_hot(xp: NamespaceBase, fn: Callable[..., Any]) -> Callable[..., Any]:
    def checked(indices: Array, num_classes: int, *, dtype: Any = None) -> Any:
        one_hot(xp, indices, num_classes)
        return fn(indices, num_classes, dtype=dtype)

    return checked


def _softmax_cross_entropy(xp: NamespaceBase, fn: Callable[..., Any]) -> Callable[..., Any]:
    def checked(logits: Array, labels: Array, scale: float = 1.0) -> Any:
        softmax_cross_entropy(xp, logits, labels)
        return fn(logits, labels, scale)

    return checked


#: The overridable functions whose arguments arraycore checks before the override runs, and
#: what the override then receives (documented in docs/backends.md, "Overrides").
GUARDS: dict[str, Guard] = {
    "full": _creation("full"),
    "zeros": _creation("zeros"),
    "ones": _creation("ones"),
    "empty": _creation("empty"),
    "take": _take,
    "take_along_axis": _take_along_axis,
    "setitem": _setitem,
    "inplace.copy": _copy,
    "inplace.scatter_add": _scatter_add("scatter_add"),
    "nn.scatter_add": _scatter_add("scatter_add"),
    "nn.one_hot": _one_hot,
    "nn.softmax_cross_entropy": _softmax_cross_entropy,
    **_linalg_host.GUARDS,  # the decompositions and solvers (arraycore._linalg_host)
}


def guard(xp: NamespaceBase, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """A backend's override ``fn`` of the namespace function ``name``, behind arraycore's checks
    of its arguments where :data:`GUARDS` has them (``fn`` itself otherwise)."""
    make = GUARDS.get(name)
    if make is None:
        return fn
    checked = make(xp, fn)
    checked.__name__ = checked.__qualname__ = name.rpartition(".")[2]
    checked.__doc__ = getattr(fn, "__doc__", None)
    checked.__wrapped__ = fn  # type: ignore[attr-defined]
    return checked
