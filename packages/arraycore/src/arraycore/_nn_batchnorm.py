"""Batch normalisation of arraycore's reference nn kernels (``xp.nn.batch_norm`` and its
gradient), written against the namespace ``xp`` like the rest of :mod:`arraycore._nn`."""

from __future__ import annotations

import math
from typing import Any

from ._nn import Array, Namespace, check_float


def batch_norm_axes(op: str, x: Array, **per_channel: Array) -> tuple[tuple[int, ...], int]:
    """Check (N, C) or (N, C, H, W) ``x`` against ``(C,)`` arrays; returns (axes, C)."""
    shape = tuple(x.shape)
    if len(shape) not in (2, 4):
        raise ValueError(f"{op}: x must be (N, C) or (N, C, H, W), got shape {shape}")
    c = int(shape[1])
    for name, a in per_channel.items():
        if tuple(a.shape) != (c,):
            raise ValueError(
                f"{op}: {name} has shape {tuple(a.shape)}, expected ({c},) for x of shape {shape}"
            )
    return ((0,) if len(shape) == 2 else (0, 2, 3)), c


def check_batch_norm(xp: Any, x: Array, gamma: Array, beta: Array, eps: float) -> tuple[int, ...]:
    """The checks of :func:`batch_norm` (shapes, dtypes, eps > 0); returns the reduced axes.
    ``xp``: the namespace, or an ``isdtype`` function (a backend's own kernels pass NumPy's)."""
    op = "batch_norm"
    axes, _ = batch_norm_axes(op, x, gamma=gamma, beta=beta)
    check_float(op, xp, x=x, gamma=gamma, beta=beta)
    if float(eps) <= 0:
        raise ValueError(f"{op}: eps must be > 0, got {eps}")
    return axes


def check_batch_norm_backward(
    xp: Any, dy: Array, x: Array, gamma: Array, mean: Array, inv_std: Array
) -> tuple[int, ...]:
    """The checks of :func:`batch_norm_backward`; returns the reduced axes."""
    op = "batch_norm_backward"
    axes, _ = batch_norm_axes(op, x, gamma=gamma, mean=mean, inv_std=inv_std)
    if tuple(dy.shape) != tuple(x.shape):
        raise ValueError(f"{op}: dy has shape {tuple(dy.shape)}, expected {tuple(x.shape)}")
    check_float(op, xp, dy=dy, x=x, gamma=gamma, mean=mean, inv_std=inv_std)
    return axes


def _per_channel(xp: Namespace, a: Array, ndim: int) -> Array:
    """A ``(C,)`` array shaped to broadcast against (N, C) or (N, C, H, W)."""
    return xp.reshape(a, (1, -1) if ndim == 2 else (1, -1, 1, 1))


def batch_norm(
    xp: Namespace, x: Array, gamma: Array, beta: Array, eps: float = 1e-5
) -> tuple[Array, Array, Array]:
    """Training-mode batch normalisation of (N, C) or (N, C, H, W) ``x`` per channel ``C``.

    Returns ``(y, mean, inv_std)``: the batch statistics over every axis but 1, ``inv_std =
    1 / sqrt(var + eps)`` with the biased (population) variance, both of shape ``(C,)``, and
    ``y = (x - mean) * inv_std * gamma + beta``. Running averages are the caller's business.
    """
    axes = check_batch_norm(xp, x, gamma, beta, eps)
    nd = len(x.shape)
    mean = xp.mean(x, axis=axes, keepdims=True)
    centred = x - mean
    var = xp.mean(centred * centred, axis=axes, keepdims=True)
    inv_std = 1.0 / xp.sqrt(var + float(eps))
    scale = inv_std * _per_channel(xp, gamma, nd)
    y = centred * scale + _per_channel(xp, beta, nd)
    c = (int(x.shape[1]),)
    return y, xp.reshape(mean, c), xp.reshape(inv_std, c)


def batch_norm_backward(
    xp: Namespace, dy: Array, x: Array, gamma: Array, mean: Array, inv_std: Array
) -> tuple[Array, Array, Array]:
    """Gradients ``(dx, dgamma, dbeta)`` of :func:`batch_norm` (batch statistics) given the
    ``mean`` and ``inv_std`` it returned."""
    axes = check_batch_norm_backward(xp, dy, x, gamma, mean, inv_std)
    nd = len(x.shape)
    count = math.prod(int(x.shape[a]) for a in axes)
    inv = _per_channel(xp, inv_std, nd)
    x_hat = (x - _per_channel(xp, mean, nd)) * inv
    dbeta = xp.sum(dy, axis=axes)
    dgamma = xp.sum(dy * x_hat, axis=axes)
    if count == 0:
        return xp.astype(dy, dy.dtype, copy=True), dgamma, dbeta
    mean_dy = _per_channel(xp, dbeta, nd) / float(count)
    mean_dy_xhat = _per_channel(xp, dgamma, nd) / float(count)
    dx = (dy - mean_dy - x_hat * mean_dy_xhat) * (inv * _per_channel(xp, gamma, nd))
    return dx, dgamma, dbeta
