"""Convolutions on NCHW images: conv2d and conv2d_transpose (the arraycore ``nn`` kernels)."""

from __future__ import annotations

from typing import Any

from arraycore import ArrayNamespace
from arraycore.nn_shapes import conv2d_shape, conv2d_transpose_shape, window_output

from ...expr.node import Expr
from ...expr.spec import Spec
from ..base import (
    Grads,
    Inputs,
    Needs,
    Op,
    concrete,
    require_float,
    require_same_dtype,
    result_dtype,
)


class Conv2D(Op):
    """2-D cross-correlation of ``x`` (N, C, H, W) with ``w`` (O, C, KH, KW), zero padding."""

    fresh_grads = True

    name = "conv2d"
    fresh_output = True

    def __init__(self, stride: Any, padding: Any, dilation: Any) -> None:
        self.stride = stride
        self.padding = padding
        self.dilation = dilation

    def kept_inputs(self, needs: Needs, n_inputs: int) -> tuple[int, ...]:
        return tuple(i for i, other in ((0, 1), (1, 0)) if needs[other])

    def infer(self, x: Spec, w: Spec) -> Spec:
        require_float(self.name, x, w)
        require_same_dtype(input=x, filters=w)
        out, g = conv2d_shape(self.name, x.shape, w.shape, self.stride, self.padding, self.dilation)
        self.s, self.pad, self.d = g.stride, g.pads, g.dilation
        self.x_shape, self.w_shape = x.shape, w.shape
        return Spec(out, result_dtype(x, w))

    def forward(self, xp: ArrayNamespace, x: Any, w: Any) -> Any:
        return xp.nn.conv2d(x, w, stride=self.s, padding=self.pad, dilation=self.d)

    def backward(
        self, xp: ArrayNamespace, dy: Any, inputs: Inputs, output: Any, residual: Any, needs: Needs
    ) -> Grads:
        x, w = inputs
        geometry = {"stride": self.s, "padding": self.pad, "dilation": self.d}
        dx = (
            xp.nn.conv2d_backward_data(dy, w, concrete(self.x_shape, self.name), **geometry)
            if needs[0]
            else None
        )
        dw = (
            xp.nn.conv2d_backward_filter(x, dy, concrete(self.w_shape, self.name), **geometry)
            if needs[1]
            else None
        )
        return dx, dw


class Conv2DTranspose(Op):
    """Transposed convolution of ``x`` (N, C_in, H, W) with ``w`` (C_in, C_out, KH, KW).

    It is the gradient of :class:`Conv2D` with respect to its input, so its own gradients are a
    convolution (for ``x``) and a filter gradient with the roles of input and output swapped.
    """

    fresh_grads = True

    name = "conv2d_transpose"

    def __init__(self, stride: Any, padding: Any, dilation: Any, output_padding: Any) -> None:
        self.stride = stride
        self.padding = padding
        self.dilation = dilation
        self.output_padding = output_padding

    def kept_inputs(self, needs: Needs, n_inputs: int) -> tuple[int, ...]:
        return tuple(i for i, other in ((0, 1), (1, 0)) if needs[other])

    def infer(self, x: Spec, w: Spec) -> Spec:
        require_float(self.name, x, w)
        require_same_dtype(input=x, filters=w)
        out, g = conv2d_transpose_shape(
            self.name,
            x.shape,
            w.shape,
            self.stride,
            self.padding,
            self.dilation,
            self.output_padding,
        )
        self.s, self.pad, self.d, self.op = g.stride, g.pads, g.dilation, g.output_padding
        self.w_shape = w.shape
        return Spec(out, result_dtype(x, w))

    def forward(self, xp: ArrayNamespace, x: Any, w: Any) -> Any:
        return xp.nn.conv2d_transpose(
            x, w, stride=self.s, padding=self.pad, dilation=self.d, output_padding=self.op
        )

    def backward(
        self, xp: ArrayNamespace, dy: Any, inputs: Inputs, output: Any, residual: Any, needs: Needs
    ) -> Grads:
        x, w = inputs
        geometry = {"stride": self.s, "padding": self.pad, "dilation": self.d}
        # The adjoint is a convolution of dy. When output_padding >= stride (allowed while it is
        # below the dilation) that convolution has more rows/cols than x: the extra ones belong
        # to no input pixel, so dx drops them and dw sees x zero-padded to that size.
        h, wd = x.shape[2], x.shape[3]
        full = tuple(
            window_output(dy.shape[2 + i], self.pad[i], w.shape[2 + i], self.s[i], self.d[i])
            for i in (0, 1)
        )
        dx = dw = None
        if needs[0]:
            dx = xp.nn.conv2d(dy, w, **geometry)
            if full != (h, wd):
                dx = dx[:, :, :h, :wd]
        if needs[1]:
            if full != (h, wd):
                padded = xp.zeros((x.shape[0], x.shape[1], *full), dtype=x.dtype)
                padded[:, :, :h, :wd] = x
                x = padded
            dw = xp.nn.conv2d_backward_filter(dy, x, concrete(self.w_shape, self.name), **geometry)
        return dx, dw


def conv2d(x: Any, w: Any, stride: Any = 1, padding: Any = "valid", dilation: Any = 1) -> Expr:
    """2-D convolution (cross-correlation) of NCHW ``x`` with ``w`` of shape (O, C, KH, KW).

    ``padding`` is ``"valid"``, ``"same"`` (output ``ceil(H / stride)``), an int, ``(ph, pw)``
    or ``((top, bottom), (left, right))``; the rules are :mod:`arraycore.nn_shapes`', as for
    ``xp.nn.conv2d``. Add a bias with ``+ b.reshape(1, -1, 1, 1)``.
    """
    return Conv2D(stride, padding, dilation)(x, w)


def conv2d_transpose(
    x: Any,
    w: Any,
    stride: Any = 1,
    padding: Any = "valid",
    dilation: Any = 1,
    output_padding: Any = 0,
) -> Expr:
    """Transposed convolution of NCHW ``x`` with ``w`` of shape (C_in, C_out, KH, KW).

    ``padding`` as for :func:`conv2d`; ``"same"`` makes the output ``stride`` times the input.
    """
    return Conv2DTranspose(stride, padding, dilation, output_padding)(x, w)
