"""``Pool2D``: max or average pooling of NCHW images."""

from __future__ import annotations

from typing import Any

from arraycore.nn_shapes import check_pool_padding, padding2d, pair

from ..expr.node import Expr
from ..expr.spec import Spec
from ..ops.math.reduction import max as max_
from ..ops.math.reduction import mean
from ..ops.nn.pooling import avg_pool2d, max_pool2d
from .base import Layer, require_ndim


class Pool2D(Layer):
    """Max (``mode="max"``, the default) or average (``mode="avg"``) pooling over windows of
    ``kernel_size`` moved by ``stride`` (default: the window size), ``padding`` at most half the
    window on each side. The arguments are checked when the layer is made, by the rules of
    :mod:`arraycore.nn_shapes` (those of ``ex.max_pool2d`` and ``xp.nn.max_pool2d``).

    >>> import nnlayers.expr as ex
    >>> from nnlayers.layers import Pool2D
    >>> Pool2D(2)(ex.placeholder((None, 16, 28, 28))).shape
    (None, 16, 14, 14)
    """

    def __init__(
        self,
        kernel_size: Any = 2,
        stride: Any = None,
        padding: Any = 0,
        *,
        mode: str = "max",
        name: str | None = None,
        seed: int | None = None,
    ) -> None:
        super().__init__(name=name, seed=seed)
        if mode not in ("max", "avg"):
            raise ValueError(f"Pool2D: mode must be 'max' or 'avg', got {mode!r}")
        kernel = pair(kernel_size, "Pool2D", "kernel_size", 1)
        if stride is not None:
            pair(stride, "Pool2D", "stride", 1)
        check_pool_padding("Pool2D", padding2d(padding, "Pool2D"), kernel)
        self.kernel_size = kernel_size
        self.stride = stride
        self.padding = padding
        self.mode = mode

    def build(self, spec: Spec) -> None:
        require_ndim(self, spec, (4,), "NCHW image")

    def forward(self, x: Expr) -> Expr:
        pool = max_pool2d if self.mode == "max" else avg_pool2d
        return pool(x, self.kernel_size, self.stride, self.padding)

    def config(self) -> dict[str, Any]:
        return {
            "kernel_size": self.kernel_size,
            "stride": self.stride,
            "padding": self.padding,
            "mode": self.mode,
        }


def MaxPool2D(  # noqa: N802
    kernel_size: Any = 2,
    stride: Any = None,
    padding: Any = 0,
    *,
    name: str | None = None,
    seed: int | None = None,
) -> Pool2D:
    """``Pool2D(..., mode="max")``."""
    return Pool2D(kernel_size, stride, padding, mode="max", name=name, seed=seed)


def AvgPool2D(  # noqa: N802
    kernel_size: Any = 2,
    stride: Any = None,
    padding: Any = 0,
    *,
    name: str | None = None,
    seed: int | None = None,
) -> Pool2D:
    """``Pool2D(..., mode="avg")``."""
    return Pool2D(kernel_size, stride, padding, mode="avg", name=name, seed=seed)


class GlobalPool2D(Layer):
    """The mean (``mode="avg"``) or maximum (``mode="max"``) of each channel over all positions
    of NCHW images: ``(N, C, H, W) -> (N, C)``, or ``(N, C, 1, 1)`` with ``keepdims=True``
    (PyTorch's ``AdaptiveAvgPool2d(1)``). The head of a ResNet, whatever the image size.

    >>> import nnlayers.expr as ex
    >>> from nnlayers.layers import GlobalAvgPool2D
    >>> GlobalAvgPool2D()(ex.placeholder((None, 64, 7, 7))).shape
    (None, 64)
    """

    def __init__(
        self,
        mode: str = "avg",
        *,
        keepdims: bool = False,
        name: str | None = None,
        seed: int | None = None,
    ) -> None:
        super().__init__(name=name, seed=seed)
        if mode not in ("avg", "max"):
            raise ValueError(f"GlobalPool2D: mode must be 'avg' or 'max', got {mode!r}")
        self.mode = mode
        self.keepdims = bool(keepdims)

    def build(self, spec: Spec) -> None:
        require_ndim(self, spec, (4,), "NCHW image")

    def forward(self, x: Expr) -> Expr:
        reduce = mean if self.mode == "avg" else max_
        return reduce(x, axis=(2, 3), keepdims=self.keepdims)

    def config(self) -> dict[str, Any]:
        return {"mode": self.mode, "keepdims": self.keepdims, "name": self.name}


def GlobalAvgPool2D(  # noqa: N802
    *, keepdims: bool = False, name: str | None = None, seed: int | None = None
) -> GlobalPool2D:
    """``GlobalPool2D("avg")``: global average pooling."""
    return GlobalPool2D("avg", keepdims=keepdims, name=name, seed=seed)


def GlobalMaxPool2D(  # noqa: N802
    *, keepdims: bool = False, name: str | None = None, seed: int | None = None
) -> GlobalPool2D:
    """``GlobalPool2D("max")``: global max pooling."""
    return GlobalPool2D("max", keepdims=keepdims, name=name, seed=seed)
