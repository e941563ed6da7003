"""Data types: arraycore's dtypes are NumPy dtype objects on every backend.

Promotion follows NumPy 2 (NEP 50), which agrees with the Array API standard wherever the
standard defines a result, and extends it for mixed kinds (int with float gives float). The
result dtype of every function is in :mod:`arraycore._dtype_rules` (``docs/dtypes.md``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

DTYPES: tuple[str, ...] = (
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "float16",
    "float32",
    "float64",
)
"""The dtype names arraycore supports; ``float16`` and ``float64`` depend on the device."""


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


def finfo(type: Any, /) -> np.finfo:  # noqa: A002 - the standard's parameter name
    """Machine limits of a floating dtype."""
    return np.finfo(_as_dtype(type))


def iinfo(type: Any, /) -> np.iinfo:  # noqa: A002
    """Machine limits of an integer dtype."""
    return np.iinfo(_as_dtype(type))


def isdtype(dtype: Any, kind: Any) -> bool:
    """Whether ``dtype`` is of ``kind`` (a dtype, a kind name such as ``"real floating"``, or a
    tuple of those)."""
    return bool(np.isdtype(np.dtype(dtype), kind))
