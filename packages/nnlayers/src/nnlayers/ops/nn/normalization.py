"""Normalisation: batch_norm (dense and spatial, train/eval) and layer_norm (composed)."""

from __future__ import annotations

import math
from typing import Any

from arraycore import ArrayNamespace

from ...expr.node import Expr, as_expr
from ...expr.spec import Spec, format_shape
from ..base import Grads, Inputs, Needs, Op, require_float, require_same_dtype


class BatchNorm(Op):
    """Batch normalisation over the batch (and spatial) axes of ``x``: (N, C) or (N, C, H, W).

    Inputs: ``x, gamma, beta, running_mean, running_var`` (the last four of shape ``(C,)``).
    In the train phase it normalises with the batch statistics and updates the running ones in
    place (``running = (1 - momentum) * running + momentum * batch``, unbiased variance); in the
    eval phase it normalises with the running statistics.
    """

    fresh_grads = True

    name = "batch_norm"
    phase_dependent = True
    has_residual = True
    keep_inputs = (0, 1)
    nondiff_inputs = (3, 4)

    def __init__(self, momentum: float, eps: float) -> None:
        self.momentum = momentum
        self.eps = eps

    def infer(self, x: Spec, gamma: Spec, beta: Spec, mean: Spec, var: Spec) -> Spec:
        require_float(self.name, x, gamma, beta, mean, var)
        require_same_dtype(x=x, gamma=gamma, beta=beta, running_mean=mean, running_var=var)
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
        self, xp: ArrayNamespace, x: Any, gamma: Any, beta: Any, running_mean: Any, running_var: Any
    ) -> tuple[Any, Any]:
        if self.state.training:
            count = math.prod(x.shape) // max(int(self.channels or 1), 1)  # batch size varies
            if count < 2 and math.prod(x.shape) > 0:
                # PyTorch refuses too: a variance of one value is 0, and the running variance
                # would collapse towards it
                raise ValueError(
                    f"batch_norm: a batch of shape {tuple(x.shape)} has {count} value per "
                    "channel; the train phase needs at least 2 (a larger batch, or eval phase)"
                )
            # one kernel (cuDNN on CUDA) for the statistics and the normalisation
            y, mean, inv_std = xp.nn.batch_norm(x, gamma, beta, eps=self.eps)
            # the biased batch variance, recovered from inv_std = 1 / sqrt(var + eps)
            var = xp.subtract(xp.divide(1.0, xp.multiply(inv_std, inv_std)), self.eps)
            self._update(xp, running_mean, mean, 1.0)
            self._update(xp, running_var, var, count / max(count - 1, 1))
            return y, (mean, inv_std, True)
        centred = xp.subtract(x, xp.reshape(running_mean, self.stat_shape))
        inv_std = xp.divide(1.0, xp.sqrt(xp.add(running_var, self.eps)))
        scale = xp.multiply(inv_std, gamma)
        y = xp.add(
            xp.multiply(centred, xp.reshape(scale, self.stat_shape)),
            xp.reshape(beta, self.stat_shape),
        )
        return y, (running_mean, inv_std, False)

    def _update(self, xp: ArrayNamespace, running: Any, batch: Any, correction: float) -> None:
        m = self.momentum
        xp.inplace.multiply(running, 1.0 - m, out=running)
        xp.inplace.add(running, xp.multiply(batch, m * correction), out=running)

    def backward(
        self, xp: ArrayNamespace, dy: Any, inputs: Inputs, output: Any, residual: Any, needs: Needs
    ) -> Grads:
        mean, inv_std, training = residual
        x, gamma = inputs[0], inputs[1]
        if training:
            dx, dgamma, dbeta = xp.nn.batch_norm_backward(dy, x, gamma, mean, inv_std)
            return (
                dx if needs[0] else None,
                dgamma if needs[1] else None,
                dbeta if needs[2] else None,
                None,
                None,
            )
        # eval phase: the statistics are constants, so y is affine in x
        dx = dgamma = dbeta = None
        inv = xp.reshape(inv_std, self.stat_shape)
        if needs[0]:
            dx = xp.multiply(dy, xp.reshape(xp.multiply(inv_std, gamma), self.stat_shape))
        if needs[1]:
            x_hat = xp.multiply(xp.subtract(x, xp.reshape(mean, self.stat_shape)), inv)
            dgamma = xp.sum(xp.multiply(dy, x_hat), axis=self.axes)
        if needs[2]:
            dbeta = xp.sum(dy, axis=self.axes)
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
    gamma, beta = (None if p is None else as_expr(p, x) for p in (gamma, beta))
    centred = x - mean(x, axis=axis, keepdims=True)
    y: Expr = centred / sqrt(mean(square(centred), axis=axis, keepdims=True) + eps)
    if gamma is not None:
        y = y * gamma
    if beta is not None:
        y = y + beta
    return y
