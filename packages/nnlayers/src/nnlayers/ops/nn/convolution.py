"""Convolutions on NCHW images: conv2d and conv2d_transpose (the arraycore ``nn`` kernels)."""

from __future__ import annotations

from typing import Any

from arraycore import ArrayNamespace
from arraycore.nn_shapes import (
    conv_padding,
    conv_transpose_padding,
    output_padding_pair,
    pair,
    transpose_output,
    window_output,
)

from ...expr.node import Expr
from ...expr.spec import Spec, format_shape
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


def _check_images(x: Spec, w: Spec, channel_axis: int) -> None:
    if x.ndim != 4 or w.ndim != 4:
        raise ValueError(
            f"needs NCHW images and 4-D weights, got {format_shape(x.shape)} and {format_shape(w.shape)}"
        )
    c, wc = x.shape[1], w.shape[channel_axis]
    if c is not None and wc is not None and c != wc:
        raise ValueError(
            f"images {format_shape(x.shape)} have {c} channels but the weights "
            f"{format_shape(w.shape)} expect {wc}"
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
        _check_images(x, w, 1)
        kernel: Any = (w.shape[2], w.shape[3])
        self.s = pair(self.stride, self.name, "stride", 1)
        self.d = pair(self.dilation, self.name, "dilation", 1)
        sizes = (x.shape[2], x.shape[3])
        self.pad = conv_padding(self.name, self.padding, sizes, kernel, self.s, self.d)
        out = [
            window_output(x.shape[2 + i], self.pad[i], kernel[i], self.s[i], self.d[i])
            for i in (0, 1)
        ]
        if any(o is not None and o < 1 for o in out):
            raise ValueError(
                f"kernel {kernel} (dilation {self.d}) does not fit images {format_shape(x.shape)} "
                f"with padding {self.pad}"
            )
        self.x_shape, self.w_shape = x.shape, w.shape
        return Spec((x.shape[0], w.shape[0], *out), result_dtype(x, w))

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
        _check_images(x, w, 0)
        kernel: Any = (w.shape[2], w.shape[3])
        self.s = pair(self.stride, self.name, "stride", 1)
        self.d = pair(self.dilation, self.name, "dilation", 1)
        self.op = output_padding_pair(self.name, self.output_padding, self.s, self.d)
        self.pad = conv_transpose_padding(self.name, self.padding, kernel, self.s, self.d, self.op)
        out = [
            transpose_output(
                x.shape[2 + i], self.pad[i], kernel[i], self.s[i], self.d[i], self.op[i]
            )
            for i in (0, 1)
        ]
        if any(o is not None and o < 1 for o in out):
            raise ValueError(
                f"padding {self.pad} leaves no output for images {format_shape(x.shape)}"
            )
        self.w_shape = w.shape
        return Spec((x.shape[0], w.shape[1], *out), result_dtype(x, w))

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
            (dy.shape[2 + i] + sum(self.pad[i]) - self.d[i] * (w.shape[2 + i] - 1) - 1) // self.s[i]
            + 1
            for i in range(2)
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
    or ``((top, bottom), (left, right))``. Add a bias with ``+ b.reshape(1, -1, 1, 1)``.
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
    """Transposed convolution of NCHW ``x`` with ``w`` of shape (C_in, C_out, KH, KW)."""
    return Conv2DTranspose(stride, padding, dilation, output_padding)(x, w)
