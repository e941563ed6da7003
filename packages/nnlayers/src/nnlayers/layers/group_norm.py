"""``GroupNorm``: normalisation over groups of channels of each example (Wu and He, 2018)."""

from __future__ import annotations

import math
from typing import Any

from ..expr.node import Expr
from ..expr.spec import Spec, format_shape
from ..ops.array.shape import reshape
from ..ops.nn.normalization import layer_norm
from .base import Layer, float_dtype, known


class GroupNorm(Layer):
    """PyTorch's ``nn.GroupNorm(num_groups, C)``: the channels of each example split into
    ``num_groups`` groups, each normalised over its channels and positions, then a per-channel
    ``gamma`` and ``beta``; inputs ``(N, C, ...)`` (images, sequences or plain features), the
    same in the train and eval phases (no running statistics, so it does not depend on the
    batch size). ``num_groups=1`` normalises each example over everything (LayerNorm over
    ``(C, H, W)``); ``num_groups=C`` is instance normalisation.

    Each group goes through the fused :func:`nnlayers.expr.layer_norm` op on a ``(N, G, -1)``
    view, so forward and backward are one pass each.

    >>> import nnlayers.expr as ex
    >>> from nnlayers.layers import GroupNorm
    >>> GroupNorm(4)(ex.placeholder((None, 16, 8, 8))).shape
    (None, 16, 8, 8)
    """

    def __init__(
        self,
        num_groups: int,
        *,
        eps: float = 1e-5,
        scale: bool = True,
        center: bool = True,
        name: str | None = None,
        seed: int | None = None,
    ) -> None:
        super().__init__(name=name, seed=seed)
        if int(num_groups) < 1:
            raise ValueError(f"GroupNorm: num_groups must be positive, got {num_groups}")
        self.num_groups = int(num_groups)
        self.eps = float(eps)
        self.scale = scale
        self.center = center

    def build(self, spec: Spec) -> None:
        if spec.ndim < 2:
            raise ValueError(
                f"GroupNorm {self.name!r}: needs (N, C, ...) inputs, got shape "
                f"{format_shape(spec.shape)}"
            )
        (channels,) = known(self, spec, (1,), "channel axis")
        if channels % self.num_groups:
            raise ValueError(
                f"GroupNorm {self.name!r}: {channels} channels do not split into "
                f"{self.num_groups} groups"
            )
        known(self, spec, tuple(range(2, spec.ndim)), "spatial axes")
        dt = float_dtype(spec)
        if self.scale:
            self.add_param("gamma", (channels,), "ones", dtype=dt, weight_decay=0.0)
        if self.center:
            self.add_param("beta", (channels,), "zeros", dtype=dt, weight_decay=0.0)

    def forward(self, x: Expr) -> Expr:
        shape = tuple(-1 if n is None else n for n in x.shape)
        group = math.prod(x.shape[1:]) // self.num_groups  # type: ignore[arg-type]
        groups = reshape(x, (-1, self.num_groups, group))
        y = reshape(layer_norm(groups, None, None, -1, self.eps), shape)
        per_channel = (1, -1) + (1,) * (x.ndim - 2)
        if "gamma" in self._params:
            y = y * reshape(self._params["gamma"], per_channel)
        if "beta" in self._params:
            y = y + reshape(self._params["beta"], per_channel)
        return y

    def config(self) -> dict[str, Any]:
        return {"num_groups": self.num_groups, "eps": self.eps, "name": self.name}
