"""``ResidualBlock``: the basic block of ResNet (He et al., 2016).

Residual connections need no layer of their own: ``h = x + block(x)`` is an expression like any
other, and its gradient reaches ``x`` through both branches. This module gives the block that
ResNet-18 and ResNet-34 stack, as torchvision's ``BasicBlock`` builds it.
"""

from __future__ import annotations

from typing import Any

from ..expr.node import Expr
from ..expr.spec import Spec
from ..ops.math.activation import relu
from .base import Layer, known, require_ndim
from .batch_norm import BatchNorm
from .conv2d import Conv2D
from .group_norm import GroupNorm


class ResidualBlock(Layer):
    """``relu(norm2(conv2(relu(norm1(conv1(x))))) + shortcut(x))`` for NCHW images: two 3x3
    convolutions (the first with ``stride``, both padded by 1 and without bias), each followed by
    a normalisation, and a shortcut that is ``x`` itself when the shape does not change, else a
    1x1 convolution with ``stride`` and a normalisation (torchvision's ``BasicBlock`` with its
    ``downsample``). ``norm="batch"`` (default) or ``"group"`` (``GroupNorm(groups)``, for small
    batches) or ``None``.

    Sublayers, attributes once built: ``conv1``, ``norm1``, ``conv2``, ``norm2`` and, where the
    shape changes, ``shortcut_conv`` and ``shortcut_norm``.

    >>> import nnlayers.expr as ex
    >>> from nnlayers.layers import ResidualBlock
    >>> ResidualBlock(32, stride=2, seed=0)(ex.placeholder((None, 16, 28, 28))).shape
    (None, 32, 14, 14)
    """

    def __init__(
        self,
        filters: int,
        *,
        stride: int = 1,
        norm: str | None = "batch",
        groups: int = 32,
        init: Any = "kaiming_normal",
        name: str | None = None,
        seed: int | None = None,
    ) -> None:
        super().__init__(name=name, seed=seed)
        if int(filters) < 1:
            raise ValueError(f"ResidualBlock: filters must be positive, got {filters}")
        if int(stride) < 1:
            raise ValueError(f"ResidualBlock: stride must be positive, got {stride}")
        if norm not in ("batch", "group", None):
            raise ValueError(f"ResidualBlock: norm must be 'batch', 'group' or None, got {norm!r}")
        self.filters = int(filters)
        self.stride = int(stride)
        self.norm = norm
        self.groups = int(groups)
        self.init = init

    def _norm(self, key: str) -> None:
        if self.norm == "batch":
            self.add_sublayer(key, BatchNorm(name=f"{self.name}/{key}"))
        elif self.norm == "group":
            self.add_sublayer(
                key, GroupNorm(min(self.groups, self.filters), name=f"{self.name}/{key}")
            )

    def build(self, spec: Spec) -> None:
        require_ndim(self, spec, (4,), "NCHW image")
        (channels,) = known(self, spec, (1,), "channel axis")

        def conv(key: str, k: int, stride: int) -> None:
            layer = Conv2D(
                self.filters,
                k,
                stride=stride,
                padding=k // 2,
                use_bias=self.norm is None,
                init=self.init,
                name=f"{self.name}/{key}",
                seed=self.child_seed(len(self._parts)),
            )
            self.add_sublayer(key, layer)

        conv("conv1", 3, self.stride)
        self._norm("norm1")
        conv("conv2", 3, 1)
        self._norm("norm2")
        if self.stride != 1 or channels != self.filters:
            conv("shortcut_conv", 1, self.stride)
            self._norm("shortcut_norm")

    def _apply(self, key: str, x: Expr) -> Expr:
        layer = self._parts.get(key)
        return x if layer is None else layer(x)

    def forward(self, x: Expr) -> Expr:
        h = relu(self._apply("norm1", self._apply("conv1", x)))
        h = self._apply("norm2", self._apply("conv2", h))
        shortcut = x
        if "shortcut_conv" in self._parts:
            shortcut = self._apply("shortcut_norm", self._apply("shortcut_conv", x))
        return relu(h + shortcut)

    def config(self) -> dict[str, Any]:
        return {
            "filters": self.filters,
            "stride": self.stride,
            "norm": self.norm,
            "name": self.name,
        }
