"""Normalisation: batch_norm (dense and spatial, train/eval) and layer_norm."""

from __future__ import annotations

import math
from typing import Any

from arraycore import ArrayNamespace

from ...expr.node import Expr, as_expr
from ...expr.spec import Spec, broadcast_shapes, format_shape, normalize_axes
from ..base import (
    Grads,
    Inputs,
    Needs,
    Op,
    reduction_plan,
    require_float,
    require_same_dtype,
    unbroadcast,
)


class BatchNorm(Op):
    """Batch normalisation over the batch (and spatial) axes of ``x``: (N, C) or (N, C, H, W).

    Inputs: ``x, gamma, beta, running_mean, running_var`` (the last four of shape ``(C,)``).
    In the train phase it normalises with the batch statistics and updates the running ones in
    place (``running = (1 - momentum) * running + momentum * batch``, unbiased variance); in the
    eval phase, and in the train phase while the running statistics are frozen (a frozen
    layer, for fine-tuning), it normalises with the running statistics.
    """

    fresh_grads = True

    name = "batch_norm"
    phase_dependent = True
    has_residual = True
    keep_inputs = (0, 1)
    # y is a new array in both phases (the backend's kernel, or the affine map of the eval
    # phase), so a ReLU after it may write into it
    fresh_output = True
    nondiff_inputs = (3, 4)
    #: whether a ReLU follows in the same op (:class:`BatchNormRelu`)
    relu = False

    def __init__(self, momentum: float, eps: float, running: Any = None) -> None:
        self.momentum = momentum
        self.eps = eps
        # the running-mean Parameter: while it is frozen (a frozen BatchNorm layer), the train
        # phase normalises with the running statistics and leaves them as they are (Keras)
        self.running = running

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
        running = self.running
        if self.state.training and (running is None or not running.frozen):
            count = math.prod(x.shape) // max(int(self.channels or 1), 1)  # batch size varies
            if count < 2 and math.prod(x.shape) > 0:
                # PyTorch refuses too: a variance of one value is 0, and the running variance
                # would collapse towards it
                raise ValueError(
                    f"batch_norm: a batch of shape {tuple(x.shape)} has {count} value per "
                    "channel; the train phase needs at least 2 (a larger batch, or eval phase)"
                )
            # one kernel (cuDNN on CUDA) for the statistics and the normalisation
            kernel = xp.nn.batch_norm_relu if self.relu else xp.nn.batch_norm
            y, mean, inv_std = kernel(x, gamma, beta, eps=self.eps)
            if count:  # an empty batch has no statistics to fold into the running ones
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
        if self.relu:
            y = xp.inplace.maximum(y, 0.0, out=y)
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
            if self.relu:
                found = xp.nn.batch_norm_relu_backward(dy, x, gamma, mean, inv_std, output)
            else:
                found = xp.nn.batch_norm_backward(dy, x, gamma, mean, inv_std)
            dx, dgamma, dbeta = found
            return (
                dx if needs[0] else None,
                dgamma if needs[1] else None,
                dbeta if needs[2] else None,
                None,
                None,
            )
        # eval phase: the statistics are constants, so y is affine in x
        if self.relu:
            dy = xp.nn.relu_backward(dy, output)
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


class BatchNormRelu(BatchNorm):
    """``relu(batch_norm(...))`` as one op, which a plan runs in place of a :class:`BatchNorm`
    whose only reader is a ReLU (:func:`nnlayers.graph.fusion.fuse`): the backend's
    ``xp.nn.batch_norm_relu`` and its backward, one pass each on the NumPy backend instead of
    two (the ReLU's in-place pass and its gradient's). The ReLU's node becomes a
    :class:`~nnlayers.ops.control.Alias` of this op's output."""

    name = "batch_norm_relu"
    plan_only = True
    relu = True
    keep_output = True  # the ReLU's gradient needs y > 0


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
    (``trainable=False``) that the train phase updates in place; the eval phase uses them, and so
    does the train phase while they are frozen (:meth:`nnlayers.Parameter.freeze`).
    """
    from ...parameter import Parameter

    for what, stat in (("running_mean", running_mean), ("running_var", running_var)):
        if not isinstance(stat, Parameter) or stat.trainable:
            raise TypeError(
                f"batch_norm: {what} must be a Parameter(..., trainable=False), which the train "
                f"phase updates in place; got {stat!r}"
            )
    return BatchNorm(momentum, eps, running_mean)(x, gamma, beta, running_mean, running_var)


class LayerNorm(Op):
    """Layer normalisation over ``axes`` with optional ``gamma`` and ``beta`` (broadcast into
    ``x``): ``y = (x - mean) / sqrt(var + eps) * gamma + beta``, biased variance.

    One op, forward and backward, instead of a dozen nodes. Over the trailing axes with both
    ``gamma`` and ``beta`` of those axes' shape (PyTorch's ``LayerNorm``, a transformer's), it is
    the backend's ``xp.nn.layer_norm`` / ``xp.nn.layer_norm_backward`` (one compiled kernel each
    way on the NumPy backend with numba), keeping the rows' mean and ``1 / sqrt(var + eps)``.
    Otherwise the residual keeps the normalised ``x_hat`` and ``1 / sqrt(var + eps)``, and
    backward is ``dx = inv_std * (g - mean(g) - x_hat * mean(g * x_hat))`` with
    ``g = dy * gamma``.
    """

    name = "layer_norm"
    has_residual = True
    fresh_grads = True

    def __init__(self, axis: Any, eps: float, has_gamma: bool, has_beta: bool) -> None:
        if not float(eps) > 0:
            raise ValueError(f"layer_norm: eps must be > 0, got {eps}")
        self.axis = axis
        self.eps = float(eps)
        self.has_gamma = has_gamma
        self.has_beta = has_beta

    def infer(self, x: Spec, *params: Spec) -> Spec:
        require_float(self.name, x, *params)
        require_same_dtype(x=x, **{f"param{i}": p for i, p in enumerate(params)})
        self.axes = normalize_axes(self.axis, x.ndim)
        self.plans = []
        for p in params:
            try:
                joined = broadcast_shapes(x.shape, p.shape)
            except ValueError:
                joined = None
            if (
                joined is None
                or len(joined) != x.ndim
                or any(
                    a is not None and b is not None and a != b
                    for a, b in zip(joined, x.shape, strict=True)
                )
            ):
                raise ValueError(
                    f"{self.name}: gamma and beta must broadcast into x {format_shape(x.shape)} "
                    f"without changing its shape, got {format_shape(p.shape)}"
                )
            self.plans.append((p.shape, reduction_plan(p.shape, x.shape)))
        # the backend's op: trailing axes of known sizes, gamma and beta both of their shape
        # (leading 1s aside)
        k = len(self.axes)
        norm = tuple(x.shape[x.ndim - k :])
        self.norm_shape: tuple[int, ...] | None = None
        if (
            self.has_gamma
            and self.has_beta
            and self.axes == tuple(range(x.ndim - k, x.ndim))
            and None not in norm
            and all(_strip_ones(p.shape) == _strip_ones(norm) for p in params)
        ):
            self.norm_shape = norm  # type: ignore[assignment]
        return x

    def forward(self, xp: ArrayNamespace, x: Any, *params: Any) -> Any:
        if self.norm_shape is not None:
            gamma, beta = (xp.reshape(p, self.norm_shape) for p in params)
            y, mean, inv_std = xp.nn.layer_norm(x, gamma, beta, eps=self.eps)
            return y, (mean, inv_std)
        centred = x - xp.mean(x, axis=self.axes, keepdims=True)
        inv_std = 1.0 / xp.sqrt(
            xp.mean(centred * centred, axis=self.axes, keepdims=True) + self.eps
        )
        centred *= inv_std  # now x_hat
        y = centred * params[0] if self.has_gamma else centred * 1.0
        if self.has_beta:
            y += params[-1]
        return y, (centred, inv_std)

    def backward(
        self, xp: ArrayNamespace, dy: Any, inputs: Inputs, output: Any, residual: Any, needs: Needs
    ) -> Grads:
        if self.norm_shape is not None:
            mean, inv_std = residual
            gamma = xp.reshape(inputs[1], self.norm_shape)
            dx, dgamma, dbeta = xp.nn.layer_norm_backward(dy, inputs[0], gamma, mean, inv_std)
            return (
                dx if needs[0] else None,
                xp.reshape(dgamma, self.plans[0][0]) if needs[1] else None,
                xp.reshape(dbeta, self.plans[1][0]) if needs[2] else None,
            )
        x_hat, inv_std = residual
        grads: list[Any] = [None] * len(needs)
        k = 1
        if self.has_gamma:
            if needs[k]:
                shape, plan = self.plans[k - 1]
                grads[k] = unbroadcast(xp, dy * x_hat, shape, plan)
            k += 1
        if self.has_beta and needs[k]:
            shape, plan = self.plans[k - 1]
            grads[k] = unbroadcast(xp, dy * 1.0, shape, plan)
        if needs[0]:
            g = dy * inputs[1] if self.has_gamma else dy * 1.0
            mean_g = xp.mean(g, axis=self.axes, keepdims=True)
            mean_gx = xp.mean(g * x_hat, axis=self.axes, keepdims=True)
            g -= mean_g
            g -= x_hat * mean_gx
            g *= inv_std
            grads[0] = g
        return tuple(grads)

    def kept_inputs(self, needs: tuple[bool, ...], n_inputs: int) -> tuple[int, ...]:
        if self.norm_shape is not None:
            return (0, 1)
        return (1,) if self.has_gamma and needs[0] else ()


def _strip_ones(shape: tuple[Any, ...]) -> tuple[Any, ...]:
    """``shape`` without its leading 1s."""
    k = 0
    while k < len(shape) and shape[k] == 1:
        k += 1
    return tuple(shape[k:])


def layer_norm(
    x: Any, gamma: Any = None, beta: Any = None, axis: Any = -1, eps: float = 1e-5
) -> Expr:
    """Layer normalisation over ``axis`` (the last by default; an int or a tuple), then
    ``* gamma + beta`` (each optional, broadcast into ``x``), biased variance as in PyTorch.

    >>> import nnlayers.expr as ex
    >>> x = ex.placeholder((None, 10, 64), name="x")
    >>> ex.layer_norm(x, axis=(1, 2)).shape
    (None, 10, 64)
    """
    x = as_expr(x)
    params = [as_expr(p, x) for p in (gamma, beta) if p is not None]
    return LayerNorm(axis, eps, gamma is not None, beta is not None)(x, *params)
