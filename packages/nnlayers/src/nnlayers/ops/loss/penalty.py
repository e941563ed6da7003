"""Weight penalties to add to a loss (compositions): L1 (sparsity) and L2."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ...expr.node import Expr
from ..math.arithmetic import abs, square
from ..math.reduction import sum


def _total(terms: list[Expr], scale: float, what: str) -> Expr:
    if not terms:
        raise ValueError(f"{what}: give at least one parameter")
    total = terms[0]
    for term in terms[1:]:
        total = total + term
    return total * float(scale)


def l1_penalty(params: Iterable[Any], scale: float) -> Expr:
    """``scale * sum(|w|)`` over every parameter in ``params``: add it to the loss for L1
    regularisation (its gradient is ``scale * sign(w)``, 0 at 0 as in PyTorch).

    >>> import nnlayers.expr as ex
    >>> from nnlayers.layers import Affine
    >>> layer = Affine(3, seed=0)
    >>> y = layer(ex.placeholder((None, 4)))
    >>> ex.l1_penalty([layer.weight], 1e-4).shape
    ()
    """
    return _total([sum(abs(p)) for p in params], scale, "l1_penalty")


def l2_penalty(params: Iterable[Any], scale: float) -> Expr:
    """``scale * sum(w**2)`` over every parameter in ``params`` (an explicit L2 term). Its
    gradient is ``2 * scale * w``: the optimisers' coupled ``weight_decay`` (``SGD``, ``Adam``,
    ``RMSprop``, which add ``weight_decay * w`` to the gradient) does the same only with
    ``weight_decay = 2 * scale``, and ``AdamW``'s decoupled decay, which bypasses Adam's
    moments, is another regulariser altogether."""
    return _total([sum(square(p)) for p in params], scale, "l2_penalty")


__all__ = ["l1_penalty", "l2_penalty"]
