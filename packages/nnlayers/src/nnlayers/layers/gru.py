"""``GRU``: the gated recurrent unit layer."""

from __future__ import annotations

from typing import Any

from ..expr.node import Expr
from ..expr.spec import Spec
from ..ops.math.activation import sigmoid, tanh
from ..ops.nn.recurrent import gru_sequence
from .recurrent import Recurrent


class GRU(Recurrent):
    """Gated recurrent unit over (N, T, D) input (Cho et al., 2014), in the form cuDNN, PyTorch
    and Keras (``reset_after=True``) use::

        r = sigmoid(x_r + h @ U_r + b_r)      u = sigmoid(x_u + h @ U_u + b_u)
        n = tanh(x_n + r * (h @ U_n + b_n))   h' = (1 - u) * n + u * h

    where ``x_* = x_t @ weight + bias`` blocks and ``b_*`` is ``recurrent_bias``. The final
    ``h`` is :attr:`state`.

    >>> import nnlayers.expr as ex
    >>> from nnlayers.layers import GRU
    >>> GRU(32, seed=0)(ex.placeholder((None, 12, 4))).shape
    (None, 32)
    """

    gates = 3

    def build(self, spec: Spec) -> None:
        super().build(spec)
        dt = self._params["bias"].dtype
        self.add_param(
            "recurrent_bias", (3 * self.units,), self.bias_init, dtype=dt, weight_decay=0.0
        )

    def sequence(self, projected: Expr, state: Any) -> tuple[Expr, Any]:
        b = self._params["recurrent_bias"]
        hs = gru_sequence(projected, self._params["recurrent_weight"], b, state)
        return hs, hs[:, -1]

    def step(self, projected: Expr, state: Any) -> tuple[Expr, Any]:
        h = state
        b = self._params["recurrent_bias"]
        hidden = b if h is None else self.recur(h) + b
        xr, xu, xn = (self.block(projected, k) for k in range(3))
        hr, hu, hn = (
            hidden[k * self.units : (k + 1) * self.units] if h is None else self.block(hidden, k)
            for k in range(3)
        )
        r = sigmoid(xr + hr)
        u = sigmoid(xu + hu)
        n = tanh(xn + r * hn)
        new = (1.0 - u) * n if h is None else (1.0 - u) * n + u * h
        return new, new
