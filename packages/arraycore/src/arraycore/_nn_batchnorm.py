"""Batch and layer normalisation of arraycore's reference nn kernels (``xp.nn.batch_norm``,
``xp.nn.layer_norm`` and their gradients), written against the namespace ``xp`` like the rest
of :mod:`arraycore._nn`."""

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


def _check_forward(
    op: str, axes: tuple[int, ...], xp: Any, x: Array, gamma: Array, beta: Array, eps: float
) -> tuple[int, ...]:
    """Dtypes and ``eps > 0`` of a normalisation's forward pass (shapes already checked)."""
    check_float(op, xp, x=x, gamma=gamma, beta=beta)
    if not float(eps) > 0:
        raise ValueError(f"{op}: eps must be > 0, got {eps}")
    return axes


def _check_backward(
    op: str, axes: tuple[int, ...], xp: Any, dy: Array, **arrays: Array
) -> tuple[int, ...]:
    """``dy`` of ``x``'s shape and the dtypes of a normalisation's backward pass."""
    x = arrays["x"]
    if tuple(dy.shape) != tuple(x.shape):
        raise ValueError(f"{op}: dy has shape {tuple(dy.shape)}, expected {tuple(x.shape)}")
    check_float(op, xp, dy=dy, **arrays)
    return axes


def check_batch_norm(
    xp: Any, x: Array, gamma: Array, beta: Array, eps: float, op: str = "batch_norm"
) -> tuple[int, ...]:
    """The checks of :func:`batch_norm` (shapes, dtypes, eps > 0); returns the reduced axes.
    ``xp``: the namespace, or an ``isdtype`` function (a backend's own kernels pass NumPy's);
    ``op``: the name errors give (``batch_norm_relu`` shares the checks)."""
    axes, _ = batch_norm_axes(op, x, gamma=gamma, beta=beta)
    return _check_forward(op, axes, xp, x, gamma, beta, eps)


def check_batch_norm_backward(
    xp: Any, dy: Array, x: Array, gamma: Array, mean: Array, inv_std: Array
) -> tuple[int, ...]:
    """The checks of :func:`batch_norm_backward`; returns the reduced axes."""
    op = "batch_norm_backward"
    axes, _ = batch_norm_axes(op, x, gamma=gamma, mean=mean, inv_std=inv_std)
    return _check_backward(op, axes, xp, dy, x=x, gamma=gamma, mean=mean, inv_std=inv_std)


def check_batch_norm_relu_backward(
    xp: Any, dy: Array, x: Array, gamma: Array, mean: Array, inv_std: Array, y: Array
) -> tuple[int, ...]:
    """The checks of :func:`batch_norm_relu_backward` (``y``, the forward's output, has ``x``'s
    shape and dtype); returns the reduced axes."""
    op = "batch_norm_relu_backward"
    axes, _ = batch_norm_axes(op, x, gamma=gamma, mean=mean, inv_std=inv_std)
    if tuple(y.shape) != tuple(x.shape):
        raise ValueError(f"{op}: y has shape {tuple(y.shape)}, expected {tuple(x.shape)}")
    return _check_backward(op, axes, xp, dy, x=x, gamma=gamma, mean=mean, inv_std=inv_std, y=y)


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


def batch_norm_relu(
    xp: Namespace, x: Array, gamma: Array, beta: Array, eps: float = 1e-5
) -> tuple[Array, Array, Array]:
    """:func:`batch_norm` followed by a ReLU, ``y = maximum(batch_norm(x), 0)`` (NaN stays NaN),
    with the same statistics: the pair a convolutional block runs, as one op so that a backend
    can make it one pass."""
    check_batch_norm(xp, x, gamma, beta, eps, op="batch_norm_relu")
    y, mean, inv_std = batch_norm(xp, x, gamma, beta, eps)
    return xp.maximum(y, 0.0), mean, inv_std


def batch_norm_relu_backward(
    xp: Namespace, dy: Array, x: Array, gamma: Array, mean: Array, inv_std: Array, y: Array
) -> tuple[Array, Array, Array]:
    """Gradients ``(dx, dgamma, dbeta)`` of :func:`batch_norm_relu` given its output ``y``:
    :func:`batch_norm_backward` of ``dy * (y > 0)`` (the ReLU's gradient)."""
    check_batch_norm_relu_backward(xp, dy, x, gamma, mean, inv_std, y)
    gated = xp.multiply(dy, xp.astype(xp.greater(y, 0.0), dy.dtype))
    return batch_norm_backward(xp, gated, x, gamma, mean, inv_std)


# -- layer normalisation --------------------------------------------------------------------------
def layer_norm_axes(op: str, x: Array, gamma: Array, **rest: Array) -> tuple[int, ...]:
    """The trailing axes of ``x`` that ``gamma``'s shape covers (PyTorch's ``normalized_shape``),
    after checking ``x``, ``gamma`` and the ``rest`` (``beta`` of gamma's shape; ``mean`` and
    ``inv_std`` of the other axes' shape)."""
    shape, norm = tuple(x.shape), tuple(gamma.shape)
    k = len(norm)
    if k == 0 or k > len(shape) or shape[len(shape) - k :] != norm:
        raise ValueError(
            f"{op}: gamma of shape {norm} must be the trailing dimensions of x of shape {shape}"
        )
    lead = shape[: len(shape) - k]
    for name, a in rest.items():
        want = norm if name == "beta" else lead
        if tuple(a.shape) != want:
            raise ValueError(
                f"{op}: {name} has shape {tuple(a.shape)}, expected {want} for x of shape "
                f"{shape} and gamma of shape {norm}"
            )
    return tuple(range(len(shape) - k, len(shape)))


def check_layer_norm(xp: Any, x: Array, gamma: Array, beta: Array, eps: float) -> tuple[int, ...]:
    """The checks of :func:`layer_norm`; returns the normalised axes. ``xp``: the namespace, or
    an ``isdtype`` function."""
    axes = layer_norm_axes("layer_norm", x, gamma, beta=beta)
    return _check_forward("layer_norm", axes, xp, x, gamma, beta, eps)


def check_layer_norm_backward(
    xp: Any, dy: Array, x: Array, gamma: Array, mean: Array, inv_std: Array
) -> tuple[int, ...]:
    """The checks of :func:`layer_norm_backward`; returns the normalised axes."""
    op = "layer_norm_backward"
    axes = layer_norm_axes(op, x, gamma, mean=mean, inv_std=inv_std)
    return _check_backward(op, axes, xp, dy, x=x, gamma=gamma, mean=mean, inv_std=inv_std)


def _per_row(xp: Namespace, a: Array, k: int) -> Array:
    """A per-row statistic (shape ``x.shape[:-k]``) shaped to broadcast against ``x``."""
    return xp.reshape(a, (*tuple(a.shape), *(1,) * k))


def layer_norm(
    xp: Namespace, x: Array, gamma: Array, beta: Array, eps: float = 1e-5
) -> tuple[Array, Array, Array]:
    """Layer normalisation of ``x`` over its trailing ``gamma.ndim`` axes (PyTorch's
    ``layer_norm(x, gamma.shape, gamma, beta, eps)``).

    Returns ``(y, mean, inv_std)``: ``mean`` and ``inv_std = 1 / sqrt(var + eps)`` (biased
    variance) of each row, of shape ``x.shape[:-gamma.ndim]``, and ``y = (x - mean) * inv_std *
    gamma + beta``.
    """
    axes = check_layer_norm(xp, x, gamma, beta, eps)
    mean = xp.mean(x, axis=axes, keepdims=True)
    centred = x - mean
    var = xp.mean(centred * centred, axis=axes, keepdims=True)
    inv_std = 1.0 / xp.sqrt(var + float(eps))
    y = centred * inv_std * gamma + beta
    lead = tuple(x.shape)[: len(x.shape) - len(axes)]
    return y, xp.reshape(mean, lead), xp.reshape(inv_std, lead)


def layer_norm_backward(
    xp: Namespace, dy: Array, x: Array, gamma: Array, mean: Array, inv_std: Array
) -> tuple[Array, Array, Array]:
    """Gradients ``(dx, dgamma, dbeta)`` of :func:`layer_norm` given the ``mean`` and
    ``inv_std`` it returned: ``dx = inv_std (g - mean(g) - x_hat mean(g x_hat))`` per row with
    ``g = dy gamma``; ``dgamma`` and ``dbeta`` sum over the rows."""
    axes = check_layer_norm_backward(xp, dy, x, gamma, mean, inv_std)
    k = len(axes)
    rows = tuple(range(len(x.shape) - k))
    inv = _per_row(xp, inv_std, k)
    x_hat = (x - _per_row(xp, mean, k)) * inv
    dgamma = xp.sum(dy * x_hat, axis=rows)
    dbeta = xp.sum(dy, axis=rows)
    g = dy * gamma
    dx = (
        g
        - xp.mean(g, axis=axes, keepdims=True)
        - x_hat * xp.mean(g * x_hat, axis=axes, keepdims=True)
    ) * inv
    return dx, dgamma, dbeta
