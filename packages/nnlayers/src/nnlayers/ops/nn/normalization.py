"""Normalisation: batch_norm (dense and spatial, train/eval) and layer_norm (composed)."""

from __future__ import annotations

import math
from typing import Any

from ...expr.node import Expr, as_expr
from ...expr.spec import Spec, format_shape
from ..base import Grads, Inputs, Needs, Op, require_float


class BatchNorm(Op):
    """Batch normalisation over the batch (and spatial) axes of ``x``: (N, C) or (N, C, H, W).

    Inputs: ``x, gamma, beta, running_mean, running_var`` (the last four of shape ``(C,)``).
    In the train phase it normalises with the batch statistics and updates the running ones in
    place (``running = (1 - momentum) * running + momentum * batch``, unbiased variance); in the
    eval phase it normalises with the running statistics.
    """

    name = "batch_norm"
    phase_dependent = True
    has_residual = True
    keep_inputs = (1,)
    nondiff_inputs = (3, 4)

    def __init__(self, momentum: float, eps: float) -> None:
        self.momentum = momentum
        self.eps = eps

    def infer(self, x: Spec, gamma: Spec, beta: Spec, mean: Spec, var: Spec) -> Spec:
        require_float(self.name, x, gamma, beta, mean, var)
        if x.ndim not in (2, 4):
            raise ValueError(f"needs (N, C) or (N, C, H, W) inputs, got {format_shape(x.shape)}")
        c = x.shape[1]
        for what, s in (
            ("gamma", gamma),
            ("beta", beta),
            ("running_mean", mean),
            ("running_var", var),
        ):
            if s.shape != (c,):
                raise ValueError(f"{what} has shape {format_shape(s.shape)}, expected ({c},)")
        self.axes = (0,) if x.ndim == 2 else (0, 2, 3)
        self.stat_shape = (1, c) if x.ndim == 2 else (1, c, 1, 1)
        sizes = [x.shape[a] for a in self.axes]
        self.count: Any = None if None in sizes else math.prod(d for d in sizes if d is not None)
        self.channels = c
        return x

    def forward(
        self, xp: Any, x: Any, gamma: Any, beta: Any, running_mean: Any, running_var: Any
    ) -> tuple[Any, Any]:
        training = self.state.training
        if training:
            mean = xp.mean(x, axis=self.axes, keepdims=True)
            centred = xp.subtract(x, mean)
            var = xp.mean(xp.multiply(centred, centred), axis=self.axes, keepdims=True)
            self._update(xp, running_mean, mean, 1.0)
            self._update(xp, running_var, var, self.count / max(self.count - 1, 1))
        else:
            centred = xp.subtract(x, xp.reshape(running_mean, self.stat_shape))
            var = xp.reshape(running_var, self.stat_shape)
        inv_std = xp.divide(1.0, xp.sqrt(xp.add(var, self.eps)))
        x_hat = xp.multiply(centred, inv_std)
        y = xp.add(
            xp.multiply(x_hat, xp.reshape(gamma, self.stat_shape)),
            xp.reshape(beta, self.stat_shape),
        )
        return y, (x_hat, inv_std, training)

    def _update(self, xp: Any, running: Any, batch: Any, correction: float) -> None:
        m = self.momentum
        xp.inplace.multiply(running, 1.0 - m, out=running)
        xp.inplace.add(
            running, xp.multiply(xp.reshape(batch, (self.channels,)), m * correction), out=running
        )

    def backward(
        self, xp: Any, dy: Any, inputs: Inputs, output: Any, residual: Any, needs: Needs
    ) -> Grads:
        x_hat, inv_std, training = residual
        dx = dgamma = dbeta = None
        if needs[0]:
            dx_hat = xp.multiply(dy, xp.reshape(inputs[1], self.stat_shape))
            if training:
                mean_d = xp.mean(dx_hat, axis=self.axes, keepdims=True)
                mean_dx = xp.mean(xp.multiply(dx_hat, x_hat), axis=self.axes, keepdims=True)
                dx_hat = xp.subtract(xp.subtract(dx_hat, mean_d), xp.multiply(x_hat, mean_dx))
            dx = xp.multiply(dx_hat, inv_std)
        if needs[1]:
            dgamma = xp.reshape(xp.sum(xp.multiply(dy, x_hat), axis=self.axes), (self.channels,))
        if needs[2]:
            dbeta = xp.reshape(xp.sum(dy, axis=self.axes), (self.channels,))
        return dx, dgamma, dbeta, None, None


def batch_norm(
    x: Any,
    gamma: Any,
    beta: Any,
    running_mean: Any,
    running_var: Any,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> Expr:
    """Batch normalisation of (N, C) or (N, C, H, W) ``x`` (per channel ``C``).

    ``running_mean`` and ``running_var`` are non-trainable :class:`nnlayers.Parameter` objects
    (``trainable=False``) that the train phase updates in place; the eval phase uses them.
    """
    from ...parameter import Parameter

    for what, stat in (("running_mean", running_mean), ("running_var", running_var)):
        if not isinstance(stat, Parameter) or stat.trainable:
            raise TypeError(
                f"batch_norm: {what} must be a Parameter(..., trainable=False), which the train "
                f"phase updates in place; got {stat!r}"
            )
    return BatchNorm(momentum, eps)(x, gamma, beta, running_mean, running_var)


def layer_norm(
    x: Any, gamma: Any = None, beta: Any = None, axis: Any = -1, eps: float = 1e-5
) -> Expr:
    """Layer normalisation over ``axis`` (the last by default), then ``* gamma + beta``.

    A composition of primitives (mean, subtract, square, sqrt, divide), so its gradient is free.
    """
    from ..math.arithmetic import sqrt, square
    from ..math.reduction import mean

    x = as_expr(x)
    centred = x - mean(x, axis=axis, keepdims=True)
    y: Expr = centred / sqrt(mean(square(centred), axis=axis, keepdims=True) + eps)
    if gamma is not None:
        y = y * gamma
    if beta is not None:
        y = y + beta
    return y
