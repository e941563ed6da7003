"""NumPy's array methods on arraycore's own arrays, and the errors for those it has no meaning for.

:class:`ArrayMethods` (a base of :class:`arraycore.ArrayBase`) gives a backend's arrays the
``numpy.ndarray`` methods that mean something in arraycore (``x.sum()``, ``x.reshape(2, 3)``,
``x.astype("float32")``, ``x.item()``, ...), with NumPy's signatures and argument names, each one
call of the array's namespace. Code written on the NumPy backend (whose arrays are
``numpy.ndarray``) then runs unchanged on a device. Where NumPy has an option arraycore cannot
honour (``out=``, ``order="F"``, ``where=``) the method says so instead of ignoring it.

:data:`STANDARD` maps every such method to the Array API standard's spelling of it, which
:class:`strict` mode names in its errors; :data:`NUMPY_ONLY` maps NumPy's other methods and
attributes (``tofile``, ``view``, ``flags``, ...) to the portable call, which the
``AttributeError`` names. See ``docs/arrays.md``.
"""

from __future__ import annotations

import difflib
import math
import operator
import os
from collections.abc import Callable
from typing import Any

import numpy as np

from ._registry import _owner, namespace_of


def _ns(x: Any) -> Any:
    """The namespace of array ``x`` (what ``namespace_of(x)`` gives, without its search of
    arguments: every method and operator asks)."""
    ns = _owner(x)
    return ns if ns is not None else namespace_of(x)


#: Each NumPy method arraycore's arrays have, and the Array API standard's spelling of it.
STANDARD: dict[str, str] = {
    "sum": "xp.sum(x, axis=..., dtype=..., keepdims=...)",
    "prod": "xp.prod(x, axis=..., dtype=..., keepdims=...)",
    "mean": "xp.mean(x, axis=..., keepdims=...)",
    "std": "xp.std(x, axis=..., correction=ddof, keepdims=...)",
    "var": "xp.var(x, axis=..., correction=ddof, keepdims=...)",
    "min": "xp.min(x, axis=..., keepdims=...)",
    "max": "xp.max(x, axis=..., keepdims=...)",
    "argmin": "xp.argmin(x, axis=..., keepdims=...)",
    "argmax": "xp.argmax(x, axis=..., keepdims=...)",
    "all": "xp.all(x, axis=..., keepdims=...)",
    "any": "xp.any(x, axis=..., keepdims=...)",
    "cumsum": "xp.cumulative_sum(x, axis=..., dtype=...)",
    "cumprod": "xp.cumulative_prod(x, axis=..., dtype=...)",
    "reshape": "xp.reshape(x, shape)",
    "astype": "xp.astype(x, dtype)",
    "tolist": "xp.to_numpy(x).tolist()",
    "item": "float(x), int(x) or bool(x) (of a one-element array)",
    "copy": "xp.asarray(x, copy=True)",
    "flatten": "xp.reshape(x, (-1,), copy=True)",
    "ravel": "xp.reshape(x, (-1,))",
    "squeeze": "xp.squeeze(x, axis)",
    "transpose": "xp.permute_dims(x, axes) (x.T, x.mT)",
    "swapaxes": "xp.permute_dims(x, axes) or xp.moveaxis(x, source, destination)",
    "clip": "xp.clip(x, min, max)",
    "round": "xp.round(x)",
    "conj": "xp.conj(x)",
    "conjugate": "xp.conj(x)",
    "real": "xp.real(x)",
    "imag": "xp.imag(x)",
    "dot": "xp.matmul(x, y) or xp.tensordot(x, y, axes=...)",
    "nonzero": "xp.nonzero(x)",
    "fill": "x[...] = value",
    "sort": "x[...] = xp.sort(x, axis=...)",
    "argsort": "xp.argsort(x, axis=...)",
    "repeat": "xp.repeat(x, repeats, axis=...)",
    "take": "xp.take(x, indices, axis=...)",
    "diagonal": "xp.linalg.diagonal(x, offset=...) (over the last two axes)",
    "trace": "xp.linalg.trace(x, offset=...) (over the last two axes)",
    "searchsorted": "xp.searchsorted(x, v, side=...)",
    "tobytes": "xp.to_numpy(x).tobytes()",
    "nbytes": "x.size * (xp.finfo(x.dtype).bits // 8) (xp.iinfo for integers)",
    "itemsize": "xp.finfo(x.dtype).bits // 8 (xp.iinfo for integers)",
}

#: NumPy's array methods and attributes that have no arraycore meaning (memory layout, files,
#: byte views, in-place resizing), with what to write instead. NumPy 1's ``ptp``, ``itemset``
#: and ``tostring`` are here too, for code written against it.
#: PyTorch's tensor methods that users reach for, with arraycore's call.
TORCH_HABITS: dict[str, str] = {
    "numpy": "xp.to_numpy(x) (a host NumPy copy)",
    "cpu": "xp.to_numpy(x), or x.to_device(...) for another device of the backend",
    "cuda": "arraycore.namespace('cuda').asarray(xp.to_numpy(x))",
    "detach": "x itself: arrays carry no autograd history",
    "dim": "x.ndim",
    "numel": "x.size",
    "float": "x.astype('float32')",
    "long": "x.astype('int64')",
    "contiguous": "x itself, or x.copy() for a C-contiguous copy",
    "permute": "x.transpose(...) or xp.permute_dims(x, axes)",
    "unsqueeze": "xp.expand_dims(x, axis=...)",
}

NUMPY_ONLY: dict[str, str] = {
    "argpartition": "xp.argsort(x, axis=...) (a full sort is a valid partition)",
    "base": "xp.to_numpy(x).base",
    "byteswap": "xp.to_numpy(x).byteswap()",
    "choose": "xp.where(...) or xp.take_along_axis(...)",
    "compress": "xp.take(x, xp.nonzero(condition)[0], axis=...)",
    "ctypes": "xp.to_numpy(x).ctypes",
    "data": "xp.to_numpy(x).data",
    "dump": "xp.to_numpy(x).dump(...)",
    "dumps": "xp.to_numpy(x).dumps()",
    "flags": "xp.to_numpy(x).flags",
    "flat": "x.flatten() or xp.reshape(x, (-1,))",
    "getfield": "xp.to_numpy(x).getfield(...)",
    "itemset": "x[index] = value",
    "partition": "x.sort(axis=...) (a full sort is a valid partition)",
    "ptp": "x.max(axis=...) - x.min(axis=...)",
    "put": "x[index] = values",
    "resize": "xp.reshape(x, shape) (a new array; resizing in place is NumPy-only)",
    "setfield": "xp.to_numpy(x).setfield(...)",
    "setflags": "xp.to_numpy(x).setflags(...)",
    "strides": "xp.to_numpy(x).strides",
    "tofile": "xp.to_numpy(x).tofile(...)",
    "tostring": "x.tobytes()",
    "view": "xp.astype(x, dtype) (converts values; a byte view is xp.to_numpy(x).view(dtype))",
}

_ORDERS = ("C", "K", "A", None)


def _refuse_out(method: str, out: Any) -> None:
    if out is not None:
        raise TypeError(
            f"x.{method}(out=...): arraycore's array methods return new arrays; write "
            f"y = x.{method}(...), or y[...] = x.{method}(...) to fill an existing array"
        )


#: NumPy's keyword options of the methods here that arraycore has no meaning for.
_NUMPY_OPTIONS = frozenset({"where", "initial", "mean", "casting", "subok", "signature"})


def _refuse_extras(method: str, extras: dict[str, Any]) -> None:
    """NumPy's options arraycore has no meaning for (``where=``, ``initial=``, ...) and, as
    Python would, unknown keywords."""
    for key in extras:
        if key not in _NUMPY_OPTIONS:
            raise TypeError(f"x.{method}() got an unexpected keyword argument {key!r}")
    if extras:
        names = ", ".join(f"{k}=" for k in extras)
        raise TypeError(
            f"x.{method}({names}): not supported on arraycore arrays (NumPy-only); "
            f"compute it with xp functions, e.g. xp.where, or on xp.to_numpy(x)"
        )


def _refuse_order(method: str, order: Any) -> None:
    if order not in _ORDERS:
        raise ValueError(
            f"x.{method}(order={order!r}): arraycore arrays have one layout, C order; only "
            f"order='C' (or 'K', 'A') is possible"
        )


def _axis(axis: Any, ndim: int) -> int:
    a = operator.index(axis)
    if not -ndim <= a < ndim:
        raise np.exceptions.AxisError(a, ndim)
    return a % ndim


def _reduction(name: str) -> Callable[..., Any]:
    """``x.max(axis=None, out=None, keepdims=False)``: also ``min``, ``all``, ``any``."""

    def method(
        self: Any, axis: Any = None, out: Any = None, keepdims: bool = False, **numpy_only: Any
    ) -> Any:
        _refuse_out(name, out)
        _refuse_extras(name, numpy_only)
        return getattr(_ns(self), name)(self, axis=axis, keepdims=keepdims)

    return _named(method, name)


def _arg_reduction(name: str) -> Callable[..., Any]:
    """``x.argmax(axis=None, out=None, *, keepdims=False)``: also ``argmin``."""

    def method(self: Any, axis: Any = None, out: Any = None, *, keepdims: bool = False) -> Any:
        _refuse_out(name, out)
        return getattr(_ns(self), name)(self, axis=axis, keepdims=keepdims)

    return _named(method, name)


def _typed_reduction(name: str) -> Callable[..., Any]:
    """``x.sum(axis=None, dtype=None, out=None, keepdims=False)``: also ``prod`` and ``mean``
    (the standard's ``mean`` has no ``dtype``: the array is cast first, as NumPy computes in
    that dtype)."""

    def method(
        self: Any,
        axis: Any = None,
        dtype: Any = None,
        out: Any = None,
        keepdims: bool = False,
        **numpy_only: Any,
    ) -> Any:
        _refuse_out(name, out)
        _refuse_extras(name, numpy_only)
        xp = _ns(self)
        if name == "mean":
            x = self if dtype is None else xp.astype(self, dtype, copy=False)
            return xp.mean(x, axis=axis, keepdims=keepdims)
        return getattr(xp, name)(self, axis=axis, dtype=dtype, keepdims=keepdims)

    return _named(method, name)


def _moment(name: str) -> Callable[..., Any]:
    """``x.std(axis=None, dtype=None, out=None, ddof=0, keepdims=False)``: also ``var``."""

    def method(
        self: Any,
        axis: Any = None,
        dtype: Any = None,
        out: Any = None,
        ddof: float = 0,
        keepdims: bool = False,
        **numpy_only: Any,
    ) -> Any:
        _refuse_out(name, out)
        _refuse_extras(name, numpy_only)
        xp = _ns(self)
        x = self if dtype is None else xp.astype(self, dtype, copy=False)
        return getattr(xp, name)(x, axis=axis, correction=ddof, keepdims=keepdims)

    return _named(method, name)


def _cumulative(name: str, function: str) -> Callable[..., Any]:
    """``x.cumsum(axis=None, dtype=None, out=None)`` (``axis=None``: over the flattened array):
    also ``cumprod``."""

    def method(self: Any, axis: Any = None, dtype: Any = None, out: Any = None) -> Any:
        _refuse_out(name, out)
        xp = _ns(self)
        x = xp.reshape(self, (-1,)) if axis is None else self
        return getattr(xp, function)(x, axis=0 if axis is None else axis, dtype=dtype)

    return _named(method, name)


def _named(method: Callable[..., Any], name: str) -> Callable[..., Any]:
    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"NumPy's ``x.{name}(...)``: {STANDARD[name]}."
    return method


class ArrayMethods:
    """NumPy's array methods with an arraycore meaning, each through the array's namespace.

    Results are arraycore arrays where NumPy returns NumPy scalars (``x.sum()`` is a 0-d array:
    ``float(x.sum())`` or ``x.sum().item()`` gives the Python number), with NumPy's values,
    dtypes and shapes.
    """

    __slots__ = ()
    shape: tuple[int, ...]
    dtype: np.dtype

    sum = _typed_reduction("sum")
    prod = _typed_reduction("prod")
    mean = _typed_reduction("mean")
    std = _moment("std")
    var = _moment("var")
    min = _reduction("min")
    max = _reduction("max")
    all = _reduction("all")
    any = _reduction("any")
    argmin = _arg_reduction("argmin")
    argmax = _arg_reduction("argmax")
    cumsum = _cumulative("cumsum", "cumulative_sum")
    cumprod = _cumulative("cumprod", "cumulative_prod")

    def reshape(self, *shape: Any, order: str = "C", copy: bool | None = None) -> Any:
        """``x.reshape(2, 3)``, ``x.reshape((2, 3))``, ``x.reshape(-1)``: as NumPy's."""
        _refuse_order("reshape", order)
        if len(shape) == 1 and not isinstance(shape[0], int | np.integer):
            shape = tuple(shape[0])
        return _ns(self).reshape(self, tuple(operator.index(s) for s in shape), copy=copy)

    def astype(
        self,
        dtype: Any,
        order: str = "K",
        casting: str = "unsafe",
        subok: bool = True,
        copy: bool = True,
    ) -> Any:
        """This array as ``dtype`` (``"float32"``, ``float``, ``xp.int8``, ...), a copy unless
        ``copy=False`` and the dtype is already ``dtype``; ``casting`` as NumPy's."""
        _refuse_order("astype", order)
        xp = _ns(self)
        if casting != "unsafe":
            target = np.dtype(dtype)
            if not np.can_cast(self.dtype, target, casting=casting):  # type: ignore[arg-type]
                raise TypeError(
                    f"x.astype: cannot cast {self.dtype} to {target} with casting={casting!r}"
                )
        return xp.astype(self, dtype, copy=copy)

    def tolist(self) -> Any:
        """The elements as (nested) Python lists of Python scalars, copied to the host."""
        return _ns(self).to_numpy(self).tolist()

    def item(self, *args: Any) -> Any:
        """A Python scalar: the one element (no arguments), the element at a flat index
        (``x.item(3)``) or at an index per axis (``x.item(1, 2)``, ``x.item((1, 2))``)."""
        xp = _ns(self)
        if not args:
            if math.prod(self.shape) != 1:
                raise ValueError("can only convert an array of size 1 to a Python scalar")
            return xp.to_numpy(self).item()
        if len(args) == 1 and isinstance(args[0], tuple):
            args = args[0]
        if len(args) == 1:
            element = xp.reshape(self, (-1,))[operator.index(args[0])]
        elif len(args) == len(self.shape):
            element = self[tuple(operator.index(a) for a in args)]  # type: ignore[index]
        else:
            raise ValueError(f"x.item: {len(args)} indices for an array of shape {self.shape}")
        return xp.to_numpy(element).item()

    def copy(self, order: str = "C") -> Any:
        """A copy of this array (never a view)."""
        _refuse_order("copy", order)
        return _ns(self).asarray(self, copy=True)

    def flatten(self, order: str = "C") -> Any:
        """The elements in C order, as a new 1-D array (a copy)."""
        _refuse_order("flatten", order)
        return _ns(self).reshape(self, (-1,), copy=True)

    def ravel(self, order: str = "C") -> Any:
        """The elements in C order, as a 1-D array (a view where the backend can)."""
        _refuse_order("ravel", order)
        return _ns(self).reshape(self, (-1,))

    def squeeze(self, axis: Any = None) -> Any:
        """Without the size-1 axes ``axis`` names (all of them by default)."""
        if axis is None:
            axis = tuple(i for i, s in enumerate(self.shape) if s == 1)
        return _ns(self).squeeze(self, axis)

    def transpose(self, *axes: Any) -> Any:
        """``x.transpose()`` reverses the axes; ``x.transpose(1, 0)`` and
        ``x.transpose((1, 0))`` permute them."""
        if len(axes) == 1 and (axes[0] is None or not isinstance(axes[0], int | np.integer)):
            axes = () if axes[0] is None else tuple(axes[0])
        perm = (
            tuple(reversed(range(len(self.shape))))
            if not axes
            else tuple(map(operator.index, axes))
        )
        return _ns(self).permute_dims(self, perm)

    def swapaxes(self, axis1: int, axis2: int) -> Any:
        """The array with axes ``axis1`` and ``axis2`` interchanged."""
        perm = list(range(len(self.shape)))
        a, b = _axis(axis1, len(self.shape)), _axis(axis2, len(self.shape))
        perm[a], perm[b] = b, a
        return _ns(self).permute_dims(self, tuple(perm))

    def clip(self, min: Any = None, max: Any = None, out: Any = None, **numpy_only: Any) -> Any:  # noqa: A002
        """Elements limited to ``[min, max]``."""
        _refuse_out("clip", out)
        _refuse_extras("clip", numpy_only)
        return _ns(self).clip(self, min, max)

    def round(self, decimals: int = 0, out: Any = None) -> Any:
        """Elements rounded to ``decimals`` decimals, halves to even (NumPy's scaling)."""
        _refuse_out("round", out)
        xp = _ns(self)
        decimals = operator.index(decimals)
        if decimals == 0:
            return xp.round(self)
        if self.dtype.kind in "iub":
            if decimals > 0:
                return xp.asarray(self, copy=True)
            raise TypeError("x.round(decimals<0) of integers is NumPy-only; round floats instead")
        if decimals > 0:
            scale = 10.0**decimals
            return xp.divide(xp.round(xp.multiply(self, scale)), scale)
        scale = 10.0**-decimals
        return xp.multiply(xp.round(xp.divide(self, scale)), scale)

    def conj(self) -> Any:
        """The complex conjugate (the array's values, for real dtypes)."""
        return _ns(self).conj(self)

    def conjugate(self) -> Any:
        """The complex conjugate, as :meth:`conj`."""
        return _ns(self).conj(self)

    @property
    def real(self) -> Any:
        """The real part (the array's values, for real dtypes)."""
        return _ns(self).real(self)

    @property
    def imag(self) -> Any:
        """The imaginary part (zeros, for real dtypes)."""
        return _ns(self).imag(self)

    def dot(self, b: Any, out: Any = None) -> Any:
        """NumPy's ``dot``: inner product of vectors, matrix product of 2-D arrays, and over the
        last axis of ``x`` and the second-to-last of ``b`` otherwise."""
        _refuse_out("dot", out)
        xp = _ns(self)
        if not hasattr(b, "__array_namespace__"):
            b = xp.asarray(b)  # as NumPy's: x.dot(2) of float32 is float64
        if len(self.shape) == 0 or b.ndim == 0:
            return xp.multiply(self, b)
        if len(self.shape) <= 2 and b.ndim <= 2:
            return xp.matmul(self, b)
        return xp.tensordot(self, b, axes=((len(self.shape) - 1,), (max(b.ndim - 2, 0),)))

    def nonzero(self) -> Any:
        """The indices of the non-zero elements, one index array per axis."""
        return _ns(self).nonzero(self)

    def fill(self, value: Any) -> None:
        """Set every element to ``value`` (cast to the array's dtype, as NumPy does), in place."""
        if isinstance(value, bool | int | float | np.generic):
            value = np.asarray(value).astype(self.dtype).item()
        self[...] = value  # type: ignore[index]

    def sort(
        self, axis: int = -1, kind: str | None = None, order: Any = None, *, stable: Any = None
    ) -> None:
        """Sort in place along ``axis`` (``kind``: any of NumPy's; values are the same)."""
        if order is not None:
            raise ValueError("x.sort(order=...): arraycore arrays have no fields (NumPy-only)")
        self[...] = _ns(self).sort(self, axis=axis)  # type: ignore[index]

    def argsort(
        self,
        axis: int | None = -1,
        kind: str | None = None,
        order: Any = None,
        *,
        stable: Any = None,
    ) -> Any:
        """Indices that sort along ``axis`` (``None``: the flattened array). Always stable: where
        NumPy's default quicksort breaks ties otherwise, both are valid sorts."""
        if order is not None:
            raise ValueError("x.argsort(order=...): arraycore arrays have no fields (NumPy-only)")
        xp = _ns(self)
        if axis is None:
            return xp.argsort(xp.reshape(self, (-1,)), axis=0)
        return xp.argsort(self, axis=axis)

    def repeat(self, repeats: Any, axis: int | None = None) -> Any:
        """Each element repeated ``repeats`` times (``axis=None``: of the flattened array)."""
        xp = _ns(self)
        if isinstance(repeats, list | tuple | np.ndarray):
            repeats = xp.asarray(repeats)
        return xp.repeat(self, repeats, axis=axis)

    def take(
        self, indices: Any, axis: int | None = None, out: Any = None, mode: str = "raise"
    ) -> Any:
        """Elements at ``indices`` along ``axis`` (``None``: of the flattened array); the result
        has the indices' shape in place of that axis. ``mode``: ``"raise"``, ``"wrap"``,
        ``"clip"``, as NumPy's."""
        _refuse_out("take", out)
        if mode not in ("raise", "wrap", "clip"):
            raise ValueError(f"x.take(mode={mode!r}): mode is 'raise', 'wrap' or 'clip'")
        xp = _ns(self)
        x: Any = xp.reshape(self, (-1,)) if axis is None else self
        a = 0 if axis is None else _axis(axis, len(x.shape))
        idx = indices if hasattr(indices, "__array_namespace__") else xp.asarray(indices)
        n = x.shape[a]
        if mode == "wrap" and n:
            idx = xp.remainder(idx, n)
        elif mode == "clip":
            idx = xp.clip(idx, 0, max(n - 1, 0))
        got = xp.take(x, xp.reshape(idx, (-1,)), axis=a)
        return xp.reshape(got, (*x.shape[:a], *idx.shape, *x.shape[a + 1 :]))

    def diagonal(self, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Any:
        """The diagonal over ``axis1`` and ``axis2``, as a last axis (NumPy's order)."""
        if len(self.shape) < 2:
            raise ValueError("diag requires an array of at least two dimensions")
        a, b = _axis(axis1, len(self.shape)), _axis(axis2, len(self.shape))
        if a == b:
            raise ValueError("axis1 and axis2 cannot be the same")
        xp = _ns(self)
        perm = (*(i for i in range(len(self.shape)) if i not in (a, b)), a, b)
        return xp.linalg.diagonal(xp.permute_dims(self, perm), offset=offset)

    def trace(
        self, offset: int = 0, axis1: int = 0, axis2: int = 1, dtype: Any = None, out: Any = None
    ) -> Any:
        """The sum of :meth:`diagonal` (its dtype as ``sum``'s)."""
        _refuse_out("trace", out)
        diag = ArrayMethods.diagonal(self, offset, axis1, axis2)
        return _ns(self).sum(diag, axis=-1, dtype=dtype)

    def searchsorted(self, v: Any, side: str = "left", sorter: Any = None) -> Any:
        """Where the values ``v`` would go in this sorted 1-D array to keep it sorted."""
        xp = _ns(self)
        x = self
        if isinstance(v, int | float):  # a Python scalar takes the array's dtype where it fits
            v = xp.asarray(v, dtype=np.result_type(self.dtype, v))
        elif not hasattr(v, "__array_namespace__"):
            host = np.asarray(v)
            same_kind = host.dtype.kind == self.dtype.kind
            v = xp.asarray(host, dtype=self.dtype if same_kind else None)
        if v.dtype != self.dtype:
            common = xp.result_type(self.dtype, v.dtype)
            x, v = xp.astype(self, common, copy=False), xp.astype(v, common, copy=False)
        if sorter is not None and not hasattr(sorter, "__array_namespace__"):
            sorter = xp.asarray(sorter)
        return xp.searchsorted(x, v, side=side, sorter=sorter)

    def tobytes(self, order: str = "C") -> bytes:
        """The elements' bytes, copied to the host."""
        return bytes(_ns(self).to_numpy(self).tobytes(order=order))

    @property
    def nbytes(self) -> int:
        """Bytes of the elements (``size * itemsize``), as NumPy counts them."""
        return math.prod(self.shape) * self.dtype.itemsize

    @property
    def itemsize(self) -> int:
        """Bytes of one element."""
        return self.dtype.itemsize


#: The methods above, as :class:`strict` removes and restores them.
_METHODS: dict[str, Any] = {name: ArrayMethods.__dict__[name] for name in STANDARD}
_STRICT = [False]


class strict:  # noqa: N801 - used as a function and as a context manager, like a function
    """Strict mode: arrays of ``ArrayBase`` backends lose NumPy's methods, keeping the standard's.

    ``arraycore.strict()`` (or ``ARRAYCORE_STRICT=1`` in the environment) turns it on for the
    process; ``with arraycore.strict():`` for a block, restoring the previous mode after it;
    ``arraycore.strict(False)`` turns it off. Then ``x.sum()`` raises an ``AttributeError`` that
    names the standard's call (``xp.sum(x, ...)``), and ``hasattr(x, "sum")`` is false, as for an
    array of a library that only has the standard's methods: a check that code is portable.

    It removes the methods from the class (no cost per call, on or off), so it is process-wide,
    not per thread. NumPy-backend arrays are ``numpy.ndarray`` and keep their methods: run the
    check on a device backend (the test backends, OpenCL on PoCL).
    """

    def __init__(self, enabled: bool = True) -> None:
        self._previous = _STRICT[0]
        _set_strict(bool(enabled))

    def __enter__(self) -> strict:
        return self

    def __exit__(self, *exc: object) -> None:
        _set_strict(self._previous)

    @staticmethod
    def enabled() -> bool:
        """Whether strict mode is on."""
        return _STRICT[0]


def _set_strict(enabled: bool) -> None:
    if enabled == _STRICT[0]:
        return
    for name, method in _METHODS.items():
        if enabled:
            delattr(ArrayMethods, name)
        else:
            setattr(ArrayMethods, name, method)
    _STRICT[0] = enabled


class _NoAttribute(AttributeError):
    """What ``x.name`` raises for a public name the array lacks; the message (with its "did you
    mean", found with difflib) is built only when shown, since ``hasattr`` and
    ``getattr(x, name, default)`` throw it away."""

    def __init__(self, array: Any, name: str) -> None:
        super().__init__(name)
        self._array = array
        self._name = name

    def __str__(self) -> str:
        return missing_message(self._array, self._name)


def missing_message(array: Any, name: str) -> str:
    """The text of ``x.name``'s AttributeError: the standard's call (strict mode), the portable
    call (NumPy-only names), else Python's message with a close match."""
    kind = type(array).__name__
    try:
        backend = f" (backend {_ns(array).name!r})"
    except Exception:  # the message must not fail
        backend = ""
    if name in STANDARD and _STRICT[0]:
        return (
            f"{kind!r}{backend} has no method {name!r} in arraycore's strict mode: it is not "
            f"in the Array API standard; write {STANDARD[name]} (arraycore.strict(False) "
            f"turns strict mode off)"
        )
    if name in NUMPY_ONLY:
        return f"{kind!r}{backend} has no method {name!r} (NumPy-only); write {NUMPY_ONLY[name]}"
    if name in TORCH_HABITS:
        return (
            f"{kind!r}{backend} has no method {name!r} (PyTorch's tensor method); "
            f"write {TORCH_HABITS[name]}"
        )
    text = f"{kind!r} object has no attribute {name!r}"
    public = [n for n in dir(type(array)) if not n.startswith("_")]
    close = difflib.get_close_matches(name, public, n=1)
    return f"{text}. Did you mean: {close[0]!r}?" if close else text


def no_attribute(array: Any, name: str) -> AttributeError:
    """The AttributeError of ``array.name``: plain and immediate for private and dunder names
    (protocol probes such as ``__cuda_array_interface__``, pickling, unset slots)."""
    if name.startswith("_"):
        return AttributeError(f"{type(array).__name__!r} object has no attribute {name!r}")
    return _NoAttribute(array, name)


if os.environ.get("ARRAYCORE_STRICT", "").strip() not in ("", "0"):
    strict(True)
