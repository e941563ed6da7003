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

from collections.abc import Callable
from typing import Any

import numpy as np

from arraycore import _nn, namespace_of
from arraycore.device_kernels import SHARED_NN, KernelHost

from ._kernels import DTYPES, CudaKernels

Array = Any

#: The ``xp.nn`` entries with code of their own here (cuDNN first, then the fallback).
OWN_NN = (
    "conv2d",
    "conv2d_backward_data",
    "conv2d_backward_filter",
    "conv2d_transpose",
    "batch_norm",
    "batch_norm_backward",
)

#: The namespace entries :meth:`CudaNN.table` overrides.
NN_OVERRIDES = OWN_NN + SHARED_NN


def _ours(x: Array) -> bool:
    """Whether the shared kernels (arraycore.device_kernels) exist for ``x``'s dtype."""
    return bool(x.dtype.name in DTYPES)


class CudaNN(KernelHost):
    """``xp.nn`` overrides for one device. ``cudnn`` is a :class:`~._cudnn.Cudnn` or None.

    Pooling and the softmax family are :class:`arraycore.device_kernels.KernelHost`'s (the host
    side the OpenCL backend shares), launched here through CuPy.
    """

    def __init__(self, cupy: Any, cudnn: Any | None = None) -> None:
        self._cp = cupy
        self.kernels = CudaKernels(cupy)
        self.cudnn = cudnn

    def table(self) -> dict[str, Callable[..., Any]]:
        table: dict[str, Callable[..., Any]] = {f"nn.{n}": getattr(self, n) for n in OWN_NN}
        table.update(self.shared_overrides())
        return table

    # -- KernelHost: CuPy arrays and launches ------------------------------------------------------
    def kernel_empty(self, shape: tuple[int, ...], dtype: np.dtype) -> Array:
        return self._cp.empty(shape, dtype=dtype)

    def kernel_dense(self, x: Array) -> Array:
        return self._cp.ascontiguousarray(x)

    def kernel_arg(self, x: Array) -> Array:
        return x

    def kernel_launch(self, dtype: np.dtype, name: str, n: int, *args: Any) -> None:
        self.kernels.launch(dtype, name, n, *args)

    # -- helpers ------------------------------------------------------------------------------------
    def _im2col(self, x: Array, win: _nn.Window2d) -> Array:
        return self.shared_im2col(x, win)

    def _col2im(self, cols: Array, win: _nn.Window2d) -> Array:
        return self.shared_col2im(cols, win)

    def _channels_first(self, y: Array) -> Array:
        """``(N, C, H, W)`` as the ``(C, N*H*W)`` matrix the column layout multiplies."""
        n, c, h, w = y.shape
        return self._cp.ascontiguousarray(y.transpose(1, 0, 2, 3)).reshape(c, n * h * w)

    def _weights(self, w: Array) -> Array:
        return self._cp.ascontiguousarray(w).reshape(int(w.shape[0]), -1)

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
