"""``ArrayBase``: operators and methods for a backend's own array class, from the namespace.

A backend whose arrays are its own class (not NumPy or CuPy arrays) subclasses
:class:`ArrayBase` and provides ``shape``, ``dtype`` and ``device``; arithmetic operators,
comparisons, indexing (basic, integer arrays, boolean masks), ``T``/``mT``,
``__array_namespace__`` and host conversion then come from the array's namespace, and so do
NumPy's array methods that have an arraycore meaning (``x.sum()``, ``x.reshape(2, 3)``,
``x.astype("float32")``, ``x.item()``, ...: :mod:`arraycore._array_methods`, ``docs/arrays.md``).
NumPy's other methods (``x.tofile``, ``x.view``) raise an ``AttributeError`` that names the
portable call.

Such arrays never mix silently with NumPy's: ``__array_ufunc__ = None`` makes NumPy's operators
defer to ours (which refuse host operands) and NumPy's ufuncs refuse them, ``__array_function__``
refuses NumPy's other functions, and ``__array__`` refuses implicit conversion
(``numpy.asarray(x)``), each with a ``TypeError`` that names ``to_numpy``, as CuPy does. DLPack
gives consumers a host copy when they ask for one (``numpy.from_dlpack(x, device="cpu",
copy=True)``) and a ``BufferError`` otherwise.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from . import _interop
from ._array_methods import ArrayMethods, _ns, no_attribute
from ._optable import ELEMENTWISE

#: Array API versions ``__array_namespace__(api_version=...)`` accepts: 2024.12 and the earlier
#: ones it contains.
API_VERSIONS = ("2021.12", "2022.12", "2023.12", "2024.12")


def _binary(name: str, reflected: bool = False) -> Any:
    def method(self: ArrayBase, other: Any) -> Any:
        xp = _ns(self)
        return getattr(xp, name)(other, self) if reflected else getattr(xp, name)(self, other)

    method.__name__ = f"__{'r' if reflected else ''}{name}__"
    return method


def _inplace(name: str) -> Any:
    def method(self: ArrayBase, other: Any) -> ArrayBase:
        getattr(_ns(self).inplace, name)(self, other, out=self)
        return self

    return method


class ArrayBase(ArrayMethods):
    """Mixin for backend array classes: everything the standard asks of an array object, and
    NumPy's array methods (:class:`arraycore._array_methods.ArrayMethods`)."""

    __slots__ = ()
    shape: tuple[int, ...]
    dtype: np.dtype
    device: Any

    #: NumPy's operators defer to this class's reflected ones, NumPy's ufuncs refuse it.
    __array_ufunc__ = None
    #: DLPack device type of the arrays (``kDLExtDev``; the OpenCL backend's say ``kDLOpenCL``).
    dlpack_device_type: ClassVar[int] = _interop.KDL_EXT_DEV

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise _interop.implicit_conversion(self)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        raise _interop.numpy_function(self, func)

    def __dlpack__(
        self,
        *,
        stream: Any = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> Any:
        """A DLPack capsule of a host copy, for ``dl_device=(1, 0)`` (CPU) only."""
        return _interop.dlpack_export(self, stream, max_version, dl_device, copy)

    def __dlpack_device__(self) -> tuple[int, int]:
        """(DLPack device type, index of the device among the backend's devices)."""
        return _interop.dlpack_device(self)

    @property
    def ndim(self) -> int:
        """Number of axes."""
        return len(self.shape)

    @property
    def size(self) -> int:
        """Number of elements."""
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def T(self) -> Any:  # noqa: N802 - the standard's name
        """Transpose of a 2-D array."""
        if self.ndim != 2:
            raise ValueError(f"T: only for 2-D arrays, got shape {self.shape}; use mT")
        return _ns(self).permute_dims(self, (1, 0))

    @property
    def mT(self) -> Any:  # noqa: N802
        """Transpose of the last two axes."""
        return _ns(self).matrix_transpose(self)

    def __array_namespace__(self, *, api_version: str | None = None) -> Any:
        """The namespace of this array's backend and device (the standard's entry point)."""
        if api_version is not None and api_version not in API_VERSIONS:
            raise ValueError(
                f"__array_namespace__: arraycore implements the Array API versions "
                f"{', '.join(API_VERSIONS)}, not {api_version!r}"
            )
        return _ns(self)

    def to_device(self, device: Any, /, *, stream: Any = None) -> Any:
        """This array on ``device`` of the same backend."""
        from ._registry import namespace

        xp = _ns(self)
        target = namespace(xp.name, device)
        return self if target is xp else target.asarray(xp.to_numpy(self))

    def __getitem__(self, key: Any) -> Any:
        return _ns(self).getitem(self, key)

    def __setitem__(self, key: Any, value: Any) -> None:
        _ns(self).setitem(self, key, value)

    __matmul__ = _binary("matmul")
    __rmatmul__ = _binary("matmul", reflected=True)
    __hash__ = None  # type: ignore[assignment]

    def _scalar(self, kind: type) -> Any:
        if self.size != 1:
            raise TypeError(f"only size-1 arrays convert to {kind.__name__}, got {self.shape}")
        return kind(_ns(self).to_numpy(self).reshape(()).item())

    def __bool__(self) -> bool:
        return bool(self._scalar(bool))

    def __int__(self) -> int:
        return int(self._scalar(int))

    def __float__(self) -> float:
        return float(self._scalar(float))

    def __complex__(self) -> complex:
        return complex(self._scalar(complex))

    def __index__(self) -> int:
        if self.dtype.kind not in "iu":
            raise TypeError(f"only integer arrays can be indices, got {self.dtype}")
        return int(self._scalar(int))

    def __iter__(self) -> Any:
        """The sub-arrays along the first axis, as ``x[0], x[1], ...`` (0-d: a TypeError)."""
        if not self.shape:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(self.shape[0]))

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def __repr__(self) -> str:
        xp = _ns(self)
        body = np.array2string(xp.to_numpy(self), separator=", ", prefix="array(")
        return f"array({body}, dtype={self.dtype}, backend={xp.name!r}, device={self.device!r})"

    def __str__(self) -> str:
        """The elements as NumPy prints them (``print(x)``: ``[1. 2.]``)."""
        return str(_ns(self).to_numpy(self))

    def __format__(self, spec: str) -> str:
        """``f"{loss:.4f}"`` of a 0-d array formats its value; other arrays take no spec."""
        if not self.shape:
            return format(_ns(self).to_numpy(self)[()], spec)  # a NumPy scalar, as NumPy's
        if spec:
            raise TypeError(f"unsupported format string passed to {type(self).__name__}.__format__")
        return str(self)

    def __contains__(self, value: Any) -> bool:
        """``value in x``: whether any element equals ``value``."""
        xp = _ns(self)
        return bool(xp.any(xp.equal(self, value)))

    def __copy__(self) -> Any:
        return _ns(self).asarray(self, copy=True)

    def __deepcopy__(self, memo: Any) -> Any:
        return _ns(self).asarray(self, copy=True)

    def __divmod__(self, other: Any) -> tuple[Any, Any]:
        xp = _ns(self)
        return xp.floor_divide(self, other), xp.remainder(self, other)

    def __rdivmod__(self, other: Any) -> tuple[Any, Any]:
        xp = _ns(self)
        return xp.floor_divide(other, self), xp.remainder(other, self)

    if not TYPE_CHECKING:  # mypy keeps checking attribute names

        def __getattr__(self, name: str) -> Any:
            raise no_attribute(self, name)


def _unary(name: str) -> Any:
    def method(self: ArrayBase) -> Any:
        return getattr(_ns(self), name)(self)

    return method


def _set_operators() -> None:
    """The operators of every op-table entry: ``(forward, reflected, in-place)`` for binary
    entries (``__and__``, ``__rand__``, ``__iand__``), the one operator of a unary entry."""
    for entry in ELEMENTWISE:
        if entry.arity == 1:
            for dunder in entry.operators:
                setattr(ArrayBase, dunder, _unary(entry.name))
            continue
        makers = (_binary, lambda name: _binary(name, reflected=True), _inplace)
        for dunder, make in zip(entry.operators, makers, strict=False):
            method = make(entry.name)
            method.__name__ = dunder
            setattr(ArrayBase, dunder, method)


_set_operators()
