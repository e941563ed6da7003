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

from arraycore import _nn
from arraycore.backend import dtype_name
from arraycore.device_kernels import SHARED_NN, KernelHost

from ._kernels import DTYPES, CudaKernels

Array = Any

#: The ``xp.nn`` entries with code of their own here (cuDNN first, then the reference).
OWN_NN = (
    "batch_norm",
    "batch_norm_backward",
    "scaled_dot_product_attention",
    "scaled_dot_product_attention_backward",
)

#: The namespace entries :meth:`CudaNN.table` overrides.
NN_OVERRIDES = OWN_NN + SHARED_NN


def _ours(x: Array) -> bool:
    """Whether the shared kernels (arraycore.device_kernels) exist for ``x``'s dtype."""
    return bool(dtype_name(x.dtype) in DTYPES)


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
        table: dict[str, Callable[..., Any]] = self.shared_overrides()
        table.update({f"nn.{n}": getattr(self, n) for n in OWN_NN})  # cuDNN first
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

    # -- cuDNN first for the convolutions ---------------------------------------------------------
    def accelerated(self, op: str, win: Any, *arrays: Any) -> Any:
        """cuDNN's result for a convolution pass, or None (not installed, or it declines)."""
        if self.cudnn is None:
            return None
        if op == "conv2d":
            return self.cudnn.conv2d(*arrays, win)
        if op == "conv2d_backward_data":
            return self.cudnn.conv2d_backward_data(*arrays, win)
        x, dy = arrays
        w_shape = (int(dy.shape[1]), win.c, win.kh, win.kw)
        return self.cudnn.conv2d_backward_filter(x, dy, win, w_shape)

    # -- batch normalisation ------------------------------------------------------------------------
    def batch_norm(
        self, x: Array, gamma: Array, beta: Array, *, eps: float = 1e-5
    ) -> tuple[Array, Array, Array]:
        xp = self._kernel_xp("batch_norm", x, gamma, beta)  # CuPy arrays of this device only
        _nn.check_batch_norm(xp, x, gamma, beta, eps)
        if self.cudnn is not None:
            found = self.cudnn.batch_norm(x, gamma, beta, float(eps))
            if found is not None:
                y, mean, inv_std = found
                return y, mean, inv_std
        y, mean, inv_std = self.shared_batch_norm(x, gamma, beta, eps=eps)
        return y, mean, inv_std

    def batch_norm_backward(
        self, dy: Array, x: Array, gamma: Array, mean: Array, inv_std: Array
    ) -> tuple[Array, Array, Array]:
        xp = self._kernel_xp("batch_norm_backward", dy, x, gamma, mean, inv_std)
        _nn.check_batch_norm_backward(xp, dy, x, gamma, mean, inv_std)
        if self.cudnn is not None:
            found = self.cudnn.batch_norm_backward(dy, x, gamma, mean, inv_std)
            if found is not None:
                dx, dgamma, dbeta = found
                return dx, dgamma, dbeta
        dx, dgamma, dbeta = self.shared_batch_norm_backward(dy, x, gamma, mean, inv_std)
        return dx, dgamma, dbeta

    # -- attention: cuDNN's flash attention for half precision, else the shared fused kernels ---
    def _cudnn_layout(self, q: Any, k: Any, v: Any, mask: Any) -> Any:
        """``(q, k, v, bias)`` as the 4-D (b, h, s, d) arrays and additive (1|b, 1|h, sq, skv)
        bias cuDNN's SDPA graph takes (a boolean mask becomes 0 / -inf), or None where the
        shapes do not fit it (more than two leading axes)."""
        cp = self._cp
        lead = tuple(int(s) for s in q.shape[:-2])
        if len(lead) > 2:
            return None
        four = (1,) * (2 - len(lead))
        q4, k4, v4 = (a.reshape(*four, *a.shape) for a in (q, k, v))
        if mask is None:
            return q4, k4, v4, None
        bias = mask
        if mask.dtype == cp.bool_:
            bias = cp.where(mask, 0.0, -cp.inf).astype(q.dtype)
        bias = bias.reshape((1,) * (4 - bias.ndim) + tuple(bias.shape))
        rows = (int(q.shape[-2]), int(k.shape[-2]))
        bias = cp.ascontiguousarray(cp.broadcast_to(bias, (*bias.shape[:2], *rows)))
        return q4, k4, v4, bias

    def _cudnn_empty_rows(self, bias: Any, causal: bool) -> Any:
        """Which rows of cuDNN's (b, h, sq, skv) ``bias`` attend to nothing (every key -inf,
        with ``causal``'s lower triangle), as (1|b, 1|h, sq, 1); None without a bias (then none
        can: causal keeps key 0). cuDNN's engines do not promise what such a row gives, so
        :meth:`scaled_dot_product_attention` sets it as the reference does: output 0,
        log-sum-exp +inf (backward's probabilities 0)."""
        if bias is None:
            return None
        cp = self._cp
        if causal:
            sq, skv = (int(s) for s in bias.shape[-2:])
            bias = cp.where(cp.tri(sq, skv, dtype=cp.bool_), bias, bias.dtype.type(-cp.inf))
        return bias.max(axis=-1, keepdims=True) == -cp.inf

    def scaled_dot_product_attention(
        self,
        q: Array,
        k: Array,
        v: Array,
        mask: Array | None = None,
        *,
        scale: float | None = None,
        causal: bool = False,
        dropout_mask: Array | None = None,
        recompute: bool | None = None,
    ) -> tuple[Array, Array]:
        """cuDNN's SDPA (flash attention) for float16/bfloat16 without dropout, the rows'
        log-sum-exp kept in float32; else :meth:`shared_scaled_dot_product_attention`."""
        op = "scaled_dot_product_attention"
        xp = self._kernel_xp(op, *(a for a in (q, k, v, mask, dropout_mask) if a is not None))
        factor = _nn.check_attention(op, xp, q, k, v, mask, dropout_mask, scale)
        if self.cudnn is not None and dropout_mask is None and recompute is not False:
            laid = self._cudnn_layout(q, k, v, mask)
            found = None if laid is None else self.cudnn.attention(*laid, causal, factor)
            if found is not None:
                out, stats = found
                empty = self._cudnn_empty_rows(laid[3], causal)
                if empty is not None:
                    out = self._cp.where(empty, out.dtype.type(0), out)
                    stats = self._cp.where(empty, stats.dtype.type(np.inf), stats)
                return out.reshape(*q.shape[:-1], v.shape[-1]), stats.reshape(q.shape[:-1])
        out, saved = self.shared_scaled_dot_product_attention(
            q, k, v, mask, scale=scale, causal=causal, dropout_mask=dropout_mask,
            recompute=recompute,
        )  # fmt: skip
        return out, saved

    def scaled_dot_product_attention_backward(
        self,
        dy: Array,
        q: Array,
        k: Array,
        v: Array,
        out: Array,
        saved: Array,
        mask: Array | None = None,
        *,
        scale: float | None = None,
        causal: bool = False,
        dropout_mask: Array | None = None,
    ) -> tuple[Array, Array, Array]:
        """cuDNN's SDPA backward where the forward ran on cuDNN (float32 stats beside half
        precision q); else :meth:`shared_scaled_dot_product_attention_backward`."""
        op = "scaled_dot_product_attention_backward"
        given = (dy, q, k, v, out, saved, mask, dropout_mask)
        xp = self._kernel_xp(op, *(a for a in given if a is not None))
        factor, has_p = _nn.check_attention_backward(
            xp, dy, q, k, v, out, saved, mask, dropout_mask, scale
        )
        cudnn_stats = not has_p and saved.dtype != q.dtype and dropout_mask is None
        if self.cudnn is not None and cudnn_stats:
            laid = self._cudnn_layout(q, k, v, mask)
            if laid is not None:
                q4, k4, v4, bias = laid
                shape4 = (*q4.shape[:3], int(v.shape[-1]))
                found = self.cudnn.attention_backward(
                    dy.reshape(shape4), q4, k4, v4, out.reshape(shape4),
                    saved.reshape(*q4.shape[:3], 1), bias, causal, factor,
                )  # fmt: skip
                if found is not None:
                    dq, dk, dv = found
                    empty = self._cudnn_empty_rows(bias, causal)
                    if empty is not None:  # no gradient from a row that attends to nothing
                        dq = self._cp.where(empty, dq.dtype.type(0), dq)
                    return dq.reshape(q.shape), dk.reshape(k.shape), dv.reshape(v.shape)
        dq, dk, dv = self.shared_scaled_dot_product_attention_backward(
            dy, q, k, v, out, saved, mask, scale=scale, causal=causal, dropout_mask=dropout_mask
        )
        return dq, dk, dv
