"""Cross-entropy losses from logits, each summed over an example and averaged over the batch."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...expr.node import Expr, as_expr, as_exprs, constant
from ...expr.spec import Spec, format_shape
from ..base import Grads, Inputs, Needs, Op, require_float, result_dtype
from ..math.activation import _sigmoid, _softplus


class SoftmaxCrossEntropy(Op):
    """``-sum(target * log_softmax(logits)) / N`` with the classes on the last axis.

    ``target`` is integer class indices of shape ``logits.shape[:-1]`` or probabilities (e.g.
    one-hot rows) of the logits' shape. One op rather than a composition: the gradient
    ``(softmax - target) / N`` is exact and needs no ``log`` of a rounded-to-zero probability.
    """

    fresh_grads = True

    name = "softmax_cross_entropy"
    has_residual = True

    def infer(self, logits: Spec, target: Spec) -> Spec:
        require_float(self.name, logits)
        if logits.ndim < 2:
            raise ValueError(
                f"logits need a batch and a class axis, got {format_shape(logits.shape)}"
            )
        self.integer = target.dtype.kind in "iu"
        expected = logits.shape[:-1] if self.integer else logits.shape
        if target.ndim != len(expected) or any(
            a is not None and b is not None and a != b
            for a, b in zip(target.shape, expected, strict=True)
        ):
            kind = "class indices" if self.integer else "probabilities"
            raise ValueError(
                f"target {kind} of shape {format_shape(target.shape)} do not match logits "
                f"{format_shape(logits.shape)} (expected {format_shape(expected)})"
            )
        self.classes = logits.shape[-1]
        self.scale: Any = None if logits.shape[0] is None else 1.0 / max(logits.shape[0], 1)
        if self.integer:
            return Spec((), logits.dtype)
        require_float(self.name, target)
        return Spec((), result_dtype(logits, target))  # as forward computes it

    def forward(self, xp: Any, logits: Any, target: Any) -> Any:
        if self.integer:
            # one fused kernel: the loss and its gradient for a loss gradient of 1
            return xp.nn.softmax_cross_entropy(logits, target, self.scale)
        log_p = xp.nn.log_softmax(logits, axis=-1)
        loss = xp.multiply(xp.sum(xp.multiply(target, log_p)), -self.scale)
        return loss, (log_p, target)

    def backward(
        self, xp: Any, dy: Any, inputs: Inputs, output: Any, residual: Any, needs: Needs
    ) -> Grads:
        if self.integer:
            # the residual is a new array that nothing else holds: scale it in place
            dlogits = xp.inplace.multiply(residual, dy, out=residual) if needs[0] else None
            return dlogits, None  # integer labels get no gradient
        log_p, target = residual
        g = xp.multiply(dy, self.scale)
        dlogits = dtarget = None
        if needs[0]:
            p = xp.multiply(xp.exp(log_p), xp.sum(target, axis=-1, keepdims=True))
            dlogits = xp.multiply(xp.subtract(p, target), g)
        if needs[1]:
            dtarget = xp.multiply(log_p, xp.negative(g))
        return dlogits, dtarget


class SigmoidCrossEntropy(Op):
    """Binary cross-entropy of ``sigmoid(logits)`` against ``target`` in [0, 1], from logits:
    ``max(x, 0) - x * t + log1p(exp(-|x|))`` never overflows."""

    fresh_grads = True

    name = "sigmoid_cross_entropy"
    keep_inputs = True

    def infer(self, logits: Spec, target: Spec) -> Spec:
        require_float(self.name, logits, target)
        if (
            logits.ndim < 1
            or target.ndim != logits.ndim
            or any(
                a is not None and b is not None and a != b
                for a, b in zip(target.shape, logits.shape, strict=True)
            )
        ):
            raise ValueError(
                f"target {format_shape(target.shape)} must have the logits' shape {format_shape(logits.shape)}"
            )
        self.scale = None if logits.shape[0] is None else 1.0 / max(logits.shape[0], 1)
        return Spec((), result_dtype(logits, target))  # as forward computes it

    def forward(self, xp: Any, x: Any, t: Any) -> Any:
        per_element = xp.subtract(_softplus(xp, x), xp.multiply(x, t))
        return xp.multiply(xp.sum(per_element), self.scale)

    def backward(
        self, xp: Any, dy: Any, inputs: Inputs, output: Any, residual: Any, needs: Needs
    ) -> Grads:
        x, t = inputs
        g = xp.multiply(dy, self.scale)
        dx = xp.multiply(xp.subtract(_sigmoid(xp, x), t), g) if needs[0] else None
        dt = xp.multiply(x, xp.negative(g)) if needs[1] else None
        return dx, dt


def softmax_cross_entropy(logits: Any, target: Any) -> Expr:
    """Softmax cross-entropy averaged over the batch; ``target`` holds integer classes or
    probability rows (one-hot)."""
    if not isinstance(target, Expr) and np.asarray(target).dtype.kind in "iub":
        return SoftmaxCrossEntropy()(as_expr(logits), constant(np.asarray(target)))
    logits, target = as_exprs(logits, target)
    return SoftmaxCrossEntropy()(logits, target)


def sigmoid_cross_entropy(logits: Any, target: Any) -> Expr:
    """Binary cross-entropy from logits, summed per example and averaged over the batch."""
    logits, target = as_exprs(logits, target)
    return SigmoidCrossEntropy()(logits, target)


binary_cross_entropy_with_logits = sigmoid_cross_entropy
