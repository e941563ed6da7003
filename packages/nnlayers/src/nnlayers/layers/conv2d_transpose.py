"""``Conv2DTranspose``: a transposed (fractionally strided) 2-D convolution, for upsampling."""

from __future__ import annotations

import math
from typing import Any

from arraycore.nn_shapes import conv_transpose_padding, int_arg, output_padding_pair, pair

from ..expr.node import Expr
from ..expr.spec import Spec
from ..ops.nn.convolution import conv2d_transpose
from .base import Activation, Layer, float_dtype, get_activation, known, require_images


class Conv2DTranspose(Layer):
    """``activation(conv2d_transpose(x, weight) + bias)`` for NCHW images ``x``.

    ``weight`` has shape ``(C, filters, kh, kw)`` (the layout of the convolution it inverts).
    With ``stride=2, padding="same"`` a (N, C, 7, 7) input becomes (N, filters, 14, 14). The
    arguments are checked when the layer is made, by the rules of :mod:`arraycore.nn_shapes`.

    >>> import nnlayers.expr as ex
    >>> from nnlayers.layers import Conv2DTranspose
    >>> up = Conv2DTranspose(8, 4, stride=2, padding="same", seed=0)
    >>> up(ex.placeholder((None, 16, 7, 7))).shape
    (None, 8, 14, 14)
    """

    def __init__(
        self,
        filters: int,
        kernel_size: int | tuple[int, int],
        *,
        stride: Any = 1,
        padding: Any = "valid",
        output_padding: Any = 0,
        dilation: Any = 1,
        activation: str | Activation | None = None,
        use_bias: bool = True,
        init: Any = "glorot_uniform",
        bias_init: Any = "zeros",
        weight_decay: float | None = None,
        name: str | None = None,
        seed: int | None = None,
    ) -> None:
        super().__init__(name=name, seed=seed)
        layer = "Conv2DTranspose"
        self.filters = int_arg(filters, layer, "filters")
        if self.filters < 1:
            raise ValueError(f"{layer}: filters must be positive, got {filters}")
        self.kernel_size = pair(kernel_size, layer, "kernel_size", 1)
        s, d = pair(stride, layer, "stride", 1), pair(dilation, layer, "dilation", 1)
        extra = output_padding_pair(layer, output_padding, s, d)
        conv_transpose_padding(layer, padding, self.kernel_size, s, d, extra)
        self.stride = stride
        self.padding = padding
        self.output_padding = output_padding
        self.dilation = dilation
        self.activation = activation
        self._activation = get_activation(activation)
        self.use_bias = use_bias
        self.init = init
        self.bias_init = bias_init
        self.weight_decay = weight_decay

    def build(self, spec: Spec) -> None:
        require_images(self, spec)
        (channels,) = known(self, spec, (1,), "channel axis")
        dt = float_dtype(spec)
        receptive = math.prod(self.kernel_size)
        # Each output pixel sums filters-in-channels * kernel terms: the fans of the convolution
        # this one is the gradient of, with the roles of in and out swapped.
        fans = (channels * receptive, self.filters * receptive)
        shape = (channels, self.filters, *self.kernel_size)
        self.add_param(
            "weight", shape, self.init, dtype=dt, weight_decay=self.weight_decay, fans=fans
        )
        if self.use_bias:
            self.add_param("bias", (self.filters,), self.bias_init, dtype=dt, weight_decay=0.0)

    def forward(self, x: Expr) -> Expr:
        y = conv2d_transpose(
            x,
            self._params["weight"],
            self.stride,
            self.padding,
            self.dilation,
            self.output_padding,
        )
        if self.use_bias:
            y = y + self._params["bias"].reshape(1, -1, 1, 1)
        return y if self._activation is None else self._activation(y)

    def config(self) -> dict[str, Any]:
        return {
            "filters": self.filters,
            "kernel_size": self.kernel_size,
            "stride": self.stride,
            "padding": self.padding,
            "output_padding": self.output_padding,
            "dilation": self.dilation,
            "activation": self.activation,
            "name": self.name,
        }
