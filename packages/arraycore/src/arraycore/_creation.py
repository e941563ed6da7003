"""Creation functions: asarray, zeros, arange, linspace, eye, ... and astype."""

from __future__ import annotations

import builtins
from typing import Any

import numpy as np

from . import _interop
from ._base import NamespaceBase, Scalar
from .backend import Array


class CreationFunctions(NamespaceBase):
    """Creation functions: asarray, zeros, arange, linspace, eye, ... and astype."""

    # -- creation --------------------------------------------------------------------------
    def asarray(
        self,
        obj: Any,
        /,
        *,
        dtype: Any = None,
        device: Any = None,
        copy: builtins.bool | None = None,
    ) -> Array:
        """An array of this backend from an array, a NumPy array, a scalar or nested lists.

        Objects that carry a dtype (NumPy arrays and scalars, other libraries' arrays) keep it,
        in native byte order; Python scalars and lists take the default float and int64.
        """
        self._check_device(device, "asarray")
        return _interop.asarray(self, obj, dtype, copy)

    def from_numpy(self, a: np.ndarray, /) -> Array:
        """Copy a NumPy array to this backend's device, keeping its dtype."""
        return self.asarray(np.asarray(a), copy=True)

    def to_numpy(self, x: Array, /) -> np.ndarray:
        """Copy ``x`` to the host as a NumPy array (waits for the device)."""
        self._check("to_numpy", x)
        return self._backend.to_numpy(x)

    def from_dlpack(
        self, x: Any, /, *, device: Any = None, copy: builtins.bool | None = None
    ) -> Array:
        """Import an array through DLPack; arraycore's generic path copies through the host
        (an array of this namespace is returned as it is, or copied with ``copy=True``)."""
        self._check_device(device, "from_dlpack")
        return _interop.from_dlpack(self, x, copy)

    def full(
        self, shape: Any, fill_value: Scalar, *, dtype: Any = None, device: Any = None
    ) -> Array:
        """A new array filled with ``fill_value``; dtype inferred from it when not given."""
        self._check_device(device, "full")
        shape = self._shape(shape, "full")
        dt: np.dtype
        if dtype is None:
            if isinstance(fill_value, bool | np.bool_):
                dt = np.dtype("bool")
            elif isinstance(fill_value, int | np.integer):
                dt = np.dtype("int64")
            else:
                dt = self._default_float()
        else:
            dt = self._dtype(dtype, "full")
        return self._backend.full(shape, fill_value, dt)

    def empty(self, shape: Any, *, dtype: Any = None, device: Any = None) -> Array:
        """A new array (contents unspecified; arraycore's generic path zero-fills)."""
        shape = self._shape(shape, "empty")
        return self.full(shape, 0, dtype=self._float_or(dtype, "empty"), device=device)

    def zeros(self, shape: Any, *, dtype: Any = None, device: Any = None) -> Array:
        """A new array of zeros."""
        shape = self._shape(shape, "zeros")
        return self.full(shape, 0, dtype=self._float_or(dtype, "zeros"), device=device)

    def ones(self, shape: Any, *, dtype: Any = None, device: Any = None) -> Array:
        """A new array of ones."""
        shape = self._shape(shape, "ones")
        return self.full(shape, 1, dtype=self._float_or(dtype, "ones"), device=device)

    def _float_or(self, dtype: Any, op: str) -> np.dtype:
        return self._default_float() if dtype is None else self._dtype(dtype, op)

    def empty_like(self, x: Array, /, *, dtype: Any = None, device: Any = None) -> Array:
        """A new array with the shape (and dtype) of ``x``."""
        return self.full_like(x, 0, dtype=dtype, device=device)

    def zeros_like(self, x: Array, /, *, dtype: Any = None, device: Any = None) -> Array:
        """Zeros with the shape (and dtype) of ``x``."""
        return self.full_like(x, 0, dtype=dtype, device=device)

    def ones_like(self, x: Array, /, *, dtype: Any = None, device: Any = None) -> Array:
        """Ones with the shape (and dtype) of ``x``."""
        return self.full_like(x, 1, dtype=dtype, device=device)

    def full_like(
        self, x: Array, /, fill_value: Scalar, *, dtype: Any = None, device: Any = None
    ) -> Array:
        """``fill_value`` with the shape (and dtype) of ``x``."""
        self._check("full_like", x)
        return self.full(
            tuple(x.shape), fill_value, dtype=x.dtype if dtype is None else dtype, device=device
        )

    def arange(
        self,
        start: Scalar,
        /,
        stop: Scalar | None = None,
        step: Scalar = 1,
        *,
        dtype: Any = None,
        device: Any = None,
    ) -> Array:
        """Evenly spaced values in ``[start, stop)`` (computed on the host, then copied)."""
        self._check_device(device, "arange")
        if stop is None:
            start, stop = 0, start
        if step == 0:
            raise ValueError("arange: step must not be zero")
        if dtype is None:
            ints = all(isinstance(v, int | np.integer) for v in (start, stop, step))
            dt = np.dtype("int64") if ints else self._default_float()
        else:
            dt = self._dtype(dtype, "arange")
        return self._backend.from_numpy(np.arange(start, stop, step, dtype=dt))

    def linspace(
        self,
        start: Scalar,
        stop: Scalar,
        /,
        num: int,
        *,
        dtype: Any = None,
        device: Any = None,
        endpoint: builtins.bool = True,
    ) -> Array:
        """``num`` evenly spaced samples over ``[start, stop]`` (or ``[start, stop)``)."""
        self._check_device(device, "linspace")
        dt = self._float_dtype(dtype, "linspace")
        values = np.linspace(start, stop, num, endpoint=endpoint, dtype=np.float64)
        return self._backend.from_numpy(values.astype(dt))

    def eye(
        self,
        n_rows: int,
        n_cols: int | None = None,
        /,
        *,
        k: int = 0,
        dtype: Any = None,
        device: Any = None,
    ) -> Array:
        """A 2-D array with ones on the ``k``-th diagonal."""
        n_cols = n_rows if n_cols is None else n_cols
        rows = self.reshape(self.arange(n_rows), (n_rows, 1))
        cols = self.reshape(self.arange(n_cols), (1, n_cols))
        return self.astype(self.equal(self.add(rows, k), cols), self._float_or(dtype, "eye"))

    # -- dtypes ----------------------------------------------------------------------------------
    def astype(
        self, x: Array, dtype: Any, /, *, copy: builtins.bool = True, device: Any = None
    ) -> Array:
        """``x`` converted to ``dtype`` (a copy unless ``copy=False`` and nothing changes)."""
        self._check("astype", x)
        self._check_device(device, "astype")
        dt = self._dtype(dtype, "astype")
        if not copy and x.dtype == dt:
            return x
        return self._backend.astype(x, dt)

    # -- element-wise ----------------------------------------------------------------------------
