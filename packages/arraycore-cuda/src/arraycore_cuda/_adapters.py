"""CuPy adapters of the CUDA backend: NumPy 2's ``sign``, an exact ``scatter_add`` for every
dtype, and ``from_dlpack`` onto one device."""

from __future__ import annotations

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

    ``cupyx.scatter_add`` uses CUDA atomics, which exist for int32, uint32, uint64, float32 and
    float64. int64 adds as uint64 (two's complement: the same bits); float16 (whose atomics need
    sm_70) accumulates in float32; narrower integers and bool go through int64 and back, which
    wraps exactly as ``numpy.add.at`` does.
    """
    import cupy
    import cupyx

    key = (slice(None),) * (axis % out.ndim) + (indices,)
    kind = out.dtype
    if kind in (np.int32, np.uint32, np.uint64, np.float32, np.float64):
        cupyx.scatter_add(out, key, values.astype(kind, copy=False))
    elif kind == np.int64:
        cupyx.scatter_add(out.view(np.uint64), key, values.astype(np.int64).view(np.uint64))
    elif kind == np.float16:
        wide = out.astype(np.float32)
        cupyx.scatter_add(wide, key, values.astype(np.float32))
        cupy.copyto(out, wide, casting="unsafe")
    else:
        wide = out.astype(np.int64)
        cupyx.scatter_add(wide.view(np.uint64), key, values.astype(np.int64).view(np.uint64))
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
                return cp.array(cp.asnumpy(arr), copy=True)
        if copy is False:
            raise BufferError("from_dlpack: host memory must be copied to the GPU (copy=False)")
        with cp.cuda.Device(index):
            return cp.array(np.from_dlpack(x), copy=True)

    return from_dlpack
