"""Dropout: random zeroing in the train phase, identity in the eval phase."""

from __future__ import annotations

from typing import Any

from arraycore import ArrayNamespace

from ...expr.node import Expr
from ...expr.spec import Spec, format_shape
from ..base import Grads, Inputs, Needs, Op, require_float


class Dropout(Op):
    """Zero each element (or each channel, ``spatial=True``) with probability ``rate`` and scale
    the rest by ``1 / (1 - rate)`` while training; pass ``x`` through unchanged in eval.

    The mask comes from the graph's seeded generator (``compile(..., seed=)``) and is kept for
    backward.
    """

    name = "dropout"
    phase_dependent = True
    has_residual = True

    def __init__(self, rate: float, spatial: bool) -> None:
        if not 0.0 <= rate < 1.0:
            raise ValueError(f"dropout: rate must lie in [0, 1), got {rate}")
        self.rate = rate
        self.spatial = spatial

    def infer(self, x: Spec) -> Spec:
        require_float(self.name, x)
        if self.spatial and x.ndim != 4:
            raise ValueError(f"spatial dropout needs NCHW images, got {format_shape(x.shape)}")
        self.mask_shape = (*x.shape[:2], 1, 1) if self.spatial else x.shape
        return x

    def forward(self, xp: ArrayNamespace, x: Any) -> Any:
        if not self.state.training or self.rate == 0.0:
            return x, None
        keep = 1.0 - self.rate
        mask = self.state.rng.bernoulli(keep, self.mask_shape, dtype=x.dtype)
        mask = xp.multiply(mask, 1.0 / keep)
        return xp.multiply(x, mask), mask

    def backward(
        self, xp: ArrayNamespace, dy: Any, inputs: Inputs, output: Any, residual: Any, needs: Needs
    ) -> Grads:
        return (dy if residual is None else xp.multiply(dy, residual),)


def dropout(x: Any, rate: float = 0.5, spatial: bool = False) -> Expr:
    """Dropout with drop probability ``rate`` (whole channels of NCHW ``x`` if ``spatial``)."""
    return Dropout(rate, spatial)(x)


def drop_connect(weight: Any, rate: float = 0.5) -> Expr:
    """DropConnect (Wan et al., 2013): each *weight* is dropped with probability ``rate`` in the
    train phase (a new mask every step, kept weights scaled by ``1 / (1 - rate)``), and the
    weight is used as it is in the eval phase. ``Affine(..., drop_connect=rate)`` applies it."""
    return Dropout(rate, False)(weight)
