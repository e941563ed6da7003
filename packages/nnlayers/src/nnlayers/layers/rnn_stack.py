"""``RNNStack``: recurrent layers stacked, with dropout between them and the sequence lengths
passed to each (PyTorch's ``nn.LSTM(..., num_layers=, dropout=, bidirectional=)``)."""

from __future__ import annotations

from typing import Any

from ..expr.node import Expr
from ..expr.spec import Spec
from ..ops.nn.dropout import dropout as _dropout
from .base import Layer
from .bidirectional import Bidirectional
from .gru import GRU
from .lstm import LSTM
from .recurrent import Recurrent
from .rnn import RNN

_KINDS = {"rnn": RNN, "lstm": LSTM, "gru": GRU}


class RNNStack(Layer):
    """``layers`` (recurrent layers or :class:`Bidirectional` ones, none applied yet) run one
    after another, each reading the previous one's sequence of outputs, with ``dropout`` on the
    outputs between them in the train phase (not after the last). ``stack(x, lengths=...)``
    gives every layer the lengths of a padded batch (see :meth:`Recurrent.forward`). Every layer
    but the last must return sequences; the stack returns what the last one returns.

    :meth:`of` builds PyTorch's form in one call:

    >>> import nnlayers.expr as ex
    >>> from nnlayers.layers import RNNStack
    >>> stack = RNNStack.of("lstm", 32, num_layers=2, dropout=0.2, bidirectional=True, seed=0)
    >>> stack(ex.placeholder((None, 20, 8)), lengths=ex.placeholder((None,), "int64")).shape
    (None, 20, 64)
    """

    def __init__(
        self,
        layers: list[Recurrent | Bidirectional],
        *,
        dropout: float = 0.0,
        name: str | None = None,
        seed: int | None = None,
    ) -> None:
        super().__init__(name=name, seed=seed)
        layers = list(layers)
        if not layers:
            raise ValueError("RNNStack: give at least one layer")
        if not 0.0 <= float(dropout) < 1.0:
            raise ValueError(f"RNNStack: dropout must lie in [0, 1), got {dropout}")
        for i, layer in enumerate(layers):
            inner = layer.layer if isinstance(layer, Bidirectional) else layer
            if not isinstance(inner, Recurrent):
                raise TypeError(
                    f"RNNStack: layer {i} must be recurrent (RNN, LSTM, GRU or Bidirectional), got "
                    f"{type(layer).__name__}"
                )
            if layer.built:
                raise ValueError(f"RNNStack: layer {i} {layer.name!r} was already applied")
            if i < len(layers) - 1 and (not inner.return_sequences or inner.return_state):
                raise ValueError(
                    f"RNNStack: layer {i} {layer.name!r} feeds the next one and must have "
                    "return_sequences=True and return_state=False"
                )
        self.layers = layers
        self.dropout = float(dropout)

    @classmethod
    def of(
        cls,
        kind: str,
        units: int,
        num_layers: int = 1,
        *,
        dropout: float = 0.0,
        bidirectional: bool = False,
        return_sequences: bool = True,
        seed: int | None = None,
        name: str | None = None,
        **options: Any,
    ) -> RNNStack:
        """``num_layers`` layers of ``kind`` (``"rnn"``, ``"lstm"``, ``"gru"``) with ``units``
        each (per direction if ``bidirectional``); the last returns sequences if
        ``return_sequences`` (PyTorch's ``nn.LSTM`` always does)."""
        if kind not in _KINDS:
            raise ValueError(f"RNNStack.of: kind must be one of {sorted(_KINDS)}, got {kind!r}")
        if int(num_layers) < 1:
            raise ValueError(f"RNNStack.of: num_layers must be positive, got {num_layers}")
        layers: list[Recurrent | Bidirectional] = []
        for i in range(int(num_layers)):
            last = i == int(num_layers) - 1
            layer = _KINDS[kind](
                units,
                return_sequences=return_sequences or not last,
                seed=None if seed is None else seed + 2 * i,
                **options,
            )
            layers.append(Bidirectional(layer) if bidirectional else layer)
        return cls(layers, dropout=dropout, name=name)

    def build(self, spec: Spec) -> None:
        for i, layer in enumerate(self.layers):
            layer.name = f"{self.name}/{i}"
            self.add_sublayer(f"layer_{i}", layer)

    def forward(self, x: Expr, lengths: Any = None) -> Any:
        h: Any = x
        for i, layer in enumerate(self.layers):
            if i and self.dropout:
                h = _dropout(h, self.dropout)
            h = layer(h, lengths=lengths)
        return h

    def config(self) -> dict[str, Any]:
        return {"layers": len(self.layers), "dropout": self.dropout, "name": self.name}
