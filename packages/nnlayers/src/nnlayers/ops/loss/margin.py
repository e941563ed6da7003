"""Margin losses (compositions): the multi-class hinge loss."""

from __future__ import annotations

from typing import Any

from ...errors import ShapeError
from ...expr.node import Expr, as_expr, constant
from ...expr.spec import format_shape
from ..array.indexing import one_hot
from ..math.activation import relu
from ..math.reduction import mean, sum


def hinge(logits: Any, labels: Any, margin: float = 1.0) -> Expr:
    """Multi-class hinge loss of ``logits`` (N, C) against integer ``labels`` (N,):
    ``sum_{j != y} max(0, margin - x[y] + x[j]) / C`` per example, averaged over the batch
    (PyTorch's ``multi_margin_loss``; the SVM loss of Crammer and Singer's family)."""
    logits = as_expr(logits)
    labels = labels if isinstance(labels, Expr) else constant(labels)
    if logits.ndim != 2:
        raise ValueError(f"hinge: logits need shape (batch, classes), got {logits.shape}")
    classes = logits.shape[-1]
    if classes is None:
        raise ValueError("hinge: the number of classes (last axis of the logits) must be known")
    if labels.ndim != 1 or (
        labels.shape[0] is not None
        and logits.shape[0] is not None
        and labels.shape[0] != logits.shape[0]
    ):
        raise ShapeError(
            f"hinge: labels {format_shape(labels.shape)} must be one class index per row of the "
            f"logits {format_shape(logits.shape)}, shape {format_shape(logits.shape[:1])}"
        )
    target = one_hot(labels, classes, dtype=logits.dtype)
    correct = sum(logits * target, axis=-1, keepdims=True)
    violations = relu(logits - correct + margin) * (1.0 - target)
    loss: Expr = mean(sum(violations, axis=-1), axis=0) * (1.0 / classes)
    return loss


__all__ = ["hinge"]
