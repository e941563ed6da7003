"""``Bidirectional``: a recurrent layer run over the sequence in both directions."""

from __future__ import annotations

import copy
from typing import Any

from ..expr.node import Expr
from ..expr.spec import Spec
from ..ops.array.join import concat
from ..ops.nn.sequence import reverse_sequence
from .base import Layer
from .recurrent import Recurrent

MERGE_MODES = ("concat", "sum", "mul", "ave", None)


class Bidirectional(Layer):
    """Keras's ``Bidirectional(layer)``: one copy of ``layer`` reads the sequence forwards,
    another (its own parameters) reads it backwards, and their outputs are merged: ``"concat"``
    (default, ``(N, ..., 2 * units)``, PyTorch's ``bidirectional=True``), ``"sum"``, ``"mul"``,
    ``"ave"``, or ``None`` for the pair ``(forward, backward)``.

    With ``return_sequences`` the backward outputs are put back in the input's order, so
    position ``t`` holds what both directions computed there; without, the forward copy's last
    output meets the backward copy's, which is its output at position 0. ``lengths`` (see
    :meth:`Recurrent.forward`) reverses each sequence within its own length, so padding is never
    read before real steps. With ``return_state`` the result is ``(output, (forward_state,
    backward_state))``.

    The wrapped layer must not have been applied yet; ``backward_layer`` gives the backward copy
    (same ``return_sequences`` and ``return_state``) instead of a copy of ``layer``. Sublayers,
    attributes once built: ``forward_layer`` and ``backward_layer``, their parameters named
    ``<name>/forward/...`` and ``<name>/backward/...``.

    >>> import nnlayers.expr as ex
    >>> from nnlayers.layers import LSTM, Bidirectional
    >>> bi = Bidirectional(LSTM(32, return_sequences=True, seed=0))
    >>> bi(ex.placeholder((None, 20, 8)), lengths=ex.placeholder((None,), "int64")).shape
    (None, 20, 64)
    """

    def __init__(
        self,
        layer: Recurrent,
        *,
        merge_mode: str | None = "concat",
        backward_layer: Recurrent | None = None,
        name: str | None = None,
        seed: int | None = None,
    ) -> None:
        super().__init__(name=name, seed=seed)
        for what, given in (("layer", layer), ("backward_layer", backward_layer)):
            if given is None:
                continue
            if not isinstance(given, Recurrent):
                raise TypeError(
                    f"Bidirectional: {what} must be a recurrent layer (RNN, LSTM, GRU), got "
                    f"{type(given).__name__}"
                )
            if given.built:
                raise ValueError(
                    f"Bidirectional: {what} {given.name!r} was already applied; give a new one "
                    "(each direction needs parameters of its own)"
                )
        if merge_mode not in MERGE_MODES:
            raise ValueError(
                f"Bidirectional: merge_mode must be one of {MERGE_MODES}, got {merge_mode!r}"
            )
        backward = copy.deepcopy(layer) if backward_layer is None else backward_layer
        for option in ("return_sequences", "return_state"):
            if getattr(layer, option) != getattr(backward, option):
                raise ValueError(
                    f"Bidirectional: layer and backward_layer differ in {option} "
                    f"({getattr(layer, option)} and {getattr(backward, option)})"
                )
        if backward_layer is None and layer.seed is not None:
            backward.seed = layer.seed + 1
        self.layer = layer
        self.backward = backward
        self.merge_mode = merge_mode

    def build(self, spec: Spec) -> None:
        for key, part, direction in (
            ("forward_layer", self.layer, "forward"),
            ("backward_layer", self.backward, "backward"),
        ):
            part.name = f"{self.name}/{direction}"
            self.add_sublayer(key, part)

    def forward(self, x: Expr, lengths: Any = None) -> Any:
        forward = self.layer(x, lengths=lengths)
        backward = self.backward(reverse_sequence(x, lengths), lengths=lengths)
        states = None
        if self.layer.return_state:
            (forward, fw_state), (backward, bw_state) = forward, backward
            states = (fw_state, bw_state)
        if self.layer.return_sequences:
            backward = reverse_sequence(backward, lengths)
        merged = self._merge(forward, backward)
        return merged if states is None else (merged, states)

    def _merge(self, a: Expr, b: Expr) -> Any:
        mode = self.merge_mode
        if mode == "concat":
            return concat([a, b], axis=-1)
        if mode == "sum":
            return a + b
        if mode == "mul":
            return a * b
        if mode == "ave":
            return (a + b) * 0.5
        return a, b

    def config(self) -> dict[str, Any]:
        return {
            "layer": type(self.layer).__name__,
            "merge_mode": self.merge_mode,
            "name": self.name,
        }
