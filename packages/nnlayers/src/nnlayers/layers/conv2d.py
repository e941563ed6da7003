"""``Conv2D``: a 2-D convolution of NCHW images, plus bias and activation."""

from __future__ import annotations

from typing import Any

from arraycore.nn_shapes import int_arg, padding_arg, pair

from ..expr.node import Expr
from ..expr.spec import Spec
from ..ops.nn.convolution import conv2d
from .base import Activation, Layer, float_dtype, get_activation, known, require_images


class Conv2D(Layer):
    """``activation(conv2d(x, weight) + bias)`` for images ``x`` of shape (N, C, H, W).

    ``weight`` has shape ``(filters, C, kh, kw)``; ``C`` is read from the first input.
    ``padding`` is ``"valid"``, ``"same"`` (output ``ceil(H / stride)``), an int, a pair or
    ``((top, bottom), (left, right))``. The arguments are checked when the layer is made, by
    the rules of :mod:`arraycore.nn_shapes` (those of ``ex.conv2d`` and ``xp.nn.conv2d``).

    >>> import nnlayers.expr as ex
    >>> from nnlayers.layers import Conv2D
    >>> Conv2D(16, 3, padding="same", seed=0)(ex.placeholder((None, 1, 28, 28))).shape
    (None, 16, 28, 28)
    """

    def __init__(
        self,
        filters: int,
        kernel_size: int | tuple[int, int],
        *,
        stride: Any = 1,
        padding: Any = "valid",
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
        self.filters = int_arg(filters, "Conv2D", "filters")
        if self.filters < 1:
            raise ValueError(f"Conv2D: filters must be positive, got {filters}")
        self.kernel_size = pair(kernel_size, "Conv2D", "kernel_size", 1)
        pair(stride, "Conv2D", "stride", 1)
        pair(dilation, "Conv2D", "dilation", 1)
        padding_arg(padding, "Conv2D")
        self.stride = stride
        self.padding = padding
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
        shape = (self.filters, channels, *self.kernel_size)
        self.add_param("weight", shape, self.init, dtype=dt, weight_decay=self.weight_decay)
        if self.use_bias:
            self.add_param("bias", (self.filters,), self.bias_init, dtype=dt, weight_decay=0.0)

    def forward(self, x: Expr) -> Expr:
        y = conv2d(x, self._params["weight"], self.stride, self.padding, self.dilation)
        if self.use_bias:
            y = y + self._params["bias"].reshape(1, -1, 1, 1)
        return y if self._activation is None else self._activation(y)

    def config(self) -> dict[str, Any]:
        return {
            "filters": self.filters,
            "kernel_size": self.kernel_size,
            "stride": self.stride,
            "padding": self.padding,
            "dilation": self.dilation,
            "activation": self.activation,
            "name": self.name,
        }
