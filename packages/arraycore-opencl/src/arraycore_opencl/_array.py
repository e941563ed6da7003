"""``OpenCLArray``: a strided view of a pooled OpenCL buffer."""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from arraycore import ArrayBase

from ._runtime import DeviceRuntime


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """C-order strides (in elements) of ``shape``."""
    strides = []
    acc = 1
    for s in reversed(shape):
        strides.append(acc)
        acc *= max(s, 1)
    return tuple(reversed(strides))


class OpenCLArray(ArrayBase):
    """An array of the OpenCL backend: a device buffer plus offset, shape and strides.

    Offset and strides count elements, not bytes; strides may be zero (broadcast views) or
    negative (reversed slices). Operations are asynchronous: they enqueue kernels on the
    device's in-order queue and return at once; only host transfers (``to_numpy``, ``float()``,
    ``repr``) wait for the device. NumPy never reads them implicitly (``numpy.asarray(x)`` is a
    ``TypeError``); DLPack exports a host copy (``numpy.from_dlpack(x, device="cpu",
    copy=True)``) and reports the device as ``kDLOpenCL``.
    """

    __slots__ = ("_buf", "_dtype", "_offset", "_rt", "_shape", "_strides")
    dlpack_device_type: ClassVar[int] = 4  # kDLOpenCL

    def __init__(
        self,
        rt: DeviceRuntime,
        buf: Any,
        shape: tuple[int, ...],
        dtype: np.dtype,
        strides: tuple[int, ...] | None = None,
        offset: int = 0,
    ) -> None:
        self._rt = rt
        self._buf = buf
        self._shape = shape
        self._dtype = dtype
        self._strides = contiguous_strides(shape) if strides is None else strides
        self._offset = offset

    @property
    def shape(self) -> tuple[int, ...]:  # type: ignore[override]
        """The array's shape."""
        return self._shape

    @property
    def dtype(self) -> np.dtype:  # type: ignore[override]
        """The array's dtype (a NumPy dtype; bool is stored as one byte)."""
        return self._dtype

    @property
    def device(self) -> str:
        """The device id, ``"platform:device"`` (e.g. ``"0:0"``)."""
        return self._rt.id

    @property
    def strides(self) -> tuple[int, ...]:
        """Strides in elements (not bytes, unlike NumPy)."""
        return self._strides

    @property
    def offset(self) -> int:
        """Offset of the first element in the buffer, in elements."""
        return self._offset

    @property
    def buffer(self) -> Any:
        """The underlying ``pyopencl`` buffer (shared by views of the same array)."""
        return self._buf

    @property
    def is_contiguous(self) -> bool:
        """Whether the elements lie in C order without gaps."""
        if math.prod(self._shape) <= 1:
            return True
        expected = contiguous_strides(self._shape)
        return all(
            s == e for s, e, n in zip(self._strides, expected, self._shape, strict=True) if n != 1
        )


def _collapse(
    shape: tuple[int, ...], strides: list[tuple[int, ...]]
) -> tuple[tuple[int, ...], list[tuple[int, ...]]]:
    """Drop size-1 axes and merge axes that are contiguous in every operand (at least 1 axis)."""
    dims = [(s, [st[i] for st in strides]) for i, s in enumerate(shape) if s != 1]
    if not dims:
        return (1,), [(0,) for _ in strides]
    merged = [dims[0]]
    for size, sts in dims[1:]:
        psize, psts = merged[-1]
        if all(p == c * size for p, c in zip(psts, sts, strict=True)):
            merged[-1] = (psize * size, sts)
        else:
            merged.append((size, sts))
    return tuple(m[0] for m in merged), [
        tuple(m[1][i] for m in merged) for i in range(len(strides))
    ]


def _broadcast_strides(x: OpenCLArray, shape: tuple[int, ...]) -> tuple[int, ...]:
    """Strides of ``x`` broadcast to ``shape`` (0 on new or stretched axes)."""
    if x.shape == shape:
        return x.strides
    lead = len(shape) - len(x.shape)
    if lead < 0 or any(s not in (1, t) for s, t in zip(x.shape, shape[lead:], strict=True)):
        raise ValueError(f"shape {tuple(x.shape)} does not broadcast to {tuple(shape)}")
    out = [0] * lead
    for s, st, target in zip(x.shape, x.strides, shape[lead:], strict=True):
        out.append(st if s == target else 0)
    return tuple(out)
