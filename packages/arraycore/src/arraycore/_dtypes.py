"""Data types: arraycore's dtypes are NumPy dtype objects on every backend.

Promotion follows NumPy 2 (NEP 50), which agrees with the Array API standard wherever the
standard defines a result, and extends it for mixed kinds (int with float gives float). The
result dtype of every function is in :mod:`arraycore._dtype_rules` (``docs/dtypes.md``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

DTYPES: tuple[str, ...] = (
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float32",
    "float64",
)
"""The dtype names arraycore supports; ``float16`` and ``float64`` depend on the device.

``float16`` is outside the Array API standard: ``__array_namespace_info__().dtypes()`` lists it
only when asked for it by name (``dtypes(kind="float16")``)."""


_NAMES: dict[Any, str] = {}


def dtype_name(dtype: Any) -> str:
    """``dtype.name`` as a dict lookup: NumPy computes its ``name`` in Python (~3 us), and the
    device backends' kernels ask it on every call to choose a kernel."""
    try:
        return _NAMES[dtype]
    except KeyError:
        name = _NAMES[dtype] = str(getattr(dtype, "name", dtype))
        return name
    except TypeError:  # an unhashable dtype object
        return str(getattr(dtype, "name", dtype))


def _as_dtype(x: Any) -> Any:
    if hasattr(x, "dtype") and not isinstance(x, np.dtype | type):
        return x.dtype
    return x


def result_type(*arrays_and_dtypes: Any) -> np.dtype:
    """The dtype that results from combining the given arrays, dtypes and Python scalars."""
    if not arrays_and_dtypes:
        raise ValueError("result_type: at least one array or dtype is required")
    return np.result_type(*(_as_dtype(a) for a in arrays_and_dtypes))


def can_cast(from_: Any, to: Any, /) -> bool:
    """Whether ``from_`` converts to ``to`` without loss (NumPy's "safe" casting)."""
    return bool(np.can_cast(_as_dtype(from_), to))


@dataclass(frozen=True)
class finfo_object:  # noqa: N801 - the standard's name for what finfo returns
    """Machine limits of a floating dtype, as Python floats (the standard's ``finfo_object``)."""

    bits: int
    eps: float
    max: float
    min: float
    smallest_normal: float
    dtype: np.dtype


@dataclass(frozen=True)
class iinfo_object:  # noqa: N801
    """Machine limits of an integer dtype, as Python ints (the standard's ``iinfo_object``)."""

    bits: int
    max: int
    min: int
    dtype: np.dtype


def _info_dtype(fn: str, type: Any) -> np.dtype:  # noqa: A002
    try:
        dt: np.dtype = np.dtype(_as_dtype(type))
    except TypeError as exc:
        raise TypeError(f"{fn}: {type!r} is not a dtype or an array") from exc
    return dt


def finfo(type: Any, /) -> finfo_object:  # noqa: A002 - the standard's parameter name
    """Machine limits of a floating dtype (or of an array's dtype), as Python floats."""
    dt = _info_dtype("finfo", type)
    if dt.kind != "f":
        raise TypeError(f"finfo: {dt} is not a floating dtype (iinfo takes integer dtypes)")
    fi = np.finfo(dt)
    return finfo_object(
        int(fi.bits), float(fi.eps), float(fi.max), float(fi.min), float(fi.smallest_normal), dt
    )


def iinfo(type: Any, /) -> iinfo_object:  # noqa: A002
    """Machine limits of an integer dtype (or of an array's dtype), as Python ints."""
    dt = _info_dtype("iinfo", type)
    if dt.kind not in "iu":
        raise TypeError(f"iinfo: {dt} is not an integer dtype (finfo takes floating dtypes)")
    ii = np.iinfo(dt)
    return iinfo_object(int(ii.bits), int(ii.max), int(ii.min), dt)


def isdtype(dtype: Any, kind: Any) -> bool:
    """Whether ``dtype`` is of ``kind`` (a dtype, a kind name such as ``"real floating"``, or a
    tuple of those)."""
    return bool(np.isdtype(np.dtype(dtype), kind))
