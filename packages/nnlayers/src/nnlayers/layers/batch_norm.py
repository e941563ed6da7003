"""``BatchNorm``: batch normalisation of (N, C) features or (N, C, H, W) images per channel."""

from __future__ import annotations

from typing import Any

from ..expr.node import Expr
from ..expr.spec import Spec
from ..ops.nn.normalization import batch_norm
from .base import Layer, float_dtype, known, require_ndim


class BatchNorm(Layer):
    """Normalise each channel with the batch statistics while training (and update running
    averages, ``running = (1 - momentum) * running + momentum * batch``), with the running ones
    in the eval phase; then scale by ``gamma`` and shift by ``beta``.

    Dense for (N, C) inputs, spatial for (N, C, H, W) (statistics over N, H and W).
    ``running_mean`` and ``running_var`` are non-trainable parameters (:attr:`buffers`), saved in
    checkpoints with the weights.

    >>> import nnlayers.expr as ex
    >>> from nnlayers.layers import BatchNorm
    >>> norm = BatchNorm()
    >>> norm(ex.placeholder((None, 8, 5, 5))).shape, [p.name for p in norm.buffers]
    ((None, 8, 5, 5), ['batch_norm/running_mean', 'batch_norm/running_var'])
    """

    def __init__(
        self,
        *,
        momentum: float = 0.1,
        eps: float = 1e-5,
        scale: bool = True,
        center: bool = True,
        name: str | None = None,
        seed: int | None = None,
    ) -> None:
        super().__init__(name=name, seed=seed)
        if not 0.0 <= momentum <= 1.0:
            raise ValueError(f"BatchNorm: momentum must lie in [0, 1], got {momentum}")
        self.momentum = momentum
        self.eps = eps
        self.scale = scale
        self.center = center

    def build(self, spec: Spec) -> None:
        require_ndim(self, spec, (2, 4), "(N, C) or (N, C, H, W)")
        (channels,) = known(self, spec, (1,), "channel axis")
        dt = float_dtype(spec)
        c = (channels,)
        self.add_param("gamma", c, "ones", dtype=dt, trainable=self.scale, weight_decay=0.0)
        self.add_param("beta", c, "zeros", dtype=dt, trainable=self.center, weight_decay=0.0)
        self.add_param("running_mean", c, "zeros", dtype=dt, trainable=False)
        self.add_param("running_var", c, "ones", dtype=dt, trainable=False)

    def forward(self, x: Expr) -> Expr:
        p = self._params
        return batch_norm(
            x,
            p["gamma"],
            p["beta"],
            p["running_mean"],
            p["running_var"],
            momentum=self.momentum,
            eps=self.eps,
        )

    def config(self) -> dict[str, Any]:
        return {"momentum": self.momentum, "eps": self.eps, "name": self.name}
