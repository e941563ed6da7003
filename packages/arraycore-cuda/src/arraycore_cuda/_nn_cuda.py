"""The ``xp.nn`` kernels of the CUDA backend: cuDNN where it takes the case, else own kernels.

Convolutions: cuDNN graphs (:mod:`arraycore_cuda._cudnn`) when nvidia-cudnn-frontend and a
cuDNN runtime are installed; otherwise, or for a case cuDNN declines, one ``im2col``/``col2im``
kernel launch (:mod:`arraycore_cuda._kernels`) and one cuBLAS GEMM for the whole batch. Batch
normalisation: cuDNN, else arraycore's derived version (CuPy reductions). Pooling, softmax /
log-softmax over the last axis and the fused softmax cross-entropy are arraycore's shared
kernels (``arraycore.device_kernels``) built for CUDA. float16 (no shared kernels) and anything
else outside them run arraycore's derived versions, which call CuPy.

Argument checking is arraycore's own (``arraycore._nn``), so errors read as on every backend.
Nothing here synchronises with the host.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from arraycore import _nn, namespace_of

from ._kernels import DTYPES, CudaKernels, geometry

Array = Any

#: Longest row the one-thread-per-row softmax kernels take; longer rows use CuPy reductions.
SOFTMAX_MAX_ROW = 4096

#: The namespace entries :meth:`CudaNN.table` overrides.
NN_OVERRIDES = (
    "conv2d",
    "conv2d_backward_data",
    "conv2d_backward_filter",
    "conv2d_transpose",
    "max_pool2d",
    "max_pool2d_backward",
    "avg_pool2d",
    "avg_pool2d_backward",
    "softmax",
    "log_softmax",
    "softmax_cross_entropy",
    "batch_norm",
    "batch_norm_backward",
)


def _ours(x: Array) -> bool:
    """Whether the shared kernels (arraycore.device_kernels) exist for ``x``'s dtype."""
    return bool(x.dtype.name in DTYPES)


class CudaNN:
    """``xp.nn`` overrides for one device. ``cudnn`` is a :class:`~._cudnn.Cudnn` or None."""

    def __init__(self, cupy: Any, cudnn: Any | None = None) -> None:
        self._cp = cupy
        self.kernels = CudaKernels(cupy)
        self.cudnn = cudnn

    def table(self) -> dict[str, Callable[..., Any]]:
        return {f"nn.{name}": getattr(self, name) for name in NN_OVERRIDES}

    # -- helpers ------------------------------------------------------------------------------------
    def _contiguous(self, x: Array) -> Array:
        return self._cp.ascontiguousarray(x)

    def _launch(self, name: str, n: int, out: Array, *args: Any) -> Array:
        self.kernels.launch(out.dtype, name, n, np.int64(n), out, *args)
        return out

    def _im2col(self, x: Array, win: _nn.Window2d) -> Array:
        """``(C*KH*KW, N*OH*OW)`` columns of the (implicitly zero-padded) input."""
        rows, cols = win.c * win.kh * win.kw, win.n * win.out_h * win.out_w
        out = self._cp.empty((rows, cols), dtype=x.dtype)
        return self._launch("im2col", out.size, out, self._contiguous(x), *geometry(win))

    def _col2im(self, cols: Array, win: _nn.Window2d) -> Array:
        """The adjoint of :meth:`_im2col`, cropped to the unpadded image."""
        out = self._cp.empty((win.n, win.c, win.h, win.w), dtype=cols.dtype)
        return self._launch("col2im", out.size, out, self._contiguous(cols), *geometry(win))

    def _channels_first(self, y: Array) -> Array:
        """``(N, C, H, W)`` as the ``(C, N*H*W)`` matrix the column layout multiplies."""
        n, c, h, w = y.shape
        return self._cp.ascontiguousarray(y.transpose(1, 0, 2, 3)).reshape(c, n * h * w)

    def _weights(self, w: Array) -> Array:
        return self._contiguous(w).reshape(int(w.shape[0]), -1)

    # -- convolutions -------------------------------------------------------------------------------
    def conv2d(
        self, x: Array, w: Array, *, stride: Any = 1, padding: Any = 0, dilation: Any = 1
    ) -> Array:
        xp = namespace_of(x, w)
        win = _nn.conv_window("conv2d", x.shape, w.shape, stride, padding, dilation)
        _nn.check_float("conv2d", xp.isdtype, x=x, w=w)
        if self.cudnn is not None:
            y = self.cudnn.conv2d(x, w, win)
            if y is not None:
                return y
        if not _ours(x):
            return _nn.conv2d(xp, x, w, stride=stride, padding=padding, dilation=dilation)
        o = int(w.shape[0])
        y2 = self._cp.matmul(self._weights(w), self._im2col(x, win))  # one GEMM per batch
        y4 = y2.reshape(o, win.n, win.out_h, win.out_w)
        return self._cp.ascontiguousarray(y4.transpose(1, 0, 2, 3))

    def conv2d_backward_data(
        self,
        dy: Array,
        w: Array,
        x_shape: Any,
        *,
        stride: Any = 1,
        padding: Any = 0,
        dilation: Any = 1,
    ) -> Array:
        op = "conv2d_backward_data"
        xp = namespace_of(dy, w)
        win = _nn.conv_window(op, x_shape, w.shape, stride, padding, dilation)
        o = int(w.shape[0])
        _nn.check_output_shape(op, "dy", dy.shape, win, o)
        _nn.check_float(op, xp.isdtype, dy=dy, w=w)
        if self.cudnn is not None:
            dx = self.cudnn.conv2d_backward_data(dy, w, win)
            if dx is not None:
                return dx
        if not _ours(dy):
            return _nn.conv2d_backward_data(
                xp, dy, w, x_shape, stride=stride, padding=padding, dilation=dilation
            )
        cols = self._cp.matmul(self._weights(w).T, self._channels_first(dy))
        return self._col2im(cols, win)

    def conv2d_backward_filter(
        self,
        x: Array,
        dy: Array,
        w_shape: Any,
        *,
        stride: Any = 1,
        padding: Any = 0,
        dilation: Any = 1,
    ) -> Array:
        op = "conv2d_backward_filter"
        xp = namespace_of(x, dy)
        win = _nn.conv_window(op, x.shape, w_shape, stride, padding, dilation)
        o = int(w_shape[0])
        _nn.check_output_shape(op, "dy", dy.shape, win, o)
        _nn.check_float(op, xp.isdtype, x=x, dy=dy)
        if self.cudnn is not None:
            dw = self.cudnn.conv2d_backward_filter(x, dy, win, tuple(int(s) for s in w_shape))
            if dw is not None:
                return dw
        if not _ours(x):
            return _nn.conv2d_backward_filter(
                xp, x, dy, w_shape, stride=stride, padding=padding, dilation=dilation
            )
        dw = self._cp.matmul(self._channels_first(dy), self._im2col(x, win).T)
        return dw.reshape(o, win.c, win.kh, win.kw)

    def conv2d_transpose(
        self,
        x: Array,
        w: Array,
        *,
        stride: Any = 1,
        padding: Any = 0,
        dilation: Any = 1,
        output_padding: Any = 0,
    ) -> Array:
        op = "conv2d_transpose"
        xp = namespace_of(x, w)
        win = _nn.conv_transpose_window(
            op, x.shape, w.shape, stride, padding, dilation, output_padding
        )
        _nn.check_float(op, xp.isdtype, x=x, w=w)
        if not _ours(x):
            return _nn.conv2d_transpose(
                xp,
                x,
                w,
                stride=stride,
                padding=padding,
                dilation=dilation,
                output_padding=output_padding,
            )
        cols = self._cp.matmul(self._weights(w).T, self._channels_first(x))
        return self._col2im(cols, win)

    # -- pooling ------------------------------------------------------------------------------------
    def max_pool2d(self, x: Array, kernel_size: Any, stride: Any = None, padding: Any = 0) -> Array:
        xp = namespace_of(x)
        win = _nn.pool_window("max_pool2d", x.shape, kernel_size, stride, padding)
        _nn.check_float("max_pool2d", xp.isdtype, x=x)
        if not _ours(x):
            return _nn.max_pool2d(xp, x, kernel_size, stride, padding)
        out = self._cp.empty((win.n, win.c, win.out_h, win.out_w), dtype=x.dtype)
        return self._launch("max_pool", out.size, out, self._contiguous(x), *geometry(win))

    def max_pool2d_backward(
        self, dy: Array, x: Array, kernel_size: Any, stride: Any = None, padding: Any = 0
    ) -> Array:
        op = "max_pool2d_backward"
        xp = namespace_of(dy, x)
        win = _nn.pool_window(op, x.shape, kernel_size, stride, padding)
        _nn.check_output_shape(op, "dy", dy.shape, win, win.c)
        _nn.check_float(op, xp.isdtype, dy=dy, x=x)
        if not _ours(x):
            return _nn.max_pool2d_backward(xp, dy, x, kernel_size, stride, padding)
        out = self._cp.empty((win.n, win.c, win.h, win.w), dtype=dy.dtype)
        x_, dy_ = self._contiguous(x), self._contiguous(dy)
        return self._launch("max_pool_backward", out.size, out, x_, dy_, *geometry(win))

    def avg_pool2d(
        self,
        x: Array,
        kernel_size: Any,
        stride: Any = None,
        padding: Any = 0,
        count_include_pad: bool = True,
    ) -> Array:
        xp = namespace_of(x)
        win = _nn.pool_window("avg_pool2d", x.shape, kernel_size, stride, padding)
        _nn.check_float("avg_pool2d", xp.isdtype, x=x)
        if not _ours(x):
            return _nn.avg_pool2d(xp, x, kernel_size, stride, padding, count_include_pad)
        out = self._cp.empty((win.n, win.c, win.out_h, win.out_w), dtype=x.dtype)
        flag = np.int32(bool(count_include_pad))
        return self._launch("avg_pool", out.size, out, self._contiguous(x), *geometry(win), flag)

    def avg_pool2d_backward(
        self,
        dy: Array,
        x_shape: Any,
        kernel_size: Any,
        stride: Any = None,
        padding: Any = 0,
        count_include_pad: bool = True,
    ) -> Array:
        op = "avg_pool2d_backward"
        xp = namespace_of(dy)
        win = _nn.pool_window(op, x_shape, kernel_size, stride, padding)
        _nn.check_output_shape(op, "dy", dy.shape, win, win.c)
        _nn.check_float(op, xp.isdtype, dy=dy)
        if not _ours(dy):
            return _nn.avg_pool2d_backward(
                xp, dy, x_shape, kernel_size, stride, padding, count_include_pad
            )
        out = self._cp.empty((win.n, win.c, win.h, win.w), dtype=dy.dtype)
        flag = np.int32(bool(count_include_pad))
        dy_ = self._contiguous(dy)
        return self._launch("avg_pool_backward", out.size, out, dy_, *geometry(win), flag)

    # -- softmax family -----------------------------------------------------------------------------
    def _rows(self, x: Array, axis: Any, op: str) -> tuple[int, int] | None:
        """``(rows, cols)`` when the row kernels take ``x`` along ``axis``, else None."""
        (ax,) = _nn._axis_tuple(axis, x.ndim, op)
        cols = int(x.shape[ax]) if x.ndim else 0
        if ax != x.ndim - 1 or not _ours(x) or not 0 < cols <= SOFTMAX_MAX_ROW:
            return None
        return math.prod(int(s) for s in x.shape) // cols, cols

    def _softmax_rows(self, x: Array, axis: Any, op: str, log_mode: int) -> Array | None:
        xp = namespace_of(x)
        _nn.check_float(op, xp.isdtype, x=x)
        found = self._rows(x, axis, op)
        if found is None:
            return None
        rows, cols = found
        x_ = self._contiguous(x)
        out = self._cp.empty(x.shape, dtype=x.dtype)
        self.kernels.launch(
            x.dtype, "softmax_rows", rows, np.int64(rows), np.int64(cols), out, x_,
            np.int32(log_mode),
        )  # fmt: skip
        return out

    def softmax(self, x: Array, axis: int = -1) -> Array:
        out = self._softmax_rows(x, axis, "softmax", 0)
        return _nn.softmax(namespace_of(x), x, axis) if out is None else out

    def log_softmax(self, x: Array, axis: int = -1) -> Array:
        out = self._softmax_rows(x, axis, "log_softmax", 1)
        return _nn.log_softmax(namespace_of(x), x, axis) if out is None else out

    def softmax_cross_entropy(
        self, logits: Array, labels: Array, scale: float = 1.0
    ) -> tuple[Array, Array]:
        op = "softmax_cross_entropy"
        xp = namespace_of(logits, labels)
        classes = _nn.check_cross_entropy(op, xp.isdtype, logits, labels)
        rows = math.prod(int(s) for s in logits.shape[:-1])
        if not _ours(logits) or not 0 < classes <= SOFTMAX_MAX_ROW or rows == 0:
            return _nn.softmax_cross_entropy(xp, logits, labels, scale)
        cp = self._cp
        x_ = self._contiguous(logits)
        labels_ = cp.ascontiguousarray(labels.astype(np.int64, copy=False))
        dlogits = cp.empty(logits.shape, dtype=logits.dtype)
        row_loss = cp.empty((rows,), dtype=logits.dtype)
        self.kernels.launch(
            logits.dtype, "softmax_xent_rows", rows, np.int64(rows), np.int64(classes),
            dlogits, row_loss, x_, labels_, logits.dtype.type(scale),
        )  # fmt: skip
        return cp.sum(row_loss), dlogits

    # -- batch normalisation ------------------------------------------------------------------------
    def batch_norm(
        self, x: Array, gamma: Array, beta: Array, *, eps: float = 1e-5
    ) -> tuple[Array, Array, Array]:
        xp = namespace_of(x, gamma, beta)
        _nn.check_batch_norm(xp, x, gamma, beta, eps)
        if self.cudnn is not None:
            found = self.cudnn.batch_norm(x, gamma, beta, float(eps))
            if found is not None:
                y, mean, inv_std = found
                return y, mean, inv_std
        return _nn.batch_norm(xp, x, gamma, beta, eps)

    def batch_norm_backward(
        self, dy: Array, x: Array, gamma: Array, mean: Array, inv_std: Array
    ) -> tuple[Array, Array, Array]:
        xp = namespace_of(dy, x, gamma, mean, inv_std)
        _nn.check_batch_norm_backward(xp, dy, x, gamma, mean, inv_std)
        if self.cudnn is not None:
            found = self.cudnn.batch_norm_backward(dy, x, gamma, mean, inv_std)
            if found is not None:
                dx, dgamma, dbeta = found
                return dx, dgamma, dbeta
        return _nn.batch_norm_backward(xp, dy, x, gamma, mean, inv_std)
