"""Regression losses (compositions): squared error."""

from __future__ import annotations

from typing import Any

from ...expr.node import Expr, as_exprs
from ..math.arithmetic import square
from ..math.reduction import mean, sum


def per_example_mean(per_element: Expr) -> Expr:
    """Sum over every axis but the first, then mean over the first (the batch)."""
    if per_element.ndim > 1:
        per_element = sum(per_element, axis=tuple(range(1, per_element.ndim)))
    return mean(per_element, axis=0)


def squared_error(prediction: Any, target: Any) -> Expr:
    """``sum((prediction - target)**2)`` over each example, averaged over the batch."""
    prediction, target = as_exprs(prediction, target)
    return per_example_mean(square(prediction - target))
