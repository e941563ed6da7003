"""``Dropout``: random zeroing of features (or whole channels) in the train phase."""

from __future__ import annotations

from typing import Any

from ..expr.node import Expr
from ..expr.spec import Spec
from ..ops.nn.dropout import dropout
from .base import Layer, require_ndim


class Dropout(Layer):
    """Zero each element with probability ``rate`` while training and scale the rest by
    ``1 / (1 - rate)``; the identity in the eval phase. ``spatial=True`` drops whole channels
    of NCHW images. The masks come from the graph's seeded generator.

    >>> import nnlayers.expr as ex
    >>> from nnlayers.layers import Dropout
    >>> Dropout(0.5)(ex.placeholder((None, 10))).shape
    (None, 10)
    """

    def __init__(
        self,
        rate: float = 0.5,
        *,
        spatial: bool = False,
        name: str | None = None,
        seed: int | None = None,
    ) -> None:
        super().__init__(name=name, seed=seed)
        if not 0.0 <= rate < 1.0:
            raise ValueError(f"Dropout: rate must lie in [0, 1), got {rate}")
        self.rate = rate
        self.spatial = spatial

    def build(self, spec: Spec) -> None:
        if self.spatial:
            require_ndim(self, spec, (4,), "NCHW image")

    def forward(self, x: Expr) -> Expr:
        return dropout(x, self.rate, spatial=self.spatial)

    def config(self) -> dict[str, Any]:
        return {"rate": self.rate, "spatial": self.spatial}


def SpatialDropout(  # noqa: N802
    rate: float = 0.5, *, name: str | None = None, seed: int | None = None
) -> Dropout:
    """``Dropout(rate, spatial=True)``: drop whole channels of NCHW images."""
    return Dropout(rate, spatial=True, name=name, seed=seed)
