"""NumPy references for the forward checks of the ``nn`` ops (host-side, loops over kernels)."""

from __future__ import annotations

from typing import Any

import numpy as np

from arraycore.nn_shapes import padding2d, pair

# The argument forms are arraycore.nn_shapes' (what the ops take); the loops below are our own.


def _pair(v: Any) -> tuple[int, int]:
    return pair(v, "reference", "size", 0)


def _pads(p: Any) -> tuple[tuple[int, int], tuple[int, int]]:
    return padding2d(p, "reference")


def conv2d(
    x: np.ndarray, w: np.ndarray, stride: Any = 1, padding: Any = 0, dilation: Any = 1
) -> np.ndarray:
    """Cross-correlation of NCHW ``x`` with (O, C, KH, KW) ``w``, explicit zero padding."""
    s, d, pad = _pair(stride), _pair(dilation), _pads(padding)
    xpad = np.pad(x, ((0, 0), (0, 0), pad[0], pad[1]))
    kh, kw = w.shape[2:]
    oh = (xpad.shape[2] - d[0] * (kh - 1) - 1) // s[0] + 1
    ow = (xpad.shape[3] - d[1] * (kw - 1) - 1) // s[1] + 1
    out = np.zeros((x.shape[0], w.shape[0], oh, ow))
    for i in range(kh):
        for j in range(kw):
            patch = xpad[
                :,
                :,
                i * d[0] : i * d[0] + s[0] * (oh - 1) + 1 : s[0],
                j * d[1] : j * d[1] + s[1] * (ow - 1) + 1 : s[1],
            ]
            out += np.einsum("nchw,oc->nohw", patch, w[:, :, i, j])
    return out


def conv2d_transpose(
    x: np.ndarray,
    w: np.ndarray,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    output_padding: Any = 0,
) -> np.ndarray:
    """Transposed convolution of NCHW ``x`` with (C_in, C_out, KH, KW) ``w``."""
    s, d, pad, op = _pair(stride), _pair(dilation), _pads(padding), _pair(output_padding)
    n, _, h, wd = x.shape
    kh, kw = w.shape[2:]
    full_h = (h - 1) * s[0] + d[0] * (kh - 1) + 1 + op[0]
    full_w = (wd - 1) * s[1] + d[1] * (kw - 1) + 1 + op[1]
    out = np.zeros((n, w.shape[1], full_h, full_w))
    for i in range(kh):
        for j in range(kw):
            out[
                :,
                :,
                i * d[0] : i * d[0] + s[0] * (h - 1) + 1 : s[0],
                j * d[1] : j * d[1] + s[1] * (wd - 1) + 1 : s[1],
            ] += np.einsum("nchw,co->nohw", x, w[:, :, i, j])
    return out[:, :, pad[0][0] : full_h - pad[0][1], pad[1][0] : full_w - pad[1][1]]


def _windows(x: np.ndarray, kernel: Any, stride: Any, padding: Any, fill: float) -> Any:
    k = _pair(kernel)
    s = k if stride is None else _pair(stride)
    pad = _pads(padding)
    xpad = np.pad(x, ((0, 0), (0, 0), pad[0], pad[1]), constant_values=fill)
    oh = (xpad.shape[2] - k[0]) // s[0] + 1
    ow = (xpad.shape[3] - k[1]) // s[1] + 1
    stacked = [
        xpad[:, :, i : i + s[0] * (oh - 1) + 1 : s[0], j : j + s[1] * (ow - 1) + 1 : s[1]]
        for i in range(k[0])
        for j in range(k[1])
    ]
    return np.stack(stacked), k, s, pad, oh, ow


def max_pool2d(x: np.ndarray, kernel: Any, stride: Any = None, padding: Any = 0) -> Any:
    """Max pooling; padding counts as -inf."""
    stacked = _windows(x, kernel, stride, padding, -np.inf)[0]
    return stacked.max(axis=0)


def avg_pool2d(
    x: np.ndarray, kernel: Any, stride: Any = None, padding: Any = 0, count_include_pad: bool = True
) -> Any:
    """Average pooling; with ``count_include_pad=False`` only real elements are counted."""
    stacked, k, *_ = _windows(x, kernel, stride, padding, 0.0)
    total = stacked.sum(axis=0)
    if count_include_pad:
        return total / (k[0] * k[1])
    ones = _windows(np.ones_like(x), kernel, stride, padding, 0.0)[0].sum(axis=0)
    return total / ones


def log_softmax(x: np.ndarray, axis: int = -1) -> Any:
    """Stable log-softmax."""
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


def softmax(x: np.ndarray, axis: int = -1) -> Any:
    """Stable softmax."""
    return np.exp(log_softmax(x, axis))


def batch_norm_train(x: Any, gamma: Any, beta: Any, mean: Any, var: Any, eps: float = 1e-5) -> Any:
    """Batch norm with batch statistics (running statistics ignored)."""
    axes = (0,) if x.ndim == 2 else (0, 2, 3)
    shape = (1, -1) if x.ndim == 2 else (1, -1, 1, 1)
    mu = x.mean(axis=axes, keepdims=True)
    v = x.var(axis=axes, keepdims=True)
    return (x - mu) / np.sqrt(v + eps) * gamma.reshape(shape) + beta.reshape(shape)


def batch_norm_eval(x: Any, gamma: Any, beta: Any, mean: Any, var: Any, eps: float = 1e-5) -> Any:
    """Batch norm with the given running statistics."""
    shape = (1, -1) if x.ndim == 2 else (1, -1, 1, 1)
    return (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps) * gamma.reshape(
        shape
    ) + beta.reshape(shape)
