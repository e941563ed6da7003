"""Pooling on NCHW images: max_pool2d and avg_pool2d (the arraycore ``nn`` kernels)."""

from __future__ import annotations

from typing import Any

from arraycore import ArrayNamespace
from arraycore.nn_shapes import pool2d_shape

from ...expr.node import Expr
from ...expr.spec import Spec
from ..base import Grads, Inputs, Needs, Op, concrete, require_float


class Pool2D(Op):
    """Base of the poolings: windows of ``kernel_size``, ``stride`` (default: the kernel)."""

    fresh_grads = True

    def __init__(self, kernel_size: Any, stride: Any, padding: Any) -> None:
        self.kernel_size = kernel_size
        self.stride = stride
        self.padding = padding

    def infer(self, x: Spec) -> Spec:
        require_float(self.name, x)
        out, g = pool2d_shape(self.name, x.shape, self.kernel_size, self.stride, self.padding)
        self.k, self.s, self.pad = g.kernel, g.stride, g.pads
        self.x_shape = x.shape
        return Spec(out, x.dtype)


class MaxPool2D(Pool2D):
    """Maximum of each window; the gradient goes to each window's first maximum."""

    name = "max_pool2d"
    fresh_output = True
    keep_inputs = (0,)

    def forward(self, xp: ArrayNamespace, x: Any) -> Any:
        return xp.nn.max_pool2d(x, self.k, self.s, self.pad)

    def backward(
        self, xp: ArrayNamespace, dy: Any, inputs: Inputs, output: Any, residual: Any, needs: Needs
    ) -> Grads:
        return (xp.nn.max_pool2d_backward(dy, inputs[0], self.k, self.s, self.pad),)


class AvgPool2D(Pool2D):
    """Mean of each window (padding counts as zeros unless ``count_include_pad=False``)."""

    name = "avg_pool2d"

    def __init__(
        self, kernel_size: Any, stride: Any, padding: Any, count_include_pad: bool
    ) -> None:
        super().__init__(kernel_size, stride, padding)
        self.count_include_pad = count_include_pad

    def forward(self, xp: ArrayNamespace, x: Any) -> Any:
        return xp.nn.avg_pool2d(x, self.k, self.s, self.pad, self.count_include_pad)

    def backward(
        self, xp: ArrayNamespace, dy: Any, inputs: Inputs, output: Any, residual: Any, needs: Needs
    ) -> Grads:
        return (
            xp.nn.avg_pool2d_backward(
                dy,
                concrete(self.x_shape, self.name),
                self.k,
                self.s,
                self.pad,
                self.count_include_pad,
            ),
        )


def max_pool2d(x: Any, kernel_size: Any, stride: Any = None, padding: Any = 0) -> Expr:
    """Max pooling of NCHW ``x`` (padding counts as -inf)."""
    return MaxPool2D(kernel_size, stride, padding)(x)


def avg_pool2d(
    x: Any, kernel_size: Any, stride: Any = None, padding: Any = 0, count_include_pad: bool = True
) -> Expr:
    """Average pooling of NCHW ``x``."""
    return AvgPool2D(kernel_size, stride, padding, count_include_pad)(x)
