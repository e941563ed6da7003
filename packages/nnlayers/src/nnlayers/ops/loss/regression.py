"""Regression losses (compositions): squared error."""

from __future__ import annotations

from typing import Any

from ...errors import ShapeError
from ...expr.node import Expr, as_exprs
from ...expr.spec import format_shape
from ..math.arithmetic import square
from ..math.reduction import mean, sum


def check_operands(loss: str, prediction: Expr, target: Expr, what: str = "target") -> None:
    """Refuse a ``target`` that would broadcast ``prediction`` to another shape.

    The rule every element-wise loss follows: the target has the prediction's shape, or one that
    broadcasts to it (a scalar, ``(1, D)`` against ``(N, D)``). Anything else, above all targets
    ``(N,)`` against predictions ``(N, 1)``, would average an ``(N, N)`` outer product of
    differences, a finite and silently wrong loss; it raises :class:`ShapeError` naming the loss,
    both shapes and the reshape that aligns them. An axis of unknown size lined up against a
    prediction axis of size 1 is refused too: it could only broadcast the wrong way.
    """
    p, t = tuple(prediction.shape), tuple(target.shape)
    bad = len(t) > len(p) or any(
        b != 1 and (a == 1 or (a is not None and b is not None and a != b))
        for a, b in zip(p[len(p) - len(t) :], t, strict=True)
    )
    if not bad:
        return
    hint = ""
    if len(t) + 1 == len(p) and p[-1] == 1:
        hint = f"; give the {what} a trailing axis of 1 (y[:, None] or expand_dims(y, -1))"
    elif len(t) == len(p) + 1 and t[-1] == 1:
        hint = f"; drop the {what}'s trailing axis of 1 (y[:, 0] or squeeze(y, -1))"
    raise ShapeError(
        f"{loss}: {what} {format_shape(t)} does not have the prediction's shape "
        f"{format_shape(p)} and would broadcast it to another shape (averaging an outer product "
        f"of differences){hint}"
    )


def per_example_mean(per_element: Expr) -> Expr:
    """Sum over every axis but the first, then mean over the first (the batch)."""
    if per_element.ndim > 1:
        per_element = sum(per_element, axis=tuple(range(1, per_element.ndim)))
    return mean(per_element, axis=0)


def squared_error(prediction: Any, target: Any) -> Expr:
    """``sum((prediction - target)**2)`` over each example, averaged over the batch.

    ``target`` has the prediction's shape (or one broadcasting to it); targets ``(N,)`` against
    predictions ``(N, 1)`` raise :class:`~nnlayers.errors.ShapeError` rather than averaging an
    ``(N, N)`` outer product (see :func:`check_operands`)."""
    prediction, target = as_exprs(prediction, target)
    check_operands("squared_error", prediction, target)
    return per_example_mean(square(prediction - target))
