"""``LayerNorm``: normalisation over the feature axis of each example."""

from __future__ import annotations

from typing import Any

from ..expr.node import Expr
from ..expr.spec import Spec
from ..ops.nn.normalization import layer_norm
from .base import Layer, float_dtype, known


class LayerNorm(Layer):
    """``(x - mean) / sqrt(var + eps) * gamma + beta`` over the last axis, per example; the
    same in the train and eval phases (no running statistics).

    >>> import nnlayers.expr as ex
    >>> from nnlayers.layers import LayerNorm
    >>> LayerNorm()(ex.placeholder((None, 20, 64))).shape
    (None, 20, 64)
    """

    def __init__(
        self,
        *,
        eps: float = 1e-5,
        scale: bool = True,
        center: bool = True,
        name: str | None = None,
        seed: int | None = None,
    ) -> None:
        super().__init__(name=name, seed=seed)
        self.eps = eps
        self.scale = scale
        self.center = center

    def build(self, spec: Spec) -> None:
        if spec.ndim < 1:
            raise ValueError(f"LayerNorm {self.name!r}: needs at least one axis, got a scalar")
        (width,) = known(self, spec, (spec.ndim - 1,), "last axis")
        dt = float_dtype(spec)
        if self.scale:
            self.add_param("gamma", (width,), "ones", dtype=dt, weight_decay=0.0)
        if self.center:
            self.add_param("beta", (width,), "zeros", dtype=dt, weight_decay=0.0)

    def forward(self, x: Expr) -> Expr:
        return layer_norm(x, self._params.get("gamma"), self._params.get("beta"), -1, self.eps)

    def config(self) -> dict[str, Any]:
        return {"eps": self.eps, "name": self.name}
