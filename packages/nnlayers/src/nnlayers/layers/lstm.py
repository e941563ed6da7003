"""``LSTM``: the long short-term memory layer."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..expr.node import Expr, as_expr
from ..expr.spec import Spec
from ..ops.math.activation import sigmoid, tanh
from ..ops.nn.recurrent import lstm_parts
from .recurrent import Recurrent


class LSTM(Recurrent):
    """Long short-term memory over (N, T, D) input (Hochreiter & Schmidhuber, 1997).

    Gates ``i, f, g, o`` (input, forget, cell, output) come from one projection of width
    ``4 * units``: ``c_t = f * c_{t-1} + i * g``, ``h_t = o * tanh(c_t)``. The forget gate's
    bias starts at 1 (``unit_forget_bias``), as Keras does. The final ``(h, c)`` is
    :attr:`state`; ``initial_state`` takes such a pair.

    >>> import nnlayers.expr as ex
    >>> from nnlayers.layers import LSTM
    >>> lstm = LSTM(64, return_sequences=True, seed=0)
    >>> lstm(ex.placeholder((None, 20, 16))).shape, [s.shape for s in lstm.state]
    ((None, 20, 64), [(None, 64), (None, 64)])
    """

    gates = 4
    holds_state_in_loop = True  # the cell state: see Recurrent.forward's ``lengths``

    def __init__(self, units: int, *, unit_forget_bias: bool = True, **options: Any) -> None:
        super().__init__(units, **options)
        self.unit_forget_bias = unit_forget_bias

    def build(self, spec: Spec) -> None:
        super().build(spec)
        if self.unit_forget_bias:
            bias = self._params["bias"]
            value = np.array(bias.value, copy=True)
            value[self.units : 2 * self.units] += 1.0
            bias.assign(value)

    def initial(self, initial_state: Any) -> Any:
        if initial_state is None:
            return None
        h, c = (as_expr(s) for s in initial_state)
        self._check_state(h, "initial_state h")
        self._check_state(c, "initial_state c")
        return h, c

    def layer(self, x: Expr, state: Any) -> tuple[Expr, Any]:
        """One LSTM op (:func:`~nnlayers.ops.nn.recurrent.lstm_parts`): projection, recurrence
        and their gradients in one backend kernel pair (oneDNN's LSTM primitive on the NumPy
        backend where installed)."""
        h0, c0 = (None, None) if state is None else state
        p = self._params
        hs, c_n = lstm_parts(x, p["weight"], p["recurrent_weight"], p["bias"], h0, c0)
        return hs, (hs[:, -1], c_n)

    def state_from_last(self, last: Expr) -> Any:
        return None  # the cell state of each last real step is not kept by the fused op

    def output_of(self, state: Any) -> Expr:
        h: Expr = state[0]
        return h

    def step(self, projected: Expr, state: Any) -> tuple[Expr, Any]:
        h, c = (None, None) if state is None else state
        recurrent = self.recur(h)
        z = projected if recurrent is None else projected + recurrent
        i, f, g, o = (self.block(z, k) for k in range(4))
        i, g, o = sigmoid(i), tanh(g), sigmoid(o)
        c = i * g if c is None else sigmoid(f) * c + i * g
        h = o * tanh(c)
        return h, (h, c)
