"""Position information for attention: ``PositionalEmbedding`` (learnt) and
``SinusoidalPositionalEncoding`` (fixed), each added to an ``(N, T, d)`` sequence.

Attention by itself does not see the order of its inputs; both layers add a vector per
position ``t`` to ``x[:, t]``, so ``h = layer(embedding(ids))`` is the usual input of a
transformer. The sequence length may be known when the graph is built (a placeholder
``(None, T)`` of ids) or not (``(None, None)``: each plan reads it from its batch), and is at
most ``max_length``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..expr.node import Expr, constant
from ..expr.spec import Spec
from ..ops.array.indexing import getitem
from ..ops.nn.sequence import add_positions
from .base import Layer, float_dtype, known, require_ndim

#: The rows of the sinusoidal table for inputs of unknown length without ``max_length``.
UNKNOWN_LENGTH_ROWS = 4096


def _length(layer: Layer, x: Expr, max_length: int | None) -> int | None:
    """The sequence length of ``x (N, T, d)`` (``None``: known only in each plan), which must
    fit ``max_length``."""
    require_ndim(layer, x.spec, (3,), "(N, T, d)")
    t = x.shape[1]
    if t is not None and max_length is not None and t > max_length:
        raise ValueError(
            f"{type(layer).__name__} {layer.name!r}: sequences of {t} positions are longer "
            f"than max_length={max_length}"
        )
    return t


class PositionalEmbedding(Layer):
    """A learnt vector per position (BERT, GPT-2): ``x + weight[:T]`` with ``weight`` of shape
    ``(max_length, d)``, ``d`` read from the first input.

    >>> import nnlayers.expr as ex
    >>> from nnlayers.layers import PositionalEmbedding
    >>> pos = PositionalEmbedding(128, seed=0)
    >>> pos(ex.placeholder((None, 40, 16))).shape, pos.weight.shape
    ((None, 40, 16), (128, 16))
    """

    def __init__(
        self,
        max_length: int,
        *,
        init: Any = "normal",
        name: str | None = None,
        seed: int | None = None,
    ) -> None:
        super().__init__(name=name, seed=seed)
        if int(max_length) < 1:
            raise ValueError(f"PositionalEmbedding: max_length must be positive, got {max_length}")
        self.max_length = int(max_length)
        self.init = init

    def build(self, spec: Spec) -> None:
        require_ndim(self, spec, (3,), "(N, T, d)")
        (d,) = known(self, spec, (2,), "last axis (d)")
        self.add_param("weight", (self.max_length, d), self.init, dtype=float_dtype(spec))

    def forward(self, x: Expr) -> Expr:
        t = _length(self, x, self.max_length)
        if t is None:  # the first T rows, T read from each batch
            return add_positions(x, self._params["weight"])
        return x + getitem(self._params["weight"], slice(0, t))

    def config(self) -> dict[str, Any]:
        return {"max_length": self.max_length, "name": self.name}


def sinusoidal_table(length: int, width: int, base: float = 10000.0) -> np.ndarray:
    """The encoding of Vaswani et al. (2017), float64 ``(length, width)``: column ``2i`` is
    ``sin(t / base^(2i / width))``, column ``2i + 1`` its cosine."""
    t = np.arange(length, dtype=np.float64)[:, None]
    freq = base ** (-np.arange(0, width, 2, dtype=np.float64) / width)
    table = np.zeros((length, width))
    table[:, 0::2] = np.sin(t * freq)
    table[:, 1::2] = np.cos(t * freq)[:, : width // 2]
    return table


class SinusoidalPositionalEncoding(Layer):
    """The fixed encoding of "Attention Is All You Need": ``x + table[:T]`` with
    :func:`sinusoidal_table` (no parameters). The table is made for the input's length where it
    is known when the layer is applied (a placeholder ``(None, T, d)``): any ``T``, up to
    ``max_length`` if given. For an input whose time axis is unknown (``(None, None, d)``) the
    table has ``max_length`` rows (4096 without it) and each batch adds its first ``T``; a
    longer batch is refused with a message naming ``max_length``.

    >>> import nnlayers.expr as ex
    >>> from nnlayers.layers import SinusoidalPositionalEncoding
    >>> SinusoidalPositionalEncoding()(ex.placeholder((None, 40, 16))).shape
    (None, 40, 16)
    """

    def __init__(
        self,
        *,
        max_length: int | None = None,
        base: float = 10000.0,
        name: str | None = None,
        seed: int | None = None,
    ) -> None:
        super().__init__(name=name, seed=seed)
        if max_length is not None and int(max_length) < 1:
            raise ValueError(
                f"SinusoidalPositionalEncoding: max_length must be positive, got {max_length}"
            )
        self.max_length = None if max_length is None else int(max_length)
        self.base = float(base)

    def forward(self, x: Expr) -> Expr:
        t = _length(self, x, self.max_length)
        (d,) = known(self, x.spec, (2,), "last axis (d)")
        if t is None:
            rows = self.max_length or UNKNOWN_LENGTH_ROWS
            whole = constant(sinusoidal_table(rows, d, self.base), dtype=float_dtype(x.spec))
            return add_positions(x, whole)
        table = sinusoidal_table(t, d, self.base)
        return x + constant(table, dtype=float_dtype(x.spec))

    def config(self) -> dict[str, Any]:
        return {"max_length": self.max_length, "base": self.base, "name": self.name}
