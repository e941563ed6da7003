"""``Affine`` (alias ``Linear``): ``x @ weight + bias`` over the last axis of ``x``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..expr.node import Expr
from ..expr.spec import Spec
from ..ops.nn.dropout import drop_connect as _drop_connect
from .base import Activation, Layer, float_dtype, get_activation, known


class Affine(Layer):
    """A fully connected layer: ``activation(x @ weight + bias)`` on the last axis of ``x``.

    ``weight`` has shape ``(inputs, units)``; ``inputs`` is read from the first input. Inputs
    with more axes (``(N, T, D)``) are transformed at every position.

    ``drop_connect=rate`` drops each weight with probability ``rate`` in the train phase
    (DropConnect), as ``dropout`` drops activations.

    ``weight=`` ties the weight to another one: a :class:`nnlayers.Parameter`, an expression of
    the right shape (``embedding.weight.T``), or a function returning one, called when this
    layer is first applied (so it may name a layer built just before).

    >>> import nnlayers.expr as ex
    >>> from nnlayers.layers import Affine
    >>> layer = Affine(10, activation="relu", seed=0)
    >>> layer(ex.placeholder((None, 784))).shape, layer.weight.shape
    ((None, 10), (784, 10))
    """

    def __init__(
        self,
        units: int,
        *,
        activation: str | Activation | None = None,
        use_bias: bool = True,
        init: Any = "glorot_uniform",
        bias_init: Any = "zeros",
        weight: Expr | Callable[[], Expr] | None = None,
        weight_decay: float | None = None,
        drop_connect: float = 0.0,
        name: str | None = None,
        seed: int | None = None,
    ) -> None:
        super().__init__(name=name, seed=seed)
        if not 0.0 <= drop_connect < 1.0:
            raise ValueError(f"Affine: drop_connect must be in [0, 1), got {drop_connect}")
        self.drop_connect = float(drop_connect)
        if int(units) < 1:
            raise ValueError(f"Affine: units must be positive, got {units}")
        self.units = int(units)
        self.activation = activation
        self._activation = get_activation(activation)
        self.use_bias = use_bias
        self.init = init
        self.bias_init = bias_init
        self.tied = weight
        self.weight_decay = weight_decay

    def build(self, spec: Spec) -> None:
        if spec.ndim < 1:
            raise ValueError(f"Affine {self.name!r}: needs at least one axis, got a scalar")
        (inputs,) = known(self, spec, (spec.ndim - 1,), "last axis")
        dt = float_dtype(spec)
        tied = self.tied() if callable(self.tied) and not isinstance(self.tied, Expr) else self.tied
        self._weight = self.add_param(
            "weight",
            (inputs, self.units),
            self.init if tied is None else tied,
            dtype=dt,
            weight_decay=self.weight_decay,
        )
        if self.use_bias:
            self.add_param("bias", (self.units,), self.bias_init, dtype=dt, weight_decay=0.0)

    def forward(self, x: Expr) -> Expr:
        weight: Expr = self._weight
        if self.drop_connect:
            weight = _drop_connect(weight, self.drop_connect)
        y = x @ weight
        if self.use_bias:
            y = y + self._params["bias"]
        return y if self._activation is None else self._activation(y)

    def config(self) -> dict[str, Any]:
        return {
            "units": self.units,
            "activation": self.activation,
            "drop_connect": self.drop_connect,
            "name": self.name,
        }


Linear = Affine
"""PyTorch's name for :class:`Affine`."""
