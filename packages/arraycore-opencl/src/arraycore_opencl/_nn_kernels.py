"""The OpenCL backend's nn kernels: its own strided im2col, col2im and max-pooling kernels, and
arraycore's shared kernels (:mod:`arraycore.device_kernels`) through :class:`KernelHost`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from arraycore.device_kernels import ELEMENT_KERNELS, ELEMENT_RUN_CPU
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
#: Shared kernels whose OpenCL build (``ROW_UNIT_2D``) runs over a 2-D range (units, rows) of
#: the ``(rows, H)`` state: ``n = rows * H`` items, ``H`` their second argument.
_ROW_UNIT = frozenset(
    ("lstm_cell_forward", "lstm_cell_backward", "gru_cell_forward", "gru_cell_backward")
)

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
        name = "max_pool_2x2" if win.tiles_2x2 else "max_pool"
        return self._nn_launch(name, win, out, x, items=items, piece=piece)

    def max_pool_backward(self, dy: OpenCLArray, x: OpenCLArray, win: Window2d) -> OpenCLArray:
        """Its gradient, reading strided ``x`` and ``dy`` in place (KernelHost hook): one
        work-item per window where windows do not overlap, else one per pixel gathering from
        the windows that hold it."""
        shape = (win.n, win.c, win.h, win.w)
        if win.tiles_2x2:  # every pixel under a window written: zero only what none covers
            whole = (win.h, win.w) == (2 * win.out_h, 2 * win.out_w)
            out = self._empty(shape, dy.dtype) if whole else self.full(shape, 0, dy.dtype)
            piece, items = self._along_rows(win.out_w, win.n * win.c * win.out_h)
            name = "max_pool_backward_2x2"
            return self._nn_launch(name, win, out, x, dy, items=items, piece=piece)
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

    # -- the LSTM's fused steps (arraycore's own GEMM devices) -----------------------------------
    def _lstm_step_kernel(self, dtype: np.dtype, hidden: int, name: str) -> Any:
        """``(kernel, W, MR)`` of fused LSTM step kernel ``name`` for ``dtype`` and ``hidden``
        units where it runs (arraycore's GEMM kernels serve this device and the units are whole
        vectors of ``W``), else None."""
        if not self.rt.own_gemm(dtype):
            return None
        kernel, (width, mr) = self.rt.gemm_kernel(_NAME[dtype], name)
        return (kernel, width, mr) if hidden % width == 0 else None

    def lstm_steps_forward(
        self, xp: Any, us: Any, h0: Any | None, c0: Any | None, state: Any
    ) -> bool:
        xs, c, h, gates, cs, tanh_c, y = state
        n, t_len, hidden = (int(d) for d in y.shape)
        found = self._lstm_step_kernel(y.dtype, hidden, "lstm_step_fw")
        if found is None or n == 0:
            return False
        kernel, width, mr = found
        # u packed per block of W units: (H / W, H, 4 gates, W), so that a work-item's four
        # gate vectors of one step of k lie together
        packed = xp.reshape(us, (hidden, 4, hidden // width, width))
        packed = self._contiguous(xp.permute_dims(packed, (2, 0, 1, 3)))
        rows = -(-n // max(mr // 2, 1))
        bufs = [a._buf for a in (xs, c, h, gates, cs, tanh_c, y)]
        # step t reads h_(t-1) whole from y[:, t-1] (from h0 itself at t = 0: h, which the
        # step writes, cannot be its operand) and writes only its own units of y[:, t] and h
        first = self.kernel_dense(h0) if h0 is not None else y
        for t in range(t_len):
            if t:
                a, a_off, lda, has_h = y, (t - 1) * hidden, t_len * hidden, 1
            else:
                a, a_off, lda, has_h = first, 0, hidden, int(h0 is not None)
            has_c = int(t > 0 or c0 is not None)
            meta = self.rt.meta((n, hidden, t_len, t, a_off, lda, has_h, has_c))
            self.rt.launch_tiles(kernel, (hidden // width, rows), a._buf, packed._buf, *bufs, meta)
        return True

    def lstm_steps_backward(
        self, xp: Any, u: Any, dy: Any | None, dh_n: Any | None, has_dc: bool, c0: Any | None,
        state: Any,
    ) -> bool:  # fmt: skip
        dc, gates, cs, tanh_c, dz = state
        n, t_len, g4 = (int(d) for d in dz.shape)
        hidden = g4 // 4
        found = self._lstm_step_kernel(dz.dtype, hidden, "lstm_step_bw")
        if found is None or n == 0:
            return False
        kernel, width, mr = found
        # u.T packed per block of W units: (H / W, 4H, W), a work-item's W units of one row of
        # u.T one vector
        packed = xp.reshape(u, (hidden // width, width, g4))
        packed = self._contiguous(xp.permute_dims(packed, (0, 2, 1)))
        fallback = gates._buf  # read by no launch whose flag is off
        dy_buf = self.kernel_dense(dy)._buf if dy is not None else fallback
        dh_buf = self.kernel_dense(dh_n)._buf if dh_n is not None else fallback
        c0_buf = self.kernel_dense(c0)._buf if c0 is not None else fallback
        bufs = (packed._buf, dy_buf, dh_buf, dc._buf, c0_buf, gates._buf, cs._buf, tanh_c._buf)
        rows = -(-n // mr)
        flags = (int(dh_n is not None), int(dy is not None))
        for t in range(t_len - 1, -1, -1):
            last = t == t_len - 1
            dc_in = int(has_dc or not last)
            meta = (n, hidden, t_len, t, int(not last), *flags, dc_in, int(c0 is not None))
            self.rt.launch_tiles(
                kernel, (hidden // width, rows), *bufs, dz._buf, self.rt.meta(meta)
            )
        return True

    def kernel_launch(self, dtype: np.dtype, name: str, n: int, *args: Any) -> None:
        rows = _BY_ROWS.get(name)
        if rows is not None:  # args: (n, C, HW, ...)
            hw = int(args[2])
            if hw >= _ROW_ITEMS and n // hw >= _ROW_COUNT:
                self.rt.launch(self.rt.kernel("nn", _NAME[dtype], rows), n // hw, *args)
                return
        if name in _ROW_UNIT:  # args: (n, H, ...)
            h = int(args[1])
            self.rt.launch_rows(self.rt.kernel("dk", _NAME[dtype], name), h, n // h, *args)
            return
        if self.rt.pieces and name in ELEMENT_KERNELS:  # a run of elements per work item
            n = -(-n // ELEMENT_RUN_CPU)
        self.rt.launch(self.rt.kernel("dk", _NAME[dtype], name), n, *args)
