"""``RNN``: the plain (Elman) recurrent layer."""

from __future__ import annotations

from typing import Any

from ..expr.node import Expr
from .base import Activation, get_activation
from .recurrent import Recurrent


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

    def step(self, projected: Expr, state: Any) -> tuple[Expr, Any]:
        recurrent = self.recur(state)
        z = projected if recurrent is None else projected + recurrent
        h = self._activation(z)
        return h, h
