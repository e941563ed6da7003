"""``RNN``: the plain (Elman) recurrent layer."""

from __future__ import annotations

from typing import Any

from ..expr.node import Expr
from ..ops.nn.recurrent import rnn_sequence
from .base import Activation, get_activation
from .recurrent import Recurrent

#: The activations the one-op recurrence takes (an input of unknown length).
_ANY_LENGTH = ("tanh", "relu", "sigmoid")


class RNN(Recurrent):
    """``h_t = activation(x_t @ weight + h_{t-1} @ recurrent_weight + bias)`` over (N, T, D)
    input, from ``h_0 = 0`` or ``initial_state``. The final ``h`` is :attr:`state`.

    >>> import nnlayers.expr as ex
    >>> from nnlayers.layers import RNN
    >>> rnn = RNN(32, return_sequences=True, seed=0)
    >>> rnn(ex.placeholder((None, 10, 8))).shape, rnn.state.shape
    ((None, 10, 32), (None, 32))
    """

    gates = 1

    def __init__(self, units: int, *, activation: str | Activation = "tanh", **options: Any):
        super().__init__(units, **options)
        self.activation = activation
        act = get_activation(activation)
        if act is None:
            raise ValueError("RNN: give an activation (a linear RNN has no use here)")
        self._activation = act

    def forward(self, x: Expr, initial_state: Any = None, lengths: Any = None) -> Any:
        if x.shape[1] is None and self.fused and self.activation not in _ANY_LENGTH:
            raise ValueError(
                f"RNN {self.name!r}: an input of unknown length {x.shape} runs as one op, for "
                f"the activations {', '.join(_ANY_LENGTH)}; got {self.activation!r}: give the "
                "length in the input shape"
            )
        return super().forward(x, initial_state, lengths)

    def any_length(self, projected: Expr, state: Any) -> tuple[Expr, Any]:
        """:func:`~nnlayers.ops.nn.recurrent.rnn_sequence`: the recurrence as one op, for a
        length known only in each plan (a known length unrolls the loop into the graph)."""
        hs = rnn_sequence(projected, self._params["recurrent_weight"], state, str(self.activation))
        return hs, hs[:, -1]

    def step(self, projected: Expr, state: Any) -> tuple[Expr, Any]:
        recurrent = self.recur(state)
        z = projected if recurrent is None else projected + recurrent
        h = self._activation(z)
        return h, h
