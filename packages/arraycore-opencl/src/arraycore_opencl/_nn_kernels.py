"""The OpenCL backend's nn kernels: its own strided im2col, col2im and max-pooling kernels, and
arraycore's shared kernels (:mod:`arraycore.device_kernels`) through :class:`KernelHost`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from arraycore.kernel_host import KernelHost
from arraycore.nn_shapes import Window2d

from . import _cpu_gemm
from ._array import OpenCLArray
from ._runtime import DTYPE_NAME as _NAME

#: Shared kernels (arraycore.device_kernels) this backend runs a row per work-item instead, by
#: their row-wise twins in its "nn" program (same arguments and arithmetic), where rows hold
#: at least ``_ROW_ITEMS`` items and there are ``_ROW_COUNT`` of them to spread.
_BY_ROWS = {"bn_normalize": "bn_normalize_rows", "bn_backward_data": "bn_backward_data_rows"}
_ROW_ITEMS = 16
_ROW_COUNT = 64

if TYPE_CHECKING:
    from ._runtime import DeviceRuntime


class OpenCLKernels(KernelHost):
    """The nn overrides of :class:`arraycore_opencl.OpenCLBackend` (a mixin of it)."""

    rt: DeviceRuntime

    def _empty(self, shape: tuple[int, ...], dtype: np.dtype) -> OpenCLArray:
        raise NotImplementedError

    def _contiguous(self, x: OpenCLArray) -> OpenCLArray:
        raise NotImplementedError

    def astype(self, x: Any, dtype: np.dtype) -> OpenCLArray:
        raise NotImplementedError

    def full(self, shape: Any, fill_value: bool | int | float, dtype: np.dtype) -> OpenCLArray:
        raise NotImplementedError

    def _geometry(self, win: Window2d, *strided: OpenCLArray) -> Any:
        (top, _), (left, _) = win.pads
        values = (
            win.n, win.c, win.h, win.w, win.kh, win.kw, win.out_h, win.out_w, *win.stride,
            *win.dilation, top, left, *(s for x in strided for s in x.strides),
        )  # fmt: skip
        return self.rt.meta(tuple(int(v) for v in values))

    def _nn_launch(
        self,
        name: str,
        win: Window2d,
        out: OpenCLArray,
        *inputs: OpenCLArray,
        items: int,
        piece: int | None = None,
    ) -> OpenCLArray:
        """Launch ``name`` over ``items`` work-items (one per output, row or window, as the
        kernel loops; ``piece``: how many each work-item takes, as the kernel counts them)."""
        args: list[Any] = [np.int64(items), self._geometry(win, *inputs), out._buf]
        for x in inputs:
            args += [x._buf, np.int64(x._offset)]
        if piece is not None:
            args.append(np.int64(piece))
        self.rt.launch(self.rt.kernel("nn", _NAME[out.dtype], name), items, *args)
        return out

    def _along_rows(self, length: int, lines: int) -> tuple[int, int]:
        """(piece, work-items) for ``lines`` rows of ``length`` outputs, each work-item taking
        ``piece`` consecutive outputs of a row (the device's element-wise piece: a whole row on
        CPU devices, one output on GPUs)."""
        piece = min(self.rt.piece, length)
        return piece, lines * -(-length // piece)

    #: this backend's own im2col/col2im/max-pool kernels exist for every float dtype
    hook_dtypes = ("float16", "float32", "float64")

    def matmul_reads_batch_strides(self, dtype: Any) -> bool:
        """True where arraycore's GEMM kernels run the product (:mod:`._cpu_gemm`): they read a
        batch of strided views in place; CLBlast's batches are copied first."""
        return self.rt.own_gemm(dtype)

    def accelerated(self, op: str, win: Window2d, *arrays: OpenCLArray) -> OpenCLArray | None:
        """The forward convolution (and so the input gradient of stride-1 ones, a convolution
        of ``dy``) as arraycore's implicit GEMM (:func:`._cpu_gemm.conv2d`: no columns array)
        where arraycore's GEMM runs the product; None otherwise (im2col and the GEMM)."""
        if op != "conv2d" or not self.matmul_reads_batch_strides(arrays[0].dtype):
            return None
        x, w = arrays
        return _cpu_gemm.conv2d(self, x, w, win)  # type: ignore[arg-type]  # the backend's mixin

    def im2col(self, x: OpenCLArray, win: Window2d) -> OpenCLArray:
        """``(C*KH*KW, N*OH*OW)`` columns of the (implicitly zero-padded) input, read in place
        from a strided ``x`` (the shared kernel would need a dense copy first)."""
        rows = win.c * win.kh * win.kw
        out = self._empty((rows, win.n * win.out_h * win.out_w), x.dtype)
        # a work-item per `piece` output rows of OW columns
        piece = max(1, min(self.rt.piece // max(win.out_w, 1), win.out_h))
        items = rows * win.n * -(-win.out_h // piece)
        return self._nn_launch("im2col", win, out, x, items=items, piece=piece)

    def im2row(self, x: OpenCLArray, win: Window2d) -> OpenCLArray | None:
        """The transposed columns, ``(N*OH*OW, C*KH*KW)``, read in place from a strided ``x``
        (KernelHost hook: CLBlast's GEMM runs the filter gradient faster on them than on
        transposed columns); None where arraycore's GEMM runs the product (it packs transposed
        columns as fast, and :meth:`im2col` writes them faster than this kernel does)."""
        if self.matmul_reads_batch_strides(x.dtype):
            return None
        rows = win.n * win.out_h * win.out_w
        out = self._empty((rows, win.c * win.kh * win.kw), x.dtype)
        piece, items = self._along_rows(win.out_w, win.n * win.out_h)
        return self._nn_launch("im2row", win, out, x, items=items, piece=piece)

    def col2im(self, cols: OpenCLArray, win: Window2d) -> OpenCLArray:
        """The adjoint of :meth:`im2col`, cropped to the unpadded image."""
        out = self._empty((win.n, win.c, win.h, win.w), cols.dtype)
        items = win.n * win.c * win.h  # image rows
        return self._nn_launch("col2im", win, out, self._contiguous(cols), items=items)

    def max_pool(self, x: OpenCLArray, win: Window2d) -> OpenCLArray:
        """Max pooling read in place from a strided ``x`` (KernelHost hook)."""
        out = self._empty((win.n, win.c, win.out_h, win.out_w), x.dtype)
        piece, items = self._along_rows(win.out_w, win.n * win.c * win.out_h)
        return self._nn_launch("max_pool", win, out, x, items=items, piece=piece)

    def max_pool_backward(self, dy: OpenCLArray, x: OpenCLArray, win: Window2d) -> OpenCLArray:
        """Its gradient, reading strided ``x`` and ``dy`` in place (KernelHost hook): one
        work-item per window where windows do not overlap, else one per pixel gathering from
        the windows that hold it."""
        shape = (win.n, win.c, win.h, win.w)
        if win.stride[0] >= win.kh and win.stride[1] >= win.kw:
            out = self.full(shape, 0, dy.dtype)
            piece, items = self._along_rows(win.out_w, win.n * win.c * win.out_h)
            name = "max_pool_backward_windows"
            return self._nn_launch(name, win, out, x, dy, items=items, piece=piece)
        out = self._empty(shape, dy.dtype)
        return self._nn_launch("max_pool_backward", win, out, x, dy, items=out.size)

    # -- KernelHost: arraycore's shared kernels (average pooling, softmax family, GELU) --------
    # The CUDA backend runs the same kernel bodies and the same host code (KernelHost).
    def kernel_empty(self, shape: tuple[int, ...], dtype: np.dtype) -> OpenCLArray:
        return self._empty(shape, dtype)

    def kernel_dense(self, x: OpenCLArray) -> OpenCLArray:
        return x if x._offset == 0 and x.is_contiguous else self.astype(x, x.dtype)

    def kernel_arg(self, x: OpenCLArray) -> Any:
        return x._buf

    def kernel_launch(self, dtype: np.dtype, name: str, n: int, *args: Any) -> None:
        rows = _BY_ROWS.get(name)
        if rows is not None:  # args: (n, C, HW, ...)
            hw = int(args[2])
            if hw >= _ROW_ITEMS and n // hw >= _ROW_COUNT:
                self.rt.launch(self.rt.kernel("nn", _NAME[dtype], rows), n // hw, *args)
                return
        self.rt.launch(self.rt.kernel("dk", _NAME[dtype], name), n, *args)
