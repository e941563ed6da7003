"""The OpenCL backend: arraycore's primitives as OpenCL kernels, matmul through CLBlast."""

from __future__ import annotations

import ctypes.util
import math
from collections.abc import Callable
from importlib import metadata
from typing import Any, ClassVar

import numpy as np

from arraycore.backend import (
    OPTIONAL_OPS,
    PROTOCOL_VERSION,
    Array,
    Backend,
    BackendUnavailable,
    Device,
    DeviceNotFound,
    Key,
    Shape,
    check_fuse_args,
)

from . import _codegen, _cpu_gemm, _gemm, _gemm_tuning, _runtime
from ._array import OpenCLArray, _broadcast_strides, _collapse, contiguous_strides
from ._nn_kernels import OpenCLKernels
from ._runtime import DTYPE_NAME as _NAME
from ._runtime import DeviceRuntime

SYSTEM_INSTALL = "apt-get install pocl-opencl-icd ocl-icd-opencl-dev libclblast-dev"
PIP_INSTALL = 'pip install "arraycore[opencl]"'
INSTALL = (
    f"{SYSTEM_INSTALL} (Debian/Ubuntu; conda-forge: conda install -c conda-forge pocl clblast; "
    f"Homebrew: brew install clblast), then {PIP_INSTALL}"
)

#: Reductions longer than this are split into chunks of ``_CHUNK`` and finished in a 2nd pass.
_SPLIT = 2048
_CHUNK = 512


#: Products of at most this many multiply-adds (batch included) use the plain kernel: below it,
#: CLBlast's per-call setup (milliseconds on PoCL) costs more than the product.
_SMALL_GEMM = 1 << 20

#: ``take`` from a contiguous array whose slices (the items after the axis) are at least this
#: long runs as rows of those items (``take_rows``: no index arithmetic per item).
_TAKE_ROW_ITEMS = 16

_IDENTITY: dict[str, bool | int] = {"sum": 0, "prod": 1, "any": False, "all": True}


class OpenCLBackend(Backend, OpenCLKernels):
    """arraycore on any OpenCL device (GPUs, and CPUs through PoCL), with CLBlast GEMM.

    ``ARRAYCORE_DEVICE`` picks the device: a flat index over all platforms' devices (``0``),
    a ``"platform:device"`` index pair (``"0:1"``), or a substring of the device or platform
    name (``"pthread"``, ``"NVIDIA"``). ``python -m arraycore info`` lists them.
    """

    name: ClassVar[str] = "opencl"
    install_hint: ClassVar[str] = INSTALL
    protocol_version: ClassVar[tuple[int, int]] = PROTOCOL_VERSION
    # a kernel per op-table primitive, generated from its kernel expression
    optional_primitives: ClassVar[frozenset[str]] = frozenset(OPTIONAL_OPS)

    def __init__(self, device: str | int | None = None) -> None:
        super().__init__(device)
        p, d = (int(v) for v in str(self.device.id).split(":"))
        table = {(tp, td): dev for tp, td, _plat, dev in _runtime.device_table()}
        self.rt: DeviceRuntime = _runtime.runtime(p, d, table[(p, d)])
        self._supported = frozenset(np.dtype(n) for n in self.rt.dtypes)
        #: element-wise launch layouts by operand shapes and strides (:meth:`_layout`)
        self._layouts: dict[tuple[Any, ...], tuple[Any, Any, Any]] = {}

    # -- discovery -------------------------------------------------------------------------------
    @classmethod
    def probe(cls) -> None:
        """Check pyopencl, pyclblast (and so libclblast) and at least one OpenCL platform."""
        try:
            import pyopencl
        except ImportError as exc:
            raise BackendUnavailable(
                f"pyopencl is not installed ({exc}); install it with: {PIP_INSTALL}"
            ) from exc
        try:
            import pyclblast  # noqa: F401
        except ImportError as exc:
            raise BackendUnavailable(
                f"pyclblast cannot be imported ({exc}): CLBlast comes from the system. "
                f"Install it with: {INSTALL}"
            ) from exc
        try:
            platforms = pyopencl.get_platforms()
        except Exception as exc:
            raise BackendUnavailable(
                f"no OpenCL platform found ({type(exc).__name__}: {exc}); install an OpenCL "
                f"driver (ICD), e.g. PoCL for CPUs: {SYSTEM_INSTALL}"
            ) from exc
        if not platforms or not _runtime.device_table():
            raise BackendUnavailable(
                f"no OpenCL device found; install an OpenCL driver (ICD), e.g. PoCL for CPUs: "
                f"{SYSTEM_INSTALL}"
            )

    @classmethod
    def version(cls) -> str:
        """pyopencl, pyclblast, the CLBlast library and the OpenCL platforms."""
        parts = []
        for dist in ("pyopencl", "pyclblast"):
            try:
                parts.append(f"{dist} {metadata.version(dist)}")
            except metadata.PackageNotFoundError:
                parts.append(f"{dist} missing")
        lib = ctypes.util.find_library("clblast")
        parts.append(f"CLBlast {lib}" if lib else "CLBlast not found")
        parts.append(_runtime.describe_gemm())
        parts.append(_gemm_tuning.describe())
        try:
            import pyopencl

            for platform in pyopencl.get_platforms():
                parts.append(f"platform {platform.name.strip()} ({platform.version.strip()})")
        except Exception as exc:
            parts.append(f"no OpenCL platform ({exc})")
        return ", ".join(parts)

    @classmethod
    def devices(cls) -> list[Device]:
        """Every device of every OpenCL platform, in platform then device order."""
        found = []
        for p, d, platform, dev in _runtime.device_table():
            found.append(
                Device(
                    "opencl",
                    f"{p}:{d}",
                    f"{dev.name.strip()} ({platform.name.strip()})",
                    {"float64": _runtime.has_fp64(dev), "float16": _runtime.has_fp16(dev)},
                )
            )
        return found

    @classmethod
    def select_device(cls, devices: list[Device], selector: str | int | None) -> Device:
        """A flat index, a ``"platform:device"`` pair, or a name substring; first by default."""
        if selector is None or str(selector).strip() == "":
            return devices[0]
        text = str(selector).strip()
        if text.isdigit() and int(text) < len(devices):
            return devices[int(text)]
        for dev in devices:
            if text == str(dev.id):
                return dev
        if not text.replace(":", "").isdigit():
            for dev in devices:
                if text.lower() in dev.name.lower():
                    return dev
        listing = "; ".join(f"{i} or {d.id}: {d.name}" for i, d in enumerate(devices))
        raise DeviceNotFound(
            f"backend 'opencl' has no device matching {selector!r} (ARRAYCORE_DEVICE takes an "
            f"index, a 'platform:device' pair or a name substring); devices are: {listing}"
        )

    def owns(self, x: Any) -> bool:
        """Whether ``x`` is an :class:`OpenCLArray` (of any device)."""
        return isinstance(x, OpenCLArray)

    def device_of(self, x: Array) -> Any:
        """The ``"platform:device"`` id of ``x``."""
        return x.device

    # -- helpers -----------------------------------------------------------------------------------
    def _check_dtype(self, dtype: np.dtype) -> np.dtype:
        dt = np.dtype(dtype)
        if dt in self._supported:
            return dt
        if dt.name not in self.rt.dtypes:
            raise TypeError(
                f"OpenCL device {self.device} has no {dt.name}"
                + (" (cl_khr_fp64 is missing)" if dt.name == "float64" else "")
                + (" (cl_khr_fp16 is missing)" if dt.name == "float16" else "")
            )
        return dt

    def _empty(self, shape: tuple[int, ...], dtype: np.dtype) -> OpenCLArray:
        dt = self._check_dtype(dtype)
        buf = self.rt.alloc(math.prod(shape) * dt.itemsize)
        return OpenCLArray(self.rt, buf, tuple(shape), dt)

    def _elementwise(
        self, family: str, dtype: str, name: str, out: OpenCLArray, *inputs: OpenCLArray
    ) -> OpenCLArray:
        """Run a strided element-wise kernel: ``out`` from ``inputs`` broadcast to its shape."""
        key = (out._shape, out._strides, *((x._shape, x._strides) for x in inputs))
        found = self._layouts.get(key)
        if found is None:
            found = self._layouts[key] = self._layout(out, inputs)
        items, ndim, meta = found
        if items == 0:
            return out
        args: list[Any] = [items, ndim, meta, out._buf, np.int64(out._offset)]
        for x in inputs:
            args += [x._buf, np.int64(x._offset)]
        self.rt.launch(self.rt.kernel(family, dtype, name), items, *args)
        return out

    def _layout(self, out: OpenCLArray, inputs: tuple[OpenCLArray, ...]) -> tuple[Any, Any, Any]:
        """(work-items, dimensions, shape/strides buffer) of an element-wise launch writing
        ``out`` from ``inputs`` (axes merged where every operand allows); :meth:`_elementwise`
        keeps them per layout, as a training step repeats the same few."""
        n = math.prod(out.shape)
        if n == 0:
            return np.int64(0), np.int32(0), None
        strides = [out.strides] + [_broadcast_strides(x, out.shape) for x in inputs]
        shape, strides = _collapse(out.shape, strides)
        piece = self.rt.piece
        meta = self.rt.meta(shape + tuple(v for st in strides for v in st) + (piece,))
        items = n // shape[-1] * -(-shape[-1] // piece) if self.rt.pieces else n
        if len(self._layouts) > 4096:
            self._layouts.clear()
        return np.int64(items), np.int32(len(shape)), meta

    def _contiguous(self, x: OpenCLArray) -> OpenCLArray:
        return x if x.is_contiguous else self.astype(x, x.dtype)

    # -- creation and transfer ------------------------------------------------------------------
    def from_numpy(self, a: np.ndarray) -> OpenCLArray:
        """Copy a host array to the device (:meth:`DeviceRuntime.upload`: no queued command,
        counted in :meth:`memory_stats`)."""
        host = np.asarray(a, order="C")
        dt = self._check_dtype(host.dtype)
        if host.size == 0:
            return self._empty(tuple(host.shape), dt)
        if not host.dtype.isnative:
            host = host.astype(dt.newbyteorder("="))
        return OpenCLArray(self.rt, self.rt.upload(host), tuple(host.shape), host.dtype)

    def to_numpy(self, x: Array) -> np.ndarray:
        """Copy ``x`` to the host (waits for the kernels that produce it)."""
        self.rt.refuse_while_recording(f"a copy of a device array {x.shape} to the host")
        host = np.empty(x.shape, dtype=x.dtype)
        if host.size == 0:
            return host
        src = self._contiguous(x)
        _runtime._cl().enqueue_copy(
            self.rt.queue,
            host,
            src._buf,
            src_offset=src._offset * x.dtype.itemsize,
            is_blocking=True,
        )
        return host

    def full(self, shape: Shape, fill_value: bool | int | float, dtype: np.dtype) -> OpenCLArray:
        """A new array filled with ``fill_value`` (clEnqueueFillBuffer)."""
        out = self._empty(tuple(shape), dtype)
        if out.size:
            pattern = np.array([fill_value]).astype(out.dtype)
            if out.dtype == np.bool_:
                pattern = pattern.view(np.uint8)
            queue, buf, nbytes = self.rt.queue, out._buf, out.size * out.dtype.itemsize
            self.rt.queued(
                lambda: _runtime._cl().enqueue_fill_buffer(queue, buf, pattern, 0, nbytes), buf
            )
        return out

    # -- element-wise ------------------------------------------------------------------------------
    def unary(self, op: str, x: Array, out: Array | None = None) -> OpenCLArray:
        """Element-wise ``op`` (strided kernel per op and dtype)."""
        boolean = op in ("isnan", "isinf", "logical_not")
        if out is None:
            out = self._empty(x.shape, np.dtype(np.bool_) if boolean else x.dtype)
        return self._elementwise("ew", _NAME[x.dtype], f"u_{op}", out, x)

    def binary(self, op: str, x1: Array, x2: Array, out: Array | None = None) -> OpenCLArray:
        """Element-wise ``op`` with broadcasting over strided inputs."""
        if out is None:
            shape = (
                x1.shape if x1.shape == x2.shape else tuple(np.broadcast_shapes(x1.shape, x2.shape))
            )
            boolean = op.startswith("logical") or op in (
                "equal",
                "not_equal",
                "less",
                "less_equal",
                "greater",
                "greater_equal",
            )
            out = self._empty(shape, np.dtype(np.bool_) if boolean else x1.dtype)
        if x1.dtype == np.bool_ and op in (
            "subtract",
            "divide",
            "floor_divide",
            "remainder",
            "pow",
        ):
            raise TypeError(f"{op}: not defined for bool arrays on the OpenCL backend")
        return self._elementwise("ew", _NAME[x1.dtype], f"b_{op}", out, x1, x2)

    def where(self, condition: Array, x1: Array, x2: Array) -> OpenCLArray:
        """Element-wise select with broadcasting."""
        shape = tuple(np.broadcast_shapes(condition.shape, x1.shape, x2.shape))
        out = self._empty(shape, x1.dtype)
        return self._elementwise("ew", _NAME[x1.dtype], "where", out, condition, x1, x2)

    def astype(self, x: Array, dtype: np.dtype) -> OpenCLArray:
        """A converted copy (a contiguous copy for the same dtype)."""
        dt = self._check_dtype(dtype)
        out = self._empty(x.shape, dt)
        if out.size == 0:
            return out
        if dt == x.dtype and x.is_contiguous:
            queue, dst, src = self.rt.queue, out._buf, x._buf
            offset, nbytes = x._offset * dt.itemsize, out.size * dt.itemsize
            self.rt.queued(
                lambda: _runtime._cl().enqueue_copy(
                    queue, dst, src, src_offset=offset, byte_count=nbytes
                ),
                dst,
                src,
            )
            return out
        return self._elementwise("cast", _NAME[x.dtype], f"cast_{_NAME[dt]}", out, x)

    # -- reductions --------------------------------------------------------------------------------
    def reduce(self, op: str, x: Array, axes: tuple[int, ...], keepdims: bool) -> OpenCLArray:
        """``op`` over ``axes``: kept axes index rows, reduced axes are walked per work-item."""
        keep = [i for i in range(x.ndim) if i not in axes]
        kept_shape = tuple(x.shape[i] for i in keep)
        final = (
            tuple(1 if i in axes else s for i, s in enumerate(x.shape)) if keepdims else kept_shape
        )
        m = math.prod(kept_shape)
        k = math.prod(x.shape[i] for i in axes)
        if m == 0:
            return self._empty(final, x.dtype)
        if k == 0:
            return self.full(final, _IDENTITY[op], x.dtype)
        kshape, (kstrides,) = _collapse(kept_shape, [tuple(x.strides[i] for i in keep)])
        rshape, (rstrides,) = _collapse(
            tuple(x.shape[i] for i in axes), [tuple(x.strides[i] for i in axes)]
        )
        kernel = self.rt.kernel("red", _NAME[x.dtype], f"red_{op}")
        src: OpenCLArray = x
        if self.rt.pieces and kstrides == (1,) and len(rshape) == 1 and m > 1:
            # a column reduction on a CPU device: a work-item per run of consecutive outputs
            # (a work-item per output walks its column alone, reading a cache line per item)
            chunk = _CHUNK if k > _SPLIT else k
            chunks = -(-k // chunk)
            tmp = self._empty((m * chunks,), x.dtype)
            self.rt.launch(
                self.rt.kernel("red", _NAME[x.dtype], f"red_{op}_cols"),
                -(-m // _codegen.RED_COLS) * chunks,
                np.int64(m), np.int64(chunks), np.int64(chunk), np.int64(k),
                np.int64(rstrides[0]), tmp._buf, src._buf, np.int64(src._offset),
            )  # fmt: skip
            if chunks == 1:
                return OpenCLArray(self.rt, tmp._buf, final, x.dtype)
            src, k = tmp, chunks
            kshape, kstrides, rshape, rstrides = (m,), (chunks,), (chunks,), (1,)
        while True:
            chunk = _CHUNK if k > _SPLIT else k
            chunks = -(-k // chunk)
            tmp = self._empty((m * chunks,), x.dtype)
            meta = self.rt.meta(kshape + kstrides + rshape + rstrides)
            self.rt.launch(
                kernel,
                m * chunks,
                np.int64(m * chunks),
                np.int64(chunks),
                np.int64(chunk),
                np.int64(k),
                np.int32(len(kshape)),
                np.int32(len(rshape)),
                meta,
                tmp._buf,
                src._buf,
                np.int64(src._offset),
            )
            if chunks == 1:
                return OpenCLArray(self.rt, tmp._buf, final, x.dtype)
            src, k = tmp, chunks
            kshape, kstrides, rshape, rstrides = (m,), (chunks,), (chunks,), (1,)

    def arg_reduce(self, op: str, x: Array, axis: int, keepdims: bool) -> OpenCLArray:
        """Index of the first max/min along ``axis`` (NaN counts as the extreme, as in NumPy)."""
        keep = [i for i in range(x.ndim) if i != axis]
        kept_shape = tuple(x.shape[i] for i in keep)
        final = (
            tuple(1 if i == axis else s for i, s in enumerate(x.shape)) if keepdims else kept_shape
        )
        out = self._empty(final, np.dtype(np.int64))
        m = math.prod(kept_shape)
        if m == 0:
            return out
        kshape, (kstrides,) = _collapse(kept_shape, [tuple(x.strides[i] for i in keep)])
        self.rt.launch(
            self.rt.kernel("red", _NAME[x.dtype], op),
            m,
            np.int64(m),
            np.int64(x.shape[axis]),
            np.int64(x.strides[axis]),
            np.int32(len(kshape)),
            self.rt.meta(kshape + kstrides),
            out._buf,
            x._buf,
            np.int64(x._offset),
        )
        return out

    # -- linear algebra ----------------------------------------------------------------------------
    def matmul(self, x1: Array, x2: Array) -> OpenCLArray:
        """Batched matrix product: CLBlast GEMM for floats, a plain strided kernel for integers
        and for small products (up to ``_SMALL_GEMM`` multiply-adds)."""
        m, k = x1.shape[-2:]
        n = x2.shape[-1]
        lead1, lead2 = x1.shape[:-2], x2.shape[:-2]
        batch = lead1 if lead1 == lead2 else tuple(np.broadcast_shapes(lead1, lead2))
        dt = x1.dtype
        out = self._empty((*batch, m, n), dt)
        if out.size == 0:
            return out
        if k == 0:
            return self.full(out.shape, 0, dt)
        nb = math.prod(batch)
        blas = _NAME[dt] in ("float32", "float64") or (_NAME[dt] == "float16" and self.rt.fp16)
        if blas and nb * m * n * k > _SMALL_GEMM:
            # arraycore's kernels where they run the product (CPU devices), else CLBlast
            gemm = _cpu_gemm.gemm if self.rt.own_gemm(dt) else _gemm.gemm
            gemm(self, x1, x2, out, batch, m, n, k)
            return out
        if nb == 1:
            a, b = x1, x2
            a_bs = b_bs = 0
        else:
            a = self._contiguous(self.broadcast_to(x1, (*batch, m, k)))
            b = self._contiguous(self.broadcast_to(x2, (*batch, k, n)))
            a_bs, b_bs = m * k, k * n
        self.rt.launch(
            self.rt.kernel("idx", _NAME[dt], "matmul"),
            out.size,
            np.int64(nb),
            np.int64(m),
            np.int64(n),
            np.int64(k),
            out._buf,
            a._buf,
            np.int64(a._offset),
            np.int64(a_bs),
            np.int64(a.strides[-2]),
            np.int64(a.strides[-1]),
            b._buf,
            np.int64(b._offset),
            np.int64(b_bs),
            np.int64(b.strides[-2]),
            np.int64(b.strides[-1]),
        )
        return out

    # -- layout ------------------------------------------------------------------------------------
    def _view(
        self, x: OpenCLArray, shape: tuple[int, ...], strides: tuple[int, ...], offset: int
    ) -> OpenCLArray:
        return OpenCLArray(self.rt, x._buf, shape, x.dtype, strides, offset)

    def reshape(self, x: Array, shape: Shape) -> OpenCLArray:
        """A view when ``x`` is contiguous, else a contiguous copy reshaped."""
        shape = tuple(shape)
        src = self._contiguous(x)
        return self._view(src, shape, contiguous_strides(shape), src._offset)

    def permute_dims(self, x: Array, axes: tuple[int, ...]) -> OpenCLArray:
        """A view with the axes reordered."""
        return self._view(
            x, tuple(x.shape[a] for a in axes), tuple(x.strides[a] for a in axes), x._offset
        )

    def broadcast_to(self, x: Array, shape: Shape) -> OpenCLArray:
        """A view with zero strides on the broadcast axes."""
        shape = tuple(shape)
        return self._view(x, shape, _broadcast_strides(x, shape), x._offset)

    def getitem(self, x: Array, key: Key) -> OpenCLArray:
        """Basic indexing as a strided view (no copy)."""
        shape: list[int] = []
        strides: list[int] = []
        offset = x._offset
        axis = 0
        for k in key:
            if k is None:
                shape.append(1)
                strides.append(0)
                continue
            size, stride = x.shape[axis], x.strides[axis]
            axis += 1
            if isinstance(k, slice):
                start, stop, step = k.indices(size)
                length = len(range(start, stop, step))
                if length:
                    offset += start * stride
                shape.append(length)
                strides.append(stride * step)
            else:
                offset += int(k) * stride
        shape += list(x.shape[axis:])
        strides += list(x.strides[axis:])
        return self._view(x, tuple(shape), tuple(strides), offset)

    def setitem(self, x: Array, key: Key, value: Array) -> None:
        """Write ``value`` (broadcast) into the view ``x[key]`` with a strided copy kernel."""
        target = self.getitem(x, key)
        if target.size == 0:
            return
        if value._buf is x._buf:
            value = self.astype(value, value.dtype)  # the source may overlap the target
        self._elementwise("cast", _NAME[value.dtype], f"cast_{_NAME[x.dtype]}", target, value)

    # -- gather / scatter --------------------------------------------------------------------------
    def take(self, x: Array, indices: Array, axis: int) -> OpenCLArray:
        """Gather along ``axis``; the output is contiguous."""
        idx = self._contiguous(indices)
        shape = (*x.shape[:axis], idx.shape[0], *x.shape[axis + 1 :])
        out = self._empty(shape, x.dtype)
        if out.size == 0:
            return out
        inner = math.prod(x.shape[axis + 1 :])
        if inner >= _TAKE_ROW_ITEMS and x.is_contiguous:
            self.rt.launch_rows(
                self.rt.kernel("idx", _NAME[x.dtype], "take_rows"),
                inner,
                idx.shape[0],
                np.int64(inner),
                np.int64(x.shape[axis]),
                np.int64(idx.shape[0]),
                np.int64(math.prod(x.shape[:axis])),
                out._buf,
                x._buf,
                np.int64(x._offset),
                idx._buf,
                np.int64(idx._offset),
            )
            return out
        meta = self.rt.meta(shape + x.strides)
        self.rt.launch(
            self.rt.kernel("idx", _NAME[x.dtype], "take"),
            out.size,
            np.int64(out.size),
            np.int32(len(shape)),
            np.int32(axis),
            meta,
            out._buf,
            x._buf,
            np.int64(x._offset),
            idx._buf,
            np.int64(idx._offset),
        )
        return out

    def scatter_add(self, out: Array, indices: Array, values: Array, axis: int) -> None:
        """Add along ``axis``: one work-item per position off the axis loops over the indices,
        so repeated indices accumulate deterministically without atomics."""
        idx = self._contiguous(indices)
        n_idx = idx.shape[0]
        iter_shape = tuple(1 if i == axis else s for i, s in enumerate(out.shape))
        m = math.prod(iter_shape)
        if m == 0 or n_idx == 0:
            return
        if values._buf is out._buf:
            values = self.astype(values, values.dtype)
        meta = self.rt.meta(iter_shape + out.strides + values.strides)
        self.rt.launch(
            self.rt.kernel("idx", _NAME[out.dtype], "scatter_add"),
            m,
            np.int64(m),
            np.int32(len(iter_shape)),
            np.int32(axis),
            np.int64(n_idx),
            meta,
            out._buf,
            np.int64(out._offset),
            values._buf,
            np.int64(values._offset),
            idx._buf,
            np.int64(idx._offset),
        )

    # -- device memory -------------------------------------------------------------------------
    def memory_stats(self) -> dict[str, int]:
        """Bytes of this device's arrays: ``used_bytes`` (live arrays, those made by the pool
        and those uploaded from the host), ``peak_bytes`` (the most live at once since the last
        :meth:`reset_memory_stats`), ``upload_bytes`` (the uploaded part of ``used_bytes``),
        ``pool_bytes`` (held by the pool, cached free blocks included). Reading them does not
        wait for the device."""
        used = self.rt.used_bytes()
        return {
            "used_bytes": used,
            "peak_bytes": max(int(self.rt.peak_bytes), used),
            "upload_bytes": int(self.rt.upload_bytes),
            "pool_bytes": int(self.rt.shared_pool.managed_bytes),
        }

    def reset_memory_stats(self) -> None:
        """Start a new peak from what is live now."""
        self.rt.peak_bytes = self.rt.used_bytes()

    def synchronize(self) -> None:
        """Wait until this device's queue has finished what it holds (``clFinish``)."""
        self.rt.refuse_while_recording("a wait for the device")
        self.rt.queue.finish()

    def capture_support(self) -> str | None:
        """``None``: a step's launches can be recorded and replayed as a list
        (:mod:`arraycore_opencl._capture`) unless ``ARRAYCORE_OPENCL_CAPTURE=0``."""
        from ._capture import support

        return support()

    def capture(self, fn: Any) -> Any:
        """``fn``'s launches and queued copies recorded once, for replay (see
        :mod:`arraycore_opencl._capture`)."""
        from ._capture import capture

        return capture(self.rt, fn)

    # -- nn overrides: one launch for im2col, col2im and each max-pooling pass ---------------
    def overrides(self) -> dict[str, Any]:
        """Convolutions (KernelHost's host code on this backend's strided im2col / col2im
        kernels + CLBlast GEMM), max pooling kernels, and the shared kernels of
        :mod:`arraycore.device_kernels` for average pooling, the softmax family, GELU, batch and
        layer normalisation and the LSTM's time steps (every ``SHARED_NN`` function); sort and
        argsort as a bitonic network (:mod:`arraycore_opencl._sort`)."""
        from . import _sort

        return {
            **_sort.overrides(self),
            **self.shared_overrides(),
            # batch norm with its ReLU in the same launches (CUDA keeps cuDNN's batch norm and
            # the namespace's in-place maximum after it)
            "nn.batch_norm_relu": self.shared_batch_norm_relu,
            "nn.batch_norm_relu_backward": self.shared_batch_norm_relu_backward,
            "inplace.fuse": self.fuse,
        }

    def fuse(self, fn: Callable[..., Any], *, scalar_operands: bool = False) -> Callable[..., Any]:
        """``xp.inplace.fuse``: chains that promise ``scalar_operands`` become one kernel per
        signature where they can be traced (:mod:`arraycore_opencl._fuse`); ``fn`` otherwise."""
        from . import _fuse

        check_fuse_args(fn, scalar_operands)
        return _fuse.Fused(self, fn) if scalar_operands else fn

    # -- random numbers ----------------------------------------------------------------------------
    def rng_state(self, seed: int) -> tuple[int, Any]:
        """``(seed, counter)``: Philox4x32-10 keyed by the seed, and the count of elements
        drawn so far kept on the device (one ``ulong``), which each draw reads and advances
        there: no draw passes a changing host number to a kernel, so a captured step draws
        new numbers at every replay, the same sequence as eager steps."""
        counter = self.rt.upload(np.zeros(1, dtype=np.uint64))
        return int(seed) & 0xFFFFFFFFFFFFFFFF, counter

    def rng_uniform(self, state: Any, shape: Shape, dtype: np.dtype) -> OpenCLArray:
        """Uniform samples in [0, 1): element ``i`` is Philox(seed, counter + i); the counter
        then advances by the number drawn (a second, one-item launch)."""
        out = self._empty(tuple(shape), dtype)
        n = out.size
        if n:
            seed, counter = state
            self.rt.launch(
                self.rt.kernel("rng", _NAME[out.dtype], "uniform"),
                n,
                np.int64(n),
                out._buf,
                np.uint32(seed & 0xFFFFFFFF),
                np.uint32(seed >> 32),
                counter,
            )
            self.rt.launch(
                self.rt.kernel("rng", _NAME[out.dtype], "advance"), 1, counter, np.uint64(n)
            )
        return out
