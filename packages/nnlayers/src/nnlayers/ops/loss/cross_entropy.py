"""Cross-entropy losses from logits, each summed over an example and averaged over the batch."""

from __future__ import annotations

import math
import warnings
import weakref
from typing import Any

import numpy as np

from arraycore import ArrayNamespace

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
    arraycore_checks_labels = True  # integer targets go to xp.nn.softmax_cross_entropy

    name = "softmax_cross_entropy"
    has_residual = True

    def __init__(self, per_position: bool = False) -> None:
        #: divide by every position's count (``N * T ...``), not the batch's: the mean per
        #: position of a sequence whose length is known only in each plan
        self.per_position = per_position

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
        counted = logits.shape[:-1] if self.per_position else logits.shape[:1]
        self.scale: Any = None if None in counted else 1.0 / max(math.prod(counted), 1)  # type: ignore[arg-type]
        if self.integer:
            return Spec((), logits.dtype)
        require_float(self.name, target)
        return Spec((), result_dtype(logits, target))  # as forward computes it

    def label_input(self, *specs: Spec) -> tuple[int, int | None] | None:
        logits, target = specs
        return (1, logits.shape[-1]) if target.dtype.kind in "iu" else None

    def forward(self, xp: ArrayNamespace, logits: Any, target: Any) -> Any:
        if self.integer:
            # one fused kernel: the loss and its gradient for a loss gradient of 1
            return xp.nn.softmax_cross_entropy(logits, target, self.scale)
        log_p = xp.nn.log_softmax(logits, axis=-1)
        loss = xp.multiply(xp.sum(xp.multiply(target, log_p)), -self.scale)
        return loss, (log_p, target)

    def backward(
        self, xp: ArrayNamespace, dy: Any, inputs: Inputs, output: Any, residual: Any, needs: Needs
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

    def forward(self, xp: ArrayNamespace, x: Any, t: Any) -> Any:
        per_element = xp.subtract(_softplus(xp, x), xp.multiply(x, t))
        return xp.multiply(xp.sum(per_element), self.scale)

    def backward(
        self, xp: ArrayNamespace, dy: Any, inputs: Inputs, output: Any, residual: Any, needs: Needs
    ) -> Grads:
        x, t = inputs
        g = xp.multiply(dy, self.scale)
        dx = xp.multiply(xp.subtract(_sigmoid(xp, x), t), g) if needs[0] else None
        dt = xp.multiply(x, xp.negative(g)) if needs[1] else None
        return dx, dt


class SquashedLogitsWarning(UserWarning):
    """A cross-entropy from logits was given probabilities: the squashing is applied twice."""


#: Nodes already warned about, by id (weak: a recycled id of a dead node is not "warned").
_WARNED: weakref.WeakValueDictionary[int, Expr] = weakref.WeakValueDictionary()


def _layer_of(node: Expr) -> str:
    """The layer that made ``node``: the prefix of the nearest ``layer/param`` name upstream."""
    from ...parameter import Parameter

    frontier, seen = [node], set()
    for _ in range(4):
        upstream = []
        for n in frontier:
            for i in n.inputs:
                if id(i) in seen:
                    continue
                seen.add(id(i))
                if isinstance(i, Parameter) and i.name and "/" in i.name:
                    return f"layer {i.name.rpartition('/')[0]!r}"
                upstream.append(i)
        frontier = upstream
    return "no named layer"


def _warn_if_squashed(loss: str, logits: Any, squash: str) -> None:
    """Warn (once per node) when ``logits`` is the output of ``squash`` (softmax, sigmoid)."""
    if not isinstance(logits, Expr) or logits.op is None or logits.op.name != squash:
        return
    if _WARNED.get(id(logits)) is logits:
        return
    _WARNED[id(logits)] = logits
    site = logits.where_built()
    warnings.warn(
        f"{loss}: its logits are the output of a {squash} ({_layer_of(logits)}"
        f"{', built at ' + site if site else ''}); the loss applies {squash} itself, so the "
        f"network's {squash} is applied twice and training slows or stalls. End the network "
        f"without the {squash} (a linear layer) and apply ex.{squash} to predictions instead.",
        SquashedLogitsWarning,
        stacklevel=3,
    )


def softmax_cross_entropy(logits: Any, target: Any, *, per_position: bool = False) -> Expr:
    """Softmax cross-entropy averaged over the batch; ``target`` holds integer classes or
    probability rows (one-hot). Warns if ``logits`` is already a softmax. ``per_position``
    averages over every position instead (``(N, T, classes)`` logits: divided by ``N * T``, as
    PyTorch's ``cross_entropy`` does), known or not when the graph is built."""
    _warn_if_squashed("softmax_cross_entropy", logits, "softmax")
    op = SoftmaxCrossEntropy(per_position)
    if not isinstance(target, Expr) and np.asarray(target).dtype.kind in "iub":
        return op(as_expr(logits), constant(np.asarray(target)))
    logits, target = as_exprs(logits, target)
    return op(logits, target)


def sigmoid_cross_entropy(logits: Any, target: Any) -> Expr:
    """Binary cross-entropy from logits, summed per example and averaged over the batch. Warns if
    ``logits`` is already a sigmoid."""
    _warn_if_squashed("sigmoid_cross_entropy", logits, "sigmoid")
    logits, target = as_exprs(logits, target)
    return SigmoidCrossEntropy()(logits, target)


binary_cross_entropy_with_logits = sigmoid_cross_entropy
