"""CuPy adapters of the CUDA backend: NumPy 2's ``sign``, an exact ``scatter_add`` for every
dtype, and ``from_dlpack`` onto one device."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from arraycore.backend import Array
from arraycore.errors import BackendMismatchError

_DLPACK_CUDA = frozenset({2, 3, 13})  # kDLCUDA, kDLCUDAHost, kDLCUDAManaged


def _sign(x: Array, /, *, out: Array | None = None) -> Array:
    """NumPy 2's ``sign``: -1, 0 or 1, and NaN for NaN (CuPy's ufunc gives 0 for NaN)."""
    import cupy

    result = cupy.sign(x, out=out)
    if x.dtype.kind == "f":
        cupy.copyto(result, x, where=cupy.isnan(x))
    return result


def _scatter_add(out: Array, indices: Array, values: Array, axis: int = 0) -> Array:
    """``out[..., indices[i], ...] += values[..., i, ...]``; repeated indices accumulate.

    ``cupy.add.at`` (CuPy 14 deprecates ``cupyx.scatter_add``, the same kernel) uses CUDA
    atomics, which exist for int32, uint32, uint64, float32 and float64. int64 adds as uint64 (two's complement: the same bits); float16 (whose atomics need
    sm_70) accumulates in float32; narrower integers and bool go through int64 and back, which
    wraps exactly as ``numpy.add.at`` does.
    """
    import cupy

    add_at = cupy.add.at
    key = (slice(None),) * (axis % out.ndim) + (indices,)
    kind = out.dtype
    if kind in (np.int32, np.uint32, np.uint64, np.float32, np.float64):
        add_at(out, key, values.astype(kind, copy=False))
    elif kind == np.int64:
        add_at(out.view(np.uint64), key, values.astype(np.int64).view(np.uint64))
    elif kind == np.float16:
        wide = out.astype(np.float32)
        add_at(wide, key, values.astype(np.float32))
        cupy.copyto(out, wide, casting="unsafe")
    else:
        wide = out.astype(np.int64)
        add_at(wide.view(np.uint64), key, values.astype(np.int64).view(np.uint64))
        cupy.copyto(out, wide != 0 if kind == np.bool_ else wide.astype(kind), casting="unsafe")
    return out


def _from_dlpack_for(cp: Any, index: int) -> Callable[..., Array]:
    """``from_dlpack`` for device ``index``: zero-copy from CUDA memory, a copy from the host.

    arraycore's generic ``from_dlpack`` goes through ``numpy.from_dlpack``, which refuses
    device memory; this one takes CUDA arrays (CuPy, PyTorch, JAX) directly.
    """

    def from_dlpack(x: Any, /, *, device: Any = None, copy: bool | None = None) -> Array:
        if (
            device is not None
            and device != index
            and str(device) != str(index)
            and getattr(device, "id", None) != index
        ):
            raise BackendMismatchError(
                f"from_dlpack: device {device!r} is not this namespace's device {index!r} "
                "(backend 'cuda'); use arraycore.namespace('cuda', device=...) for another"
            )
        kind = x.__dlpack_device__()[0] if hasattr(x, "__dlpack_device__") else None
        if kind in _DLPACK_CUDA:
            arr = cp.from_dlpack(x, copy=copy)
            if int(arr.device.id) == index:
                return arr
            if copy is False:
                raise BufferError(
                    f"from_dlpack: the array is on CUDA device {arr.device.id}, not {index}, "
                    "and copy=False forbids moving it"
                )
            with cp.cuda.Device(index):
                return _device_array(cp, cp.asnumpy(arr))
        if copy is False:
            raise BufferError("from_dlpack: host memory must be copied to the GPU (copy=False)")
        with cp.cuda.Device(index):
            return _device_array(cp, np.from_dlpack(x))

    return from_dlpack


# -- host values to the device, -0.0 kept ------------------------------------------------------------
def _device_array(cp: Any, value: Any, dtype: Any = None) -> Array:
    """``cupy.array(value, dtype)`` of a host value, a copy on the current device, with every
    bit of a 0-d value.

    Run on an H200 (CuPy 14.2, 2026-11-28): CuPy makes a 0-d array from a host value by filling
    it, and ``fill`` writes zeros with a memset, so ``cupy.array(np.float32(-0.0))`` is +0.0
    (``copysign(1, x)`` of it gave 1). A 0-d value is copied as one element and reshaped.
    """
    host = np.asarray(value, dtype=dtype)
    if host.ndim == 0:
        return cp.array(host.reshape(1), copy=True).reshape(())
    return cp.array(host, copy=True)


def _as_device(cp: Any, value: Any, dtype: Any) -> Array:
    """``value`` as a device array of ``dtype``: CuPy arrays cast without a copy where they have
    it already, host values through :func:`_device_array`."""
    if isinstance(value, cp.ndarray):
        return value.astype(dtype, copy=False)
    return _device_array(cp, value, dtype)


def _full(cp: Any, shape: Any, fill: Any, dtype: Any) -> Array:
    """``cupy.full``, with a negative zero kept (CuPy's fill writes zeros with a memset)."""
    if (
        np.dtype(dtype).kind == "f"
        and isinstance(fill, float | np.floating)
        and fill == 0
        and math.copysign(1.0, fill) < 0
    ):
        out = cp.zeros(shape, dtype=dtype)
        return cp.negative(out, out=out)
    return cp.full(shape, fill, dtype=dtype)


# -- NumPy's floor division and remainder of floats ------------------------------------------------
_DIVMOD_PREAMBLE = r"""
template <typename T> __device__ T arraycore_floordiv(T a, T b) {
    if (b == (T)0) return a / b;
    T mod = fmod(a, b);
    T div = (a - mod) / b;
    if (mod != (T)0 && ((b < (T)0) != (mod < (T)0))) div -= (T)1;
    if (div != (T)0) {
        T fl = floor(div);
        if (div - fl > (T)0.5) fl += (T)1;
        return fl;
    }
    return copysign((T)0, a / b);
}
template <typename T> __device__ T arraycore_pymod(T a, T b) {
    T mod = fmod(a, b);
    if (b == (T)0) return mod;
    if (mod != (T)0) {
        if ((b < (T)0) != (mod < (T)0)) mod += b;
        return mod;
    }
    return copysign((T)0, b);
}
"""


@functools.cache  # one set per CuPy module: the backend's primitives and its overrides share it
def _float_ufuncs(cp: Any) -> dict[str, Callable[..., Any]]:
    """``floor_divide``, ``remainder`` and ``copysign`` with NumPy's results for floats; other
    dtypes go to CuPy's ufuncs. Each takes ``(x1, x2, /, *, out=None)``.

    Run on an H200 (CuPy 14.2, 2026-11-27): CuPy's floor division and remainder divide first,
    so a quotient below the smallest normal float rounds to 0 before the floor
    (``-1.2e-38 // 2`` gave -0.0 where NumPy gives -1), and ``copysign(1, -0.0)`` gave 1. These
    run ``npy_divmod`` (the algorithm of the OpenCL backend's kernels) and CUDA's ``copysign``.
    """
    bodies = {
        "floor_divide": "q = arraycore_floordiv(a, b)",
        "remainder": "q = arraycore_pymod(a, b)",
        "copysign": "q = copysign(a, b)",
    }
    kernels: dict[str, Any] = {}

    def kernel(name: str) -> Any:
        if name not in kernels:
            kernels[name] = cp.ElementwiseKernel(
                "T a, T b", "T q", bodies[name], f"arraycore_{name}", preamble=_DIVMOD_PREAMBLE
            )
        return kernels[name]

    def make(name: str) -> Callable[..., Any]:
        other = getattr(cp, name)

        def fn(x1: Any, x2: Any, /, *, out: Any = None) -> Any:
            dtype = np.dtype(cp.result_type(x1, x2))
            if dtype.kind != "f":
                return other(x1, x2, out=out)
            wide = np.dtype(np.float32) if dtype == np.float16 else dtype
            a, b = (_as_device(cp, x, wide) for x in (x1, x2))
            if out is not None and out.dtype == wide:
                return kernel(name)(a, b, out)
            result = kernel(name)(a, b)
            if out is not None:
                out[...] = result
                return out
            return result.astype(dtype, copy=False)

        fn.__name__ = fn.__qualname__ = name
        return fn

    return {name: make(name) for name in bodies}


#: CuPy joins at most this many arrays without a pointer table copied from the host.
_CONCAT_TABLE = 8


def _concat_for(cp: Any) -> Callable[..., Array]:
    """``concat`` with the standard's error for 0-d arrays (CuPy raises TypeError)."""

    def concat(arrays: Any, /, *, axis: int | None = 0) -> Array:
        if axis is not None and any(getattr(a, "ndim", 1) == 0 for a in arrays):
            raise ValueError("concat: zero-dimensional arrays cannot be concatenated")
        arrays = list(arrays)
        if len(arrays) > _CONCAT_TABLE and cp.cuda.get_current_stream().is_capturing():
            # CuPy copies a table of pointers from the host for more than eight arrays, which a
            # capture refuses: join them eight at a time (the same values, a few more copies)
            joined = [
                cp.concat(arrays[i : i + _CONCAT_TABLE], axis=axis)
                for i in range(0, len(arrays), _CONCAT_TABLE)
            ]
            return concat(joined, axis=axis if axis is not None else 0)
        return cp.concat(arrays, axis=axis)

    return concat


def _tensordot_for(cp: Any) -> Callable[..., Array]:
    """``tensordot`` taking ``axes=([], [])`` as ``axes=0`` (the outer product), as NumPy does:
    CuPy 14 raises ValueError for it when an input is 0-d (H200 run, 2026-11-28)."""

    def tensordot(x1: Any, x2: Any, /, *, axes: Any = 2) -> Array:
        if not isinstance(axes, int | np.integer) and all(
            np.ndim(a) == 1 and len(a) == 0 for a in axes
        ):
            axes = 0
        return cp.tensordot(x1, x2, axes=axes)

    return tensordot


# -- assignment through index arrays: the last write wins, as in NumPy ------------------------------
def _has_index_arrays(cp: Any, key: Any) -> bool:
    parts = key if isinstance(key, tuple) else (key,)
    return any(
        isinstance(k, cp.ndarray | np.ndarray | list) and np.dtype(_dtype_of(k)).kind in "iu"
        for k in parts
    )


def _dtype_of(k: Any) -> Any:
    return k.dtype if hasattr(k, "dtype") else np.asarray(k).dtype


def _setitem_last_wins(cp: Any, x: Array, key: Any, value: Any) -> None:
    """``x[key] = value``; where integer index arrays name one element more than once, the
    last assignment in C order wins, as in NumPy (CuPy leaves the winner unspecified).

    One int32 ``scatter_max`` of each write's position in the selection finds the winners,
    then one masked assignment writes only them.
    """
    if not _has_index_arrays(cp, key):
        x[key] = value
        return
    selected = x[key]  # the selection's shape (and its bounds checked by CuPy's indexing)
    n = int(selected.size)
    if n == 0:
        return
    if n >= 2**31:
        x[key] = value
        return
    import cupyx

    order = cp.arange(n, dtype=cp.int32).reshape(selected.shape)
    winner = cp.full(x.shape, -1, dtype=cp.int32)
    cupyx.scatter_max(winner, key, order)
    chosen = winner >= 0
    values = cp.broadcast_to(_as_device(cp, value, x.dtype), selected.shape)
    x[chosen] = values.reshape(-1)[winner[chosen]]
