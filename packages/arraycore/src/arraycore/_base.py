"""The namespace's internals shared by every family of functions: argument checks, dtypes, promotion."""

from __future__ import annotations

import builtins
import contextlib
import operator
from typing import TYPE_CHECKING, Any

import numpy as np

from . import _checks, _dtype_rules, _interop
from ._dtypes import DTYPES
from .backend import Array, Backend, Shape
from .errors import BackendMismatchError

Scalar = bool | int | float
ArrayOrScalar = Any

_SCALAR_TYPES = (bool, int, float, np.bool_, np.integer, np.floating)


def _scalar_fits(value: Any, dtype: np.dtype) -> bool:
    """Whether a Python scalar may be combined with an array of ``dtype`` (Array API rules)."""
    if isinstance(value, bool | np.bool_):
        return True
    if isinstance(value, int | np.integer):
        return dtype.kind in "iuf"
    return dtype.kind == "f"


_BOOL = np.dtype("bool")
_INT64 = np.dtype("int64")


class NamespaceBase:
    """Helpers every family of namespace functions uses (see :class:`arraycore.Namespace`)."""

    _backend: Backend
    name: str
    _dtype_cache: dict[Any, np.dtype]
    _rule_cache: dict[tuple[str, Any, Any], np.dtype]

    if TYPE_CHECKING:
        # The families call one another's functions through the assembled Namespace.
        def __getattr__(self, name: str) -> Any: ...

    def _is_array(self, x: Any) -> builtins.bool:
        return self._backend.owns(x)

    def _check(self, op: str, *arrays: Any) -> None:
        """Reject arrays of another backend or another device (never a silent copy)."""
        bk = self._backend
        for x in arrays:
            if not bk.owns(x):
                raise _interop.mismatch(op, x, self)
            dev = bk.device_of(x)
            if dev != bk.device.id:
                raise BackendMismatchError(
                    f"{op}: array on device {dev!r} passed to the namespace of device "
                    f"{bk.device.id!r} of backend {self.name!r}; arrays never move implicitly: "
                    f"move it with xp.from_dlpack(x) (xp = this namespace)"
                )

    def _dtype(self, dtype: Any, op: str) -> np.dtype:
        """``dtype`` as a supported NumPy dtype of this device (cached: called per operation)."""
        try:
            return self._dtype_cache[dtype]
        except (KeyError, TypeError):
            pass
        try:
            dt: np.dtype = np.dtype(dtype)
        except TypeError as exc:
            raise TypeError(f"{op}: {dtype!r} is not a dtype") from exc
        if dt.name not in DTYPES:
            raise TypeError(f"{op}: dtype {dt.name} is not supported by arraycore")
        dt = dt if dt.isnative else dt.newbyteorder("=")  # '>f4' is float32 here
        if not self._backend.device.capabilities.get(dt.name, True):
            raise TypeError(
                f"{op}: device {self._backend.device} of backend {self.name!r} has no {dt.name}"
            )
        with contextlib.suppress(TypeError):  # unhashable dtype-likes are just not cached
            self._dtype_cache[dtype] = dt
        return dt

    def _default_float(self) -> np.dtype:
        if self._backend.device.capabilities.get("float64", True):
            return np.dtype("float64")
        return np.dtype("float32")

    def _float_dtype(self, dtype: Any, op: str) -> np.dtype:
        if dtype is None:
            return self._default_float()
        dt = self._dtype(dtype, op)
        if dt.kind != "f":
            raise TypeError(f"{op}: needs a floating dtype, got {dt.name}")
        return dt

    @staticmethod
    def _shape(shape: Any, op: str) -> Shape:
        if isinstance(shape, int | np.integer):
            shape = (shape,)
        try:
            result = tuple(operator.index(s) for s in shape)
        except TypeError as exc:
            raise TypeError(f"{op}: shape must be ints, got {shape!r}") from exc
        if any(s < 0 for s in result):
            raise ValueError(f"{op}: negative dimension in shape {result}")
        return result

    def _as_operand(self, x: ArrayOrScalar, dtype: np.dtype, op: str) -> Array:
        """A backend array of ``dtype`` from an array or a Python scalar."""
        if isinstance(x, _SCALAR_TYPES):
            return self._backend.full((), x.item() if isinstance(x, np.generic) else x, dtype)
        self._check(op, x)
        return x if x.dtype == dtype else self._backend.astype(x, dtype)

    def _promote(
        self, op: str, x1: ArrayOrScalar, x2: ArrayOrScalar, like: Any = None
    ) -> tuple[Array, Array]:
        """Both operands as backend arrays of the dtype ``op`` computes in: their promoted dtype
        (NumPy 2 / NEP 50), converted as ``op``'s dtype rule says (docs/dtypes.md)."""
        s1 = isinstance(x1, _SCALAR_TYPES) and not isinstance(x1, np.generic)
        s2 = isinstance(x2, _SCALAR_TYPES) and not isinstance(x2, np.generic)
        if s1 and s2:
            if like is None:
                raise TypeError(f"{op}: at least one argument must be an array")
            x1 = self._scalar(op, x1, like.dtype)
            s1 = False
        if not s1:
            self._check(op, x1)
        if not s2:
            self._check(op, x2)
        dt = self._compute_dtype(op, type(x1) if s1 else x1.dtype, type(x2) if s2 else x2.dtype)
        a = self._scalar(op, x1, dt) if s1 else self._cast(x1, dt)
        b = self._scalar(op, x2, dt) if s2 else self._cast(x2, dt)
        # a Python exponent is checked for free; an array exponent costs a wait on the device,
        # which arraycore.checks(False) skips like the index checks (the result is then undefined)
        if (
            op == "pow"
            and dt.kind == "i"
            and (x2 < 0 if s2 else _checks.enabled() and self._any_negative(b))
        ):
            raise ValueError(_dtype_rules.NEGATIVE_POWER.format(op=op))
        return a, b

    def _compute_dtype(self, op: str, a: Any, b: Any = None) -> np.dtype:
        """The dtype ``op`` computes in for operands given by dtype or Python scalar type
        (cached per namespace: called per operation)."""
        key = (op, a, b)
        try:
            return self._rule_cache[key]
        except KeyError:
            pass
        fdt = self._default_float()
        weak = {bool: True, int: 0, float: 0.0}
        operands = tuple(weak.get(o, o) for o in (a, b) if o is not None)
        dt = _dtype_rules.promoted(operands, fdt)
        if dt not in operands:  # int32 with float32 is float64, which the device may lack
            dt = self._dtype(dt, op)
        dt = _dtype_rules.compute_dtype(op, dt, fdt)
        self._rule_cache[key] = dt
        return dt

    def _scalar(self, op: str, value: Scalar, dtype: np.dtype) -> Array:
        """A 0-d array of ``dtype`` holding a Python scalar; an int must fit an integer dtype
        (int64 in the logical functions, which take it as a bool)."""
        if type(value) is int and (dtype.kind in "iu" or op in _dtype_rules.LOGICAL):
            _dtype_rules.check_python_int(op, value, dtype if dtype.kind in "iu" else _INT64)
        return self._backend.full((), value, dtype)

    def _any_negative(self, x: Array) -> builtins.bool:
        """Whether an integer array has a negative element: one reduction and a wait for it."""
        if not x.size:
            return False
        bk = self._backend
        negative = bk.binary("less", bk.reshape(x, (x.size,)), bk.full((), 0, x.dtype))
        return builtins.bool(bk.to_numpy(bk.reduce("any", negative, (0,), False)))

    def _constant_comparison(
        self, op: str, x1: ArrayOrScalar, x2: ArrayOrScalar
    ) -> builtins.bool | None:
        """The result of comparing an integer array with a Python int outside its dtype's
        range, where every element compares alike (exact, as in NumPy 2); else None."""
        if op in _dtype_rules.COMPARISONS:
            for value, x, first in ((x1, x2, True), (x2, x1, False)):
                if type(value) is int and getattr(x, "dtype", _BOOL).kind in "iu":
                    return _dtype_rules.out_of_range_comparison(op, value, x.dtype, first)
        return None

    def _cast(self, x: Array, dtype: np.dtype) -> Array:
        return x if x.dtype == dtype else self._backend.astype(x, dtype)

    def _check_out(self, op: str, out: Array, *inputs: Array) -> None:
        self._check(op, out)
        shape = np.broadcast_shapes(*(tuple(a.shape) for a in inputs))
        if tuple(out.shape) != shape:
            raise ValueError(
                f"inplace.{op}: out has shape {tuple(out.shape)}, the result has shape {shape}"
            )

    def _check_device(self, device: Any, op: str) -> None:
        if (
            device is not None
            and device != self._backend.device.id
            and not (isinstance(device, str) and device == str(self._backend.device.id))
        ):
            raise BackendMismatchError(
                f"{op}: device {device!r} is not this namespace's device "
                f"{self._backend.device.id!r} (backend {self.name!r}); "
                f"use arraycore.namespace({self.name!r}, device=...) for another device"
            )
