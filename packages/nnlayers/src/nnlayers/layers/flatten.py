"""``Flatten``: merge every axis after the batch axis into one."""

from __future__ import annotations

from typing import Any

from ..expr.node import Expr
from ..ops.array.shape import flatten
from .base import Layer


class Flatten(Layer):
    """``(N, C, H, W) -> (N, C*H*W)`` (axes from ``start_axis`` on merged); no parameters.

    >>> import nnlayers.expr as ex
    >>> from nnlayers.layers import Flatten
    >>> Flatten()(ex.placeholder((None, 16, 7, 7))).shape
    (None, 784)
    """

    def __init__(
        self, start_axis: int = 1, *, name: str | None = None, seed: int | None = None
    ) -> None:
        super().__init__(name=name, seed=seed)
        self.start_axis = start_axis

    def forward(self, x: Expr) -> Expr:
        return flatten(x, self.start_axis)

    def config(self) -> dict[str, Any]:
        return {"start_axis": self.start_axis}
