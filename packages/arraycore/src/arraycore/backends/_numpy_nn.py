"""Fast NumPy kernels for the NumPy backend's ``xp.nn`` (replacing :mod:`arraycore._nn`).

Same signatures as the references minus the ``xp`` argument, same argument checks and error
messages (shared from :mod:`arraycore._nn`), same results within float tolerance and the same
tie-breaking. What each one does differently, and why:

- Convolutions build im2col from a ``sliding_window_view`` a chunk of images at a time (about
  2 MB of columns, one buffer per call) and multiply each chunk while it is in the cache; the
  filter gradient sums the chunks' products with ``dy``. The input gradient of a stride-1
  convolution is the convolution of ``dy`` with the flipped, transposed kernel (no col2im).
  Layers with short output rows (under 16) build their columns batch-innermost instead, where
  the copies move long rows; there, and for strided convolutions and the transposed
  convolution, col2im takes one GEMM's columns, tap-major and batch-innermost, ``(KH, KW, C,
  positions, N)``, so each tap's strided ``+=`` runs over long contiguous rows.
- Pooling reduces rows first, then columns (separable), with ``out=`` buffers: fewer passes over
  memory than one pass per kernel tap. Reductions over small window axes (``max(axis=(4, 5))``
  of a window view) and ``argmax`` within windows measured 3-20x slower than these loops.
- Softmax, log-softmax and one-hot skip the reference's generic checks on the common path
  (finite maxima, int64/int32 indices, an explicit dtype) and fall back to it otherwise; a
  training step of a small network spends most of its time in such per-call overheads.
- Softmax cross-entropy (integer labels in range, float32/float64) shifts by the max of the
  whole array rather than each row's (a reduction along a short last axis costs several times
  a flat one; inputs where that would lose precision, a row far below the rest, go to the
  reference) and reaches the label entries through flat indices: no one-hot rows.
- The GRU (float32, numba installed) runs each time step as one product with ``u`` (oneDNN's
  or NumPy's) and one compiled kernel for the gates and the state, forward and backward, where
  the reference makes about fifteen NumPy calls per step; the weight gradients are the
  reference's one product over every step.
- Max-pool backward hands the gradient to each window's first maximum by carrying the
  not-yet-delivered gradient from tap to tap (multiply by the match mask, add, subtract), with
  no boolean bookkeeping; inputs where that trick is not exact (NaN in a window, non-finite
  ``dy``, a window of -inf next to padding) go to the reference.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .. import _checks, _erf, _nn, _nn_gru, _nn_rnn
from .._nn_batchnorm import (
    check_batch_norm,
    check_batch_norm_backward,
    check_batch_norm_relu_backward,
)
from ..nn_shapes import (
    Window2d,
    check_output_shape,
    conv_transpose_window,
    conv_window,
    pool_window,
)
from . import _numba, _onednn
from .numpy import _matmul
from .numpy import gemm as _mm

__all__ = [
    "affine",
    "conv2d",
    "conv2d_backward_data",
    "conv2d_backward_filter",
    "conv2d_transpose",
    "max_pool2d",
    "max_pool2d_backward",
    "avg_pool2d",
    "avg_pool2d_backward",
    "batch_norm",
    "batch_norm_backward",
    "batch_norm_relu",
    "batch_norm_relu_backward",
    "bias_relu",
    "bias_relu_backward",
    "gelu",
    "gelu_backward",
    "relu_backward",
    "layer_norm",
    "layer_norm_backward",
    "softmax",
    "softmax_backward",
    "log_softmax",
    "one_hot",
    "softmax_cross_entropy",
    "lstm",
    "lstm_backward",
    "gru_sequence",
    "gru_sequence_backward",
]


def _padded(x: np.ndarray, win: Window2d, fill: float) -> np.ndarray:
    if not win.padded:
        return x
    xpad = np.full((win.n, win.c, win.padded_h, win.padded_w), fill, dtype=x.dtype)
    rows, cols = win.interior()
    xpad[:, :, rows, cols] = x
    return xpad


def _crop(xpad: np.ndarray, win: Window2d) -> np.ndarray:
    if not win.padded:
        return xpad
    rows, cols = win.interior()
    return xpad[:, :, rows, cols]


def _windows(x: np.ndarray, win: Window2d) -> np.ndarray:
    """A read-only ``(N, C, out_h, out_w, KH, KW)`` view of every window of the padded input."""
    (sh, sw), (dh, dw) = win.stride, win.dilation
    span = (dh * (win.kh - 1) + 1, dw * (win.kw - 1) + 1)
    view = sliding_window_view(_padded(x, win, 0), span, axis=(2, 3))
    return view[:, :, ::sh, ::sw, ::dh, ::dw]


#: Output rows shorter than this make the NCHW im2col copy loop over tiny rows: build the
#: columns batch-innermost instead (see :func:`_im2col_t`).
_SHORT_ROWS = 16


def _batch_inner(win: Window2d) -> bool:
    return win.out_w < _SHORT_ROWS and win.stride[1] == 1


def _im2col_t(x: np.ndarray, win: Window2d) -> np.ndarray:
    """``(C*KH*KW, out_h*out_w*N)``: the columns with the batch innermost.

    The image goes to ``(C, H, W, N)`` with one copy; every window row is then a contiguous run
    of ``out_w * N`` elements, so the im2col copy moves long rows even when ``out_w`` is small.
    """
    xt = np.empty((win.c, win.padded_h, win.padded_w, win.n), dtype=x.dtype)
    np.copyto(xt, _padded(x, win, 0).transpose(1, 2, 3, 0))
    (sh, sw), (dh, dw) = win.stride, win.dilation
    span = (dh * (win.kh - 1) + 1, dw * (win.kw - 1) + 1)
    view = sliding_window_view(xt, span, axis=(1, 2))[:, ::sh, ::sw, :, ::dh, ::dw]
    k = win.c * win.kh * win.kw
    return view.transpose(0, 4, 5, 1, 2, 3).reshape(k, win.out_h * win.out_w * win.n)


#: im2col runs in chunks of whole images of about this many bytes of columns: each chunk is
#: multiplied while it is still in the cache, and no columns buffer of every image (tens of MB,
#: page-faulted afresh each call, read back from memory by a GEMM that is then bandwidth-bound)
#: is ever built.
_CHUNK_BYTES = 1 << 21


def _column_chunks(
    x: np.ndarray, win: Window2d, dtype: np.dtype[Any]
) -> Iterator[tuple[slice, np.ndarray]]:
    """The im2col columns a chunk of whole images at a time, ``(images, K, positions)``, built
    into one reused buffer of about ``_CHUNK_BYTES``; yields the images' slice with them."""
    k, positions = win.c * win.kh * win.kw, win.out_h * win.out_w
    group = max(1, min(win.n, _CHUNK_BYTES // max(k * positions * dtype.itemsize, 1)))
    windows = _windows(x, win).transpose(0, 1, 4, 5, 2, 3)  # (N, C, KH, KW, out_h, out_w)
    cols = np.empty((group, win.c, win.kh, win.kw, win.out_h, win.out_w), dtype=dtype)
    for n0 in range(0, win.n, group):
        g = min(group, win.n - n0)
        np.copyto(cols[:g], windows[n0 : n0 + g])
        yield slice(n0, n0 + g), cols[:g].reshape(g, k, positions)


def _conv_chunked(x: np.ndarray, w: np.ndarray, win: Window2d) -> np.ndarray:
    """``conv2d`` as im2col + GEMM, a chunk of images at a time (:func:`_column_chunks`)."""
    o, k = w.shape[0], win.c * win.kh * win.kw
    dtype = np.result_type(x, w)
    w2 = w.reshape(o, k).astype(dtype, copy=False)
    y = np.empty((win.n, o, win.out_h * win.out_w), dtype=dtype)
    for images, cols in _column_chunks(x, win, dtype):
        _mm(w2, cols, out=y[images])
    return y.reshape(win.n, o, win.out_h, win.out_w)


def _filter_grad_chunked(x: np.ndarray, dy: np.ndarray, win: Window2d) -> np.ndarray:
    """``dw (O, K)``: per chunk of images, their columns times their ``dy``, summed."""
    o = dy.shape[1]
    dtype = np.result_type(x, dy)
    dy3 = dy.reshape(win.n, o, win.out_h * win.out_w)
    dw = np.zeros((o, win.c * win.kh * win.kw), dtype=dtype)
    for images, cols in _column_chunks(x, win, dtype):
        dw += _mm(dy3[images], cols.transpose(0, 2, 1)).sum(axis=0)
    return dw


def _data_grad_as_conv(dy: np.ndarray, w: np.ndarray, win: Window2d) -> np.ndarray | None:
    """``dx`` of a stride-1 convolution as a convolution of ``dy`` with the flipped, transposed
    kernel (no col2im), or ``None`` where the padding would have to be negative."""
    if win.stride != (1, 1):
        return None
    (dh, dw_), ((t, b), (left, r)) = win.dilation, win.pads
    span_h, span_w = dh * (win.kh - 1), dw_ * (win.kw - 1)
    pads = ((span_h - t, span_h - b), (span_w - left, span_w - r))
    if min(pads[0] + pads[1]) < 0:
        return None
    flipped = np.ascontiguousarray(w[:, :, ::-1, ::-1].transpose(1, 0, 2, 3))
    o = w.shape[0]
    win_t = conv_window(
        "conv2d_backward_data",
        (win.n, o, win.out_h, win.out_w),
        flipped.shape,
        1,
        pads,
        win.dilation,
    )
    if _batch_inner(win_t) or (win_t.out_h, win_t.out_w) != (win.h, win.w):
        return None
    return _conv_chunked(dy, flipped, win_t)


def _dy_t(dy: np.ndarray, n: int, o: int, positions: int) -> np.ndarray:
    """``dy`` as ``(O, positions * N)``, batch innermost (one copy)."""
    dy_t = np.empty((o, positions, n), dtype=dy.dtype)
    np.copyto(dy_t, dy.reshape(n, o, positions).transpose(1, 2, 0))
    return dy_t.reshape(o, positions * n)


def _col2im(w: np.ndarray, dy: np.ndarray, win: Window2d) -> np.ndarray:
    """The adjoint of im2col + matmul: ``dx`` from weights ``(O, C, KH, KW)`` and ``dy``.

    One GEMM gives the columns batch-innermost, ``(KH, KW, C, out_h, out_w, N)``, and they are
    added back into an image laid out ``(C, H, W, N)``: each tap's strided ``+=`` then runs over
    rows of ``out_w * N`` contiguous elements (one image-row of every image) rather than
    ``out_w``, which is what made col2im slow. One copy brings ``dx`` back to NCHW.
    """
    o, k2, n, c = w.shape[0], win.kh * win.kw, win.n, win.c
    positions = win.out_h * win.out_w
    w_taps = w.transpose(2, 3, 1, 0).reshape(k2 * c, o)
    cols = _mm(w_taps, _dy_t(dy, n, o, positions))
    cols = cols.reshape(win.kh, win.kw, c, win.out_h, win.out_w, n)
    xpad = np.zeros((c, win.padded_h, win.padded_w, n), dtype=cols.dtype)
    for i in range(win.kh):
        for j in range(win.kw):
            rows, cols_ = win.window_slices(i, j)
            xpad[:, rows, cols_, :] += cols[i, j]
    if win.padded:
        rows, cols_ = win.interior()
        xpad = xpad[:, rows, cols_, :]
    dx = np.empty((n, c, win.h, win.w), dtype=cols.dtype)
    np.copyto(dx, xpad.transpose(3, 0, 1, 2))
    return dx


# -- convolution ----------------------------------------------------------------------------------
_F16 = np.dtype(np.float16)


def _in_float32(fn: Any, a: np.ndarray, b: np.ndarray, *args: Any, **kwargs: Any) -> np.ndarray:
    """``fn`` on float16 operands computed in float32 (oneDNN's or BLAS's kernels) and rounded
    to float16 once: float32 accumulation, as cuDNN's half convolutions accumulate, instead of
    NumPy's float16 loops (tens of times slower)."""
    out: np.ndarray = fn(a.astype(np.float32), b.astype(np.float32), *args, **kwargs)
    return out.astype(_F16)


def conv2d(
    x: np.ndarray, w: np.ndarray, *, stride: Any = 1, padding: Any = 0, dilation: Any = 1
) -> np.ndarray:
    """:func:`arraycore._nn.conv2d` with im2col from a window view and one batched matmul."""
    win = conv_window("conv2d", x.shape, w.shape, stride, padding, dilation)
    _nn.check_float("conv2d", np.isdtype, x=x, w=w)
    if x.dtype == _F16 and w.dtype == _F16:
        return _in_float32(conv2d, x, w, stride=stride, padding=padding, dilation=dilation)
    o, k = w.shape[0], win.c * win.kh * win.kw
    plan = _onednn.conv_plan(win, o, x.dtype, w.dtype)
    if plan is not None:
        return plan.forward(x, w)
    y: np.ndarray
    if _batch_inner(win):
        # one GEMM over every image's positions, then one copy back to NCHW
        y_t = _mm(w.reshape(o, k), _im2col_t(x, win))
        y = np.empty((win.n, o, win.out_h, win.out_w), dtype=y_t.dtype)
        np.copyto(y, y_t.reshape(o, win.out_h, win.out_w, win.n).transpose(3, 0, 1, 2))
        return y
    return _conv_chunked(x, w, win)


def conv2d_backward_data(
    dy: np.ndarray,
    w: np.ndarray,
    x_shape: Sequence[int],
    *,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
) -> np.ndarray:
    """:func:`arraycore._nn.conv2d_backward_data`: one batched matmul, then col2im."""
    op = "conv2d_backward_data"
    win = conv_window(op, x_shape, w.shape, stride, padding, dilation)
    check_output_shape(op, "dy", dy.shape, win, w.shape[0])
    _nn.check_float(op, np.isdtype, dy=dy, w=w)
    if dy.dtype == _F16 and w.dtype == _F16:
        return _in_float32(
            conv2d_backward_data, dy, w, x_shape, stride=stride, padding=padding, dilation=dilation
        )
    plan = _onednn.conv_plan(win, w.shape[0], dy.dtype, w.dtype)
    if plan is not None:
        return plan.backward_data(dy, w)
    dx = None if _batch_inner(win) else _data_grad_as_conv(dy, w, win)
    return _col2im(w, dy, win) if dx is None else dx


def conv2d_backward_filter(
    x: np.ndarray,
    dy: np.ndarray,
    w_shape: Sequence[int],
    *,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
) -> np.ndarray:
    """:func:`arraycore._nn.conv2d_backward_filter`: im2col and one contraction."""
    op = "conv2d_backward_filter"
    win = conv_window(op, x.shape, w_shape, stride, padding, dilation)
    o = int(w_shape[0])
    check_output_shape(op, "dy", dy.shape, win, o)
    _nn.check_float(op, np.isdtype, x=x, dy=dy)
    if x.dtype == _F16 and dy.dtype == _F16:
        return _in_float32(
            conv2d_backward_filter,
            x,
            dy,
            w_shape,
            stride=stride,
            padding=padding,
            dilation=dilation,
        )
    plan = _onednn.conv_plan(win, o, x.dtype, dy.dtype)
    if plan is not None:
        return plan.backward_filter(x, dy)
    k, positions = win.c * win.kh * win.kw, win.out_h * win.out_w
    dy3 = dy.reshape(win.n, o, positions)
    dw: np.ndarray
    if _batch_inner(win):
        # short output rows: batch-innermost columns and dy, one GEMM (transpose in its flags)
        dw = _mm(_dy_t(dy, win.n, o, positions), _im2col_t(x, win).T)
    elif positions >= k:
        # many positions, short columns (first layers): a chunk of images at a time, their
        # products with dy summed (no transposed copy of the large dy)
        dw = _filter_grad_chunked(x, dy, win)
    else:
        # long columns (deep layers): one product over (batch, position) after transposing
        # dy, the smaller operand
        cols = _windows(x, win).transpose(1, 4, 5, 0, 2, 3).reshape(k, win.n * positions)
        dw = _mm(dy3.transpose(1, 0, 2).reshape(o, win.n * positions), cols.T)
    return dw.reshape(o, win.c, win.kh, win.kw)


def conv2d_transpose(
    x: np.ndarray,
    w: np.ndarray,
    *,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    output_padding: Any = 0,
) -> np.ndarray:
    """:func:`arraycore._nn.conv2d_transpose`: one batched matmul, then col2im."""
    op = "conv2d_transpose"
    win = conv_transpose_window(op, x.shape, w.shape, stride, padding, dilation, output_padding)
    _nn.check_float(op, np.isdtype, x=x, w=w)
    return _col2im(w, x, win)


# -- batch normalisation --------------------------------------------------------------------------
def _channels(x: np.ndarray) -> np.ndarray:
    """``x`` as ``(N, C, positions)`` (a view; positions 1 for (N, C) input)."""
    return x.reshape(x.shape[0], x.shape[1], math.prod(x.shape[2:]))


def _channel_sum(a3: np.ndarray) -> np.ndarray:
    """Per-channel sums of ``(N, C, P)``: the contiguous axis first, then the batch."""
    sums: np.ndarray = a3.sum(axis=2).sum(axis=0)
    return sums


def batch_norm(
    x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, *, eps: float = 1e-5
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`arraycore._nn_batchnorm.batch_norm` in four passes over ``x``: sum, centre,
    sum of squares (``einsum``, no temporary), scale and shift in place."""
    check_batch_norm(np.isdtype, x, gamma, beta, eps)
    compiled = _numba.batch_norm(x, gamma, beta, eps)
    if compiled is not None:
        return compiled
    x3 = _channels(x)
    count = x3.shape[0] * x3.shape[2]
    dt = x.dtype
    mean = (_channel_sum(x3) / max(count, 1)).astype(dt, copy=False)
    y = x3 - mean[:, None]
    var = np.einsum("ncp,ncp->c", y, y) / max(count, 1)
    inv_std = (1.0 / np.sqrt(var + float(eps))).astype(dt, copy=False)
    y *= (inv_std * gamma)[:, None]
    y += beta[:, None]
    return y.reshape(x.shape), mean, inv_std


def batch_norm_backward(
    dy: np.ndarray, x: np.ndarray, gamma: np.ndarray, mean: np.ndarray, inv_std: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`arraycore._nn_batchnorm.batch_norm_backward` as ``dx = a * dy + b * (x - mean)
    + c`` per channel, from two reductions (``sum(dy)``, ``sum(dy * (x - mean))``), without
    forming ``x_hat``."""
    check_batch_norm_backward(np.isdtype, dy, x, gamma, mean, inv_std)
    compiled = _numba.batch_norm_backward(dy, x, gamma, mean, inv_std)
    if compiled is not None:
        return compiled
    x3, dy3 = _channels(x), _channels(dy)
    count = x3.shape[0] * x3.shape[2]
    dt = dy.dtype
    centred = x3 - mean[:, None]
    dbeta = _channel_sum(dy3)
    dgamma = (inv_std * np.einsum("ncp,ncp->c", dy3, centred)).astype(dt, copy=False)
    if count == 0:
        return dy.copy(), dgamma, dbeta
    # dx = k * (dy - dbeta / count - x_hat * dgamma / count) with k = gamma * inv_std
    k = gamma * inv_std
    dx = dy3 * k[:, None]
    centred *= (-k * inv_std * dgamma / count)[:, None]
    dx += centred
    dx -= (k * dbeta / count)[:, None]
    return dx.reshape(x.shape), dgamma, dbeta.astype(dt, copy=False)


def batch_norm_relu(
    x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, *, eps: float = 1e-5
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`arraycore._nn_batchnorm.batch_norm_relu`: numba's batch-norm kernel with the ReLU
    in its last pass (one write of ``y``, no second pass over it), else :func:`batch_norm` and
    an in-place ``maximum``."""
    check_batch_norm(np.isdtype, x, gamma, beta, eps, op="batch_norm_relu")
    compiled = _numba.batch_norm(x, gamma, beta, eps, relu=True)
    if compiled is not None:
        return compiled
    y, mean, inv_std = batch_norm(x, gamma, beta, eps=eps)
    np.maximum(y, 0.0, out=y)
    return y, mean, inv_std


def batch_norm_relu_backward(
    dy: np.ndarray,
    x: np.ndarray,
    gamma: np.ndarray,
    mean: np.ndarray,
    inv_std: np.ndarray,
    y: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`arraycore._nn_batchnorm.batch_norm_relu_backward`: numba's kernel forms the ReLU's
    gradient ``dy * (y > 0)`` as it reads ``dy`` (never stored), else :func:`relu_backward` and
    :func:`batch_norm_backward`."""
    check_batch_norm_relu_backward(np.isdtype, dy, x, gamma, mean, inv_std, y)
    compiled = _numba.batch_norm_backward(dy, x, gamma, mean, inv_std, y)
    if compiled is not None:
        return compiled
    return batch_norm_backward(relu_backward(dy, y), x, gamma, mean, inv_std)


# -- layer normalisation --------------------------------------------------------------------------
def layer_norm(
    x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, *, eps: float = 1e-5
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`arraycore._nn.layer_norm`: numba's row kernel for C-contiguous float32 (two passes
    over memory instead of about eight), else the reference on NumPy."""
    _nn.check_layer_norm(np.isdtype, x, gamma, beta, eps)
    compiled = _numba.layer_norm(x, gamma, beta, eps)
    if compiled is not None:
        return compiled
    y, mean, inv_std = _nn.layer_norm(np, x, gamma, beta, eps)
    return np.asarray(y), np.asarray(mean), np.asarray(inv_std)


def layer_norm_backward(
    dy: np.ndarray, x: np.ndarray, gamma: np.ndarray, mean: np.ndarray, inv_std: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`arraycore._nn.layer_norm_backward`, by numba where :func:`layer_norm` would be."""
    _nn.check_layer_norm_backward(np.isdtype, dy, x, gamma, mean, inv_std)
    compiled = _numba.layer_norm_backward(dy, x, gamma, mean, inv_std)
    if compiled is not None:
        return compiled
    dx, dgamma, dbeta = _nn.layer_norm_backward(np, dy, x, gamma, mean, inv_std)
    return np.asarray(dx), np.asarray(dgamma), np.asarray(dbeta)


# -- GELU -----------------------------------------------------------------------------------------
_ONEDNN_GELU = {"tanh": "gelu_tanh", "none": "gelu_erf"}


def gelu(x: np.ndarray, *, approximate: str = "none") -> np.ndarray:
    """:func:`arraycore._nn.gelu`: oneDNN's vectorised, multi-threaded kernel for contiguous
    float32 (one pass instead of eight), else the reference on NumPy, the exact form's erfc by
    :func:`arraycore._erf.erfc_numpy` (fdlibm's rational approximations interval by interval,
    within 2x of SciPy's time; SciPy is not consulted, so results do not depend on it)."""
    _nn.check_gelu("gelu", np.isdtype, approximate, x=x)
    plan = _onednn.eltwise_plan(_ONEDNN_GELU[approximate], x)
    if plan is not None:
        y: np.ndarray = plan.forward(x)
        if approximate == "none" and x.size and np.fmax.reduce(x, axis=None) == np.inf:
            # oneDNN's exact GELU gives NaN at +inf on AVX-512 CPUs (3.2, measured 2026-11-27;
            # on AVX2 +inf): gelu(+inf) is +inf, as the reference and the other backends say
            y[np.isposinf(x)] = np.inf
        return y
    return np.asarray(_nn.gelu(np, x, approximate=approximate, erfc_fn=_erf.erfc_numpy))


def gelu_backward(dy: np.ndarray, x: np.ndarray, *, approximate: str = "none") -> np.ndarray:
    """:func:`arraycore._nn.gelu_backward`, by oneDNN where :func:`gelu` would be."""
    _nn.check_gelu("gelu_backward", np.isdtype, approximate, dy=dy, x=x)
    plan = _onednn.eltwise_plan(_ONEDNN_GELU[approximate], dy, x)
    if plan is not None:
        return plan.backward(dy, x)
    erfc_fn = _erf.erfc_numpy
    return np.asarray(_nn.gelu_backward(np, dy, x, approximate=approximate, erfc_fn=erfc_fn))


#: The dtypes :func:`relu_backward` checks inline (the rest go through the full check).
_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)


def _axis_of(a: np.ndarray, axis: Any) -> int | None:
    """``axis`` of ``a`` counted from 0 where ``a`` is a float32/float64 ndarray and ``axis`` a
    plain int in range (the common case, tested inline: a small layer's step pays little over
    two calls), else ``None`` (the full checks then run)."""
    dt = a.dtype
    if type(a) is np.ndarray and (dt is _F32 or dt is _F64) and type(axis) is int:
        ndim = a.ndim
        if -ndim <= axis < ndim:
            return axis % ndim
    return None


def affine(x: np.ndarray, w: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """:func:`arraycore._nn.affine`: one oneDNN product with its bias for large float32 operands
    (``x``'s rows as one 2-D product), else ``np.matmul`` and an in-place add."""
    dt = x.dtype
    if not (
        type(x) is np.ndarray
        and type(w) is np.ndarray
        and type(bias) is np.ndarray
        and (dt is _F32 or dt is _F64)
        and w.dtype is dt
        and bias.dtype is dt
        and x.ndim
        and w.ndim == 2
        and x.shape[-1] == w.shape[0]
        and bias.shape == w.shape[1:]
    ):  # the common case checked inline, the rest by the reference's checks
        _nn.check_affine(np.isdtype, x, w, bias)
    if dt is _F32 and x.ndim >= 2 and x.size * w.shape[1] >= _onednn.MATMUL_MIN_WORK:
        lead = x.shape[:-1]
        rows = x if x.ndim == 2 else x.reshape(-1, x.shape[-1])  # a view where x is contiguous
        y = _onednn.matmul(rows, w, bias)
        if y is not None:
            return y if x.ndim == 2 else y.reshape(*lead, w.shape[1])
    out: np.ndarray = _matmul(x, w)
    np.add(out, bias, out=out)
    return out


def bias_relu(
    x: np.ndarray, bias: np.ndarray, *, axis: int = 1, out: np.ndarray | None = None
) -> np.ndarray:
    """:func:`arraycore._nn.bias_relu`: one compiled pass over the OpenMP threads (numba) for
    large float32/float64 arrays, else the sum and an in-place ``maximum``; into ``out`` where
    given (``x`` itself allowed)."""
    ax = _axis_of(x, axis)
    if (
        ax is None
        or type(bias) is not np.ndarray
        or bias.dtype is not x.dtype
        or bias.shape != (x.shape[ax],)
        or (
            out is not None
            and (type(out) is not np.ndarray or out.dtype is not x.dtype or out.shape != x.shape)
        )
    ):
        ax = _nn.check_bias_relu(np.isdtype, x, bias, axis, out)
    if x.size >= _numba.PARALLEL_MIN:
        compiled = _numba.bias_relu(x, bias, ax, np.empty_like(x) if out is None else out)
        if compiled is not None:
            return compiled
    b = bias if ax == x.ndim - 1 else bias.reshape((x.shape[ax],) + (1,) * (x.ndim - 1 - ax))
    y: np.ndarray = np.add(x, b, out=out)
    np.maximum(y, 0.0, out=y)
    return y


def bias_relu_backward(
    dy: np.ndarray, y: np.ndarray, *, axis: int = 1
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`arraycore._nn.bias_relu_backward`: one compiled pass (numba) for large
    float32/float64 arrays, else :func:`relu_backward` and a sum."""
    ax = _axis_of(y, axis)
    if ax is None or type(dy) is not np.ndarray or dy.dtype is not y.dtype or dy.shape != y.shape:
        ax = _nn.check_bias_relu_backward(np.isdtype, dy, y, axis)
    if dy.size >= _numba.PARALLEL_MIN:
        compiled = _numba.bias_relu_backward(dy, y, ax)
        if compiled is not None:
            return compiled
    dx = relu_backward(dy, y)
    return dx, np.add.reduce(dx, axis=_nn.other_axes(y.ndim, ax))


def relu_backward(dy: np.ndarray, y: np.ndarray) -> np.ndarray:
    """:func:`arraycore._nn.relu_backward`: one compiled pass over the OpenMP threads (numba)
    for large float32/float64 arrays, else NumPy's product with the comparison (which, like
    ``xp.multiply``, warns where an infinite ``dy`` meets an off unit)."""
    dt = dy.dtype
    if not (
        type(dy) is np.ndarray
        and type(y) is np.ndarray
        and y.dtype is dt
        and (dt is _F32 or dt is _F64)
        and dy.shape == y.shape
    ):  # the common case checked inline: a small layer's step pays little over two calls
        _nn.check_relu_backward(np.isdtype, dy, y)
    elif dy.size >= _numba.PARALLEL_MIN:
        out = _numba.relu_backward(dy, y)
        if out is not None:
            return out
    product: np.ndarray = np.multiply(dy, np.greater(y, 0.0))  # a float times a bool: dy.dtype
    return product


# -- pooling ----------------------------------------------------------------------------------------
def _separable(xpad: np.ndarray, win: Window2d, ufunc: np.ufunc) -> np.ndarray:
    """``ufunc``-reduce every window: over its rows first, then over its columns."""
    (sh, sw), n_rows, n_cols = win.stride, win.out_h, win.out_w

    def rows(i: int) -> slice:
        return slice(i, i + sh * (n_rows - 1) + 1, sh)

    def cols(j: int) -> slice:
        return slice(j, j + sw * (n_cols - 1) + 1, sw)

    if win.kh == 1:
        acc = xpad[:, :, rows(0), :]
    else:
        acc = ufunc(xpad[:, :, rows(0), :], xpad[:, :, rows(1), :])
        for i in range(2, win.kh):
            ufunc(acc, xpad[:, :, rows(i), :], out=acc)
    if win.kw == 1:
        return np.array(acc[:, :, :, cols(0)])
    out: np.ndarray = ufunc(acc[:, :, :, cols(0)], acc[:, :, :, cols(1)])
    for j in range(2, win.kw):
        ufunc(out, acc[:, :, :, cols(j)], out=out)
    return out


def max_pool2d(x: np.ndarray, kernel_size: Any, stride: Any = None, padding: Any = 0) -> np.ndarray:
    """:func:`arraycore._nn.max_pool2d`, separable: max over rows, then over columns."""
    win = pool_window("max_pool2d", x.shape, kernel_size, stride, padding)
    _nn.check_float("max_pool2d", np.isdtype, x=x)
    found = _numba.max_pool2d(x, win)
    if found is not None:
        return found
    return _separable(_padded(x, win, -np.inf), win, np.maximum)


def max_pool2d_backward(
    dy: np.ndarray, x: np.ndarray, kernel_size: Any, stride: Any = None, padding: Any = 0
) -> np.ndarray:
    """:func:`arraycore._nn.max_pool2d_backward`: the first maximum of each window gets ``dy``."""
    op = "max_pool2d_backward"
    win = pool_window(op, x.shape, kernel_size, stride, padding)
    check_output_shape(op, "dy", dy.shape, win, win.c)
    _nn.check_float(op, np.isdtype, dy=dy, x=x)
    found = _numba.max_pool2d_backward(dy, x, win)
    if found is not None:
        return found
    plan = _onednn.max_pool_plan(win, dy.dtype, x.dtype)
    if plan is not None and np.isfinite(x.sum(dtype=np.float64)):
        # NaN and infinite inputs take the paths below, whose windows follow the reference's
        return plan(dy, x)
    tiled = _tiled_max_backward(dy, x, win)
    if tiled is not None:
        return tiled
    xpad = _padded(x, win, -np.inf)
    y = _separable(xpad, win, np.maximum)
    if np.isnan(y).any() or not np.isfinite(dy).all() or (win.padded and np.isneginf(y).any()):
        # NaN windows, non-finite gradients and all -inf windows beside padding break the
        # arithmetic below; the reference handles them (rare, so its speed does not matter)
        result: np.ndarray = _nn.max_pool2d_backward(np, dy, x, kernel_size, stride, padding)
        return result
    # `left` is the gradient each window has not yet handed out; a tap that matches the max
    # takes all of it (left * 1) and leaves 0 for later ties (left - left == 0, dy finite)
    left = np.array(dy, copy=True)
    dxpad = np.zeros((win.n, win.c, win.padded_h, win.padded_w), dtype=dy.dtype)
    match = np.empty(y.shape, dtype=bool)
    # windows that do not overlap write each pixel once: write the share in place
    overlapping = win.stride[0] < win.kh or win.stride[1] < win.kw
    share = np.empty(y.shape, dtype=dy.dtype) if overlapping else None
    for i in range(win.kh):
        for j in range(win.kw):
            rows, cols = win.window_slices(i, j)
            target = dxpad[:, :, rows, cols]
            np.equal(xpad[:, :, rows, cols], y, out=match)
            if share is None:
                np.multiply(left, match, out=target)
                left -= target
            else:
                np.multiply(left, match, out=share)
                target += share
                left -= share
    return _crop(dxpad, win)


def _tiled_max_backward(dy: np.ndarray, x: np.ndarray, win: Window2d) -> np.ndarray | None:
    """Max-pool backward where the windows tile the image exactly (stride = kernel, no padding,
    nothing left over), else ``None``.

    Strided per-tap views of an image make NumPy loop over rows of a dozen elements; here one
    strided copy lays the taps out as contiguous blocks ``(KH, KW, N*C*out_h, out_w)``, every
    comparison and product runs on contiguous memory, and one strided copy writes ``dx`` back.
    Same first-maximum rule and the same fallbacks as the general path.
    """
    (kh, kw), (sh, sw) = (win.kh, win.kw), win.stride
    if (
        win.padded
        or (sh, sw) != (kh, kw)
        or (win.out_h * kh, win.out_w * kw) != (win.h, win.w)
        or not x.flags.c_contiguous
    ):
        return None
    rows, ow = win.n * win.c * win.out_h, win.out_w
    taps = np.empty((kh, kw, rows, ow), dtype=x.dtype)
    np.copyto(taps, x.reshape(rows, kh, ow, kw).transpose(1, 3, 0, 2))
    y = np.array(taps[0, 0])
    for i in range(kh):
        for j in range(kw):
            if i or j:
                np.maximum(y, taps[i, j], out=y)
    left = np.array(dy, dtype=dy.dtype, copy=True).reshape(rows, ow)
    if np.isnan(y).any() or not np.isfinite(left).all():
        return None
    match = np.empty((rows, ow), dtype=bool)
    for i in range(kh):
        for j in range(kw):
            # the first tap equal to the max takes what is left of dy; later ties get 0
            np.equal(taps[i, j], y, out=match)
            np.multiply(left, match, out=taps[i, j])
            left -= taps[i, j]
    dx = np.empty(x.shape, dtype=dy.dtype)
    np.copyto(dx.reshape(rows, kh, ow, kw).transpose(1, 3, 0, 2), taps)
    return dx


def avg_pool2d(
    x: np.ndarray,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    count_include_pad: bool = True,
) -> np.ndarray:
    """:func:`arraycore._nn.avg_pool2d`, separable: sum over rows, then columns, then divide."""
    win = pool_window("avg_pool2d", x.shape, kernel_size, stride, padding)
    _nn.check_float("avg_pool2d", np.isdtype, x=x)
    total = _separable(_padded(x, win, 0), win, np.add)
    total /= _nn.avg_divisor(np, win, count_include_pad, x.dtype)
    return total


def avg_pool2d_backward(
    dy: np.ndarray,
    x_shape: Sequence[int],
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    count_include_pad: bool = True,
) -> np.ndarray:
    """:func:`arraycore._nn.avg_pool2d_backward`, separable: spread ``dy`` over the columns of
    each window, then over its rows (writes instead of adds where windows do not overlap)."""
    op = "avg_pool2d_backward"
    win = pool_window(op, x_shape, kernel_size, stride, padding)
    check_output_shape(op, "dy", dy.shape, win, win.c)
    _nn.check_float(op, np.isdtype, dy=dy)
    share = dy / _nn.avg_divisor(np, win, count_include_pad, dy.dtype)
    (sh, sw), (kh, kw) = win.stride, (win.kh, win.kw)
    spread = np.zeros((win.n, win.c, win.out_h, win.padded_w), dtype=dy.dtype)
    for j in range(kw):
        target = spread[:, :, :, j : j + sw * (win.out_w - 1) + 1 : sw]
        if sw < kw:
            target += share
        else:
            target[...] = share
    dxpad = np.zeros((win.n, win.c, win.padded_h, win.padded_w), dtype=dy.dtype)
    for i in range(kh):
        target = dxpad[:, :, i : i + sh * (win.out_h - 1) + 1 : sh, :]
        if sh < kh:
            target += spread
        else:
            target[...] = spread
    return _crop(dxpad, win)


# -- softmax and one-hot ------------------------------------------------------------------------
def _finite_max(x: np.ndarray, axis: Any) -> np.ndarray | None:
    """The max along ``axis`` (keepdims) when the fast path applies, else ``None``."""
    if type(axis) is not int or not -x.ndim <= axis < x.ndim or x.shape[axis] == 0:
        return None
    if x.dtype.kind != "f":
        return None
    m: np.ndarray = np.maximum.reduce(x, axis=axis, keepdims=True)
    return m if np.logical_and.reduce(np.isfinite(m), axis=None) else None


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """:func:`arraycore._nn.softmax`: numba's kernel for large float32 arrays along their last
    axis; slices with a non-finite max go to the reference."""
    if type(x) is np.ndarray and type(axis) is int and axis in (-1, x.ndim - 1):
        found = _numba.softmax(x)  # which says whether it takes x
        if found is not None:
            return found
    m = _finite_max(x, axis) if isinstance(x, np.ndarray) else None
    if m is None:
        result: np.ndarray = _nn.softmax(np, x, axis)
        return result
    e: np.ndarray = np.subtract(x, m)
    np.exp(e, out=e)
    e /= np.add.reduce(e, axis=axis, keepdims=True)
    return e


def softmax_backward(dy: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    """:func:`arraycore._nn.softmax_backward`: one compiled pass (numba) for large float arrays
    of one dtype along their last axis, else four NumPy calls."""
    ax = _nn.check_softmax_backward(np.isdtype, dy, y, axis)
    if ax == y.ndim - 1 and y.size >= _numba.PARALLEL_MIN:
        found = _numba.softmax_backward(dy, y)
        if found is not None:
            return found
    out: np.ndarray = np.multiply(dy, y)
    dot = np.add.reduce(out, axis=ax, keepdims=True)
    np.subtract(dy, dot, out=out)
    out *= y
    return out


def log_softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """:func:`arraycore._nn.log_softmax`; slices with a non-finite max go to the reference."""
    m = _finite_max(x, axis) if isinstance(x, np.ndarray) else None
    if m is None:
        result: np.ndarray = _nn.log_softmax(np, x, axis)
        return result
    z: np.ndarray = np.subtract(x, m)
    s = np.add.reduce(np.exp(z), axis=axis, keepdims=True)
    np.log(s, out=s)
    z -= s
    return z


def one_hot(indices: np.ndarray, num_classes: int, *, dtype: Any = None) -> np.ndarray:
    """:func:`arraycore._nn.one_hot` for int64/int32 indices and an explicit dtype."""
    if (
        dtype is None
        or type(num_classes) is not int
        or type(indices) is not np.ndarray
        or indices.dtype.kind != "i"
        or indices.dtype.itemsize < 4
        or not 0 <= num_classes <= 2**31
    ):
        result: np.ndarray = _nn.one_hot(np, indices, num_classes, dtype=dtype)
        return result
    key = (num_classes, indices.dtype)
    classes = _CLASSES.get(key)
    if classes is None:
        classes = _CLASSES[key] = np.arange(num_classes, dtype=indices.dtype)
        classes.flags.writeable = False
    hits = np.equal(indices[..., None], classes)
    out: np.ndarray = hits.astype(dtype)
    return out


#: Smallest row sum of ``exp(x - max(x))`` the cross-entropy fast path accepts: a row whose
#: max lies more than ~46 below the global max goes to the reference instead.
_MIN_ROW_SUM = 1e-20


def _flat_labels(labels: Any, logits: Any) -> np.ndarray | None:
    """Flat indices of the label entries of ``logits`` when the fast path applies, else None."""
    if not (
        type(logits) is np.ndarray
        and type(labels) is np.ndarray
        and logits.dtype.kind == "f"
        and logits.dtype.itemsize >= 4
        and logits.size > 0
        and labels.dtype.kind == "i"
        and labels.dtype.itemsize >= 4
        and labels.shape == logits.shape[:-1]
    ):
        return None
    classes = logits.shape[-1]
    flat = labels.reshape(-1)
    # xp.nn.softmax_cross_entropy's guard has just checked the range unless label checks are
    # off; then one reduction checks both ends (negative labels are huge as unsigned)
    if not _checks.enabled("labels") and (
        np.maximum.reduce(flat.view(_checks.UNSIGNED[flat.dtype.itemsize]), axis=None) >= classes
    ):
        return None
    key = (flat.shape[0], classes)
    offsets = _OFFSETS.get(key)
    if offsets is None:
        offsets = _OFFSETS[key] = np.arange(0, flat.shape[0] * classes, classes, dtype=np.int64)
        offsets.flags.writeable = False
    index: np.ndarray = np.add(flat, offsets)
    return index


def softmax_cross_entropy(
    logits: np.ndarray, labels: np.ndarray, scale: float = 1.0
) -> tuple[Any, np.ndarray]:
    """:func:`arraycore._nn.softmax_cross_entropy`: one compiled call (numba) for small float32
    logits; labels out of range, non-finite logits and rows far below the global max go to the
    reference."""
    if (
        type(logits) is np.ndarray
        and logits.dtype is _F32
        and type(labels) is np.ndarray
        and labels.shape == logits.shape[:-1]
        and logits.size
    ):
        found = _numba.softmax_cross_entropy(logits, labels, scale)
        if found is not None:
            return found
    index = _flat_labels(labels, logits)
    if index is not None:
        top = np.maximum.reduce(logits, axis=None)
        if math.isfinite(top):
            z: np.ndarray = np.subtract(logits, top)
            p = np.exp(z)
            s = np.add.reduce(p, axis=-1, keepdims=True)
            if np.minimum.reduce(s, axis=None) >= _MIN_ROW_SUM:
                scale = float(scale)
                np.divide(p, s, out=p)
                np.log(s, out=s)
                # loss: sum over examples of log(sum(exp(z))) - z[label]
                picked = np.add.reduce(z.reshape(-1).take(index))
                loss = (np.add.reduce(s, axis=None) - picked) * scale
                np.multiply(p, scale, out=p)
                flat = p.reshape(-1)
                flat[index] -= scale
                return loss, p
    result: tuple[Any, np.ndarray] = _nn.softmax_cross_entropy(np, logits, labels, scale)
    return result


#: ``arange(0, n * classes, classes)`` per (n, classes), for softmax_cross_entropy (read-only).
_OFFSETS: dict[tuple[int, int], np.ndarray] = {}


#: ``arange(num_classes)`` per (num_classes, index dtype), for one_hot (read-only).
_CLASSES: dict[tuple[int, np.dtype], np.ndarray] = {}


# -- LSTM -----------------------------------------------------------------------------------------
class _OneDNNLSTM(NamedTuple):
    """``saved`` of an LSTM forward pass that oneDNN ran: its plan, what the plan keeps for the
    backward pass (workspace, time-major ``x`` and ``y``) and the states."""

    plan: Any
    kept: dict[str, np.ndarray]
    h0: np.ndarray
    c0: np.ndarray
    h_n: np.ndarray
    c_n: np.ndarray


def lstm(
    x: np.ndarray,
    w: np.ndarray,
    u: np.ndarray,
    b: np.ndarray,
    h0: np.ndarray | None = None,
    c0: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, Any]:
    """:func:`arraycore._nn_rnn.lstm`: oneDNN's LSTM primitive for float32 where
    ``arraycore[onednn]`` is installed, else the reference on NumPy."""
    n, t, c, h = _nn_rnn.check_lstm(np.isdtype, x, w, u, b, h0, c0)
    plan = _onednn.lstm_plan(n, t, c, h, x.dtype)
    if plan is None:
        return _nn_rnn.lstm(np, x, w, u, b, h0, c0)
    zeros = np.zeros((n, h), np.float32)
    h0_, c0_ = (zeros if s is None else np.ascontiguousarray(s) for s in (h0, c0))
    x_, w_, u_, b_ = (np.ascontiguousarray(a) for a in (x, w, u, b))
    y, h_n, c_n, kept = plan.forward(x_, w_, u_, b_, h0_, c0_)
    return y, h_n, c_n, _OneDNNLSTM(plan, kept, h0_, c0_, h_n, c_n)


def lstm_backward(
    dy: np.ndarray | None,
    dh_n: np.ndarray | None,
    dc_n: np.ndarray | None,
    x: np.ndarray,
    w: np.ndarray,
    u: np.ndarray,
    b: np.ndarray,
    h0: np.ndarray | None,
    c0: np.ndarray | None,
    y: np.ndarray,
    saved: Any,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]:
    """:func:`arraycore._nn_rnn.lstm_backward`, by whichever path ran the forward pass."""
    n, t, _, h = _nn_rnn.check_lstm(np.isdtype, x, w, u, b, h0, c0)
    if not isinstance(saved, _OneDNNLSTM):
        return _nn_rnn.lstm_backward(np, dy, dh_n, dc_n, x, w, u, b, h0, c0, y, saved)

    def given(a: np.ndarray | None, shape: tuple[int, ...]) -> np.ndarray:
        return np.zeros(shape, np.float32) if a is None else np.ascontiguousarray(a, np.float32)

    out = saved.plan.backward(
        {
            "w": np.ascontiguousarray(w),
            "u": np.ascontiguousarray(u),
            "b": np.ascontiguousarray(b),
            "h0": saved.h0,
            "c0": saved.c0,
            "hn": saved.h_n,
            "cn": saved.c_n,
            **saved.kept,
            "dy": given(dy, (n, t, h)),
            "dhn": given(dh_n, (n, h)),
            "dcn": given(dc_n, (n, h)),
        }
    )
    return (
        out["dx"],
        out["dw"],
        out["du"],
        out["db"],
        out["dh0"] if h0 is not None else None,
        out["dc0"] if c0 is not None else None,
    )


# -- GRU ------------------------------------------------------------------------------------------
def gru_sequence(
    xw: np.ndarray, u: np.ndarray, b: np.ndarray, h0: np.ndarray | None = None
) -> tuple[np.ndarray, Any]:
    """:func:`arraycore._nn_gru.gru_sequence`: per time step one product with ``u`` and one
    numba kernel for the gates and the state (float32), else the reference."""
    n, t_len, hidden = _nn_gru.check_gru("nn.gru_sequence", np.isdtype, xw, u, b, h0)
    if not _numba.gru_takes(xw, u, b, h0):
        return _nn_gru.gru_sequence(np, xw, u, b, h0)
    seq = (n, t_len, hidden)
    y, cand, rec_n = np.empty(seq, np.float32), np.empty(seq, np.float32), np.empty(seq, np.float32)
    ru = np.empty((n, t_len, 2 * hidden), np.float32)
    h = np.zeros((n, hidden), np.float32) if h0 is None else h0.copy()
    no_hid = np.empty((n, 3 * hidden), np.float32)  # read by no step without a state
    for t in range(t_len):
        has_h = t > 0 or h0 is not None
        step_hid = _matmul(h, u) if has_h else no_hid  # oneDNN's threads where it takes it
        if not _numba.gru_step(
            "gru_cell_forward", t, has_h, step_hid, xw, b, h, ru, cand, rec_n, y
        ):
            return _nn_gru.gru_sequence(np, xw, u, b, h0)
    return y, (ru, cand, rec_n)


def gru_sequence_backward(
    dy: np.ndarray, u: np.ndarray, h0: np.ndarray | None, y: np.ndarray, saved: Any
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """:func:`arraycore._nn_gru.gru_sequence_backward`: per time step one numba kernel for the
    pre-activation gradients and one product with ``u^T`` (float32), else the reference."""
    n, t_len, hidden = _nn_gru.check_gru_backward(np.isdtype, dy, u, h0, y, saved)
    ru, cand, rec_n = saved
    if not _numba.gru_takes(dy, u, h0, y, ru, cand, rec_n):
        return _nn_gru.gru_sequence_backward(np, dy, u, h0, y, saved)
    u_t = _nn_rnn.transposed_u(np, u)
    dxw = np.empty((n, t_len, 3 * hidden), np.float32)
    dhid = np.empty((n, t_len, 3 * hidden), np.float32)
    dhz = np.empty((n, hidden), np.float32)
    g = np.zeros((n, hidden), np.float32)
    unused = dhz  # read by no kernel whose flag is off
    for t in range(t_len - 1, -1, -1):
        args = (t, t < t_len - 1, h0 is not None, dy, g, dhz, unused if h0 is None else h0)
        if not _numba.gru_step("gru_cell_backward", *args, y, ru, cand, rec_n, dxw, dhid):
            return _nn_gru.gru_sequence_backward(np, dy, u, h0, y, saved)
        if t > 0 or h0 is not None:
            g = _matmul(dhid[:, t], u_t)
    rows = n * t_len
    h_prev = _nn_gru.previous_states(np, y, h0).reshape(rows, hidden)
    flat = dhid.reshape(rows, 3 * hidden)
    du, db = _matmul(h_prev.T, flat), np.add.reduce(flat, axis=0)
    return dxw, du, db, (g + dhz) if h0 is not None else None
