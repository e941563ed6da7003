"""``Embedding``: a learnt vector per integer id (words, characters, items)."""

from __future__ import annotations

from typing import Any

from ..expr.node import Expr
from ..expr.spec import DEFAULT_FLOAT, Spec, format_shape
from ..ops.array.indexing import take
from .base import Layer


class Embedding(Layer):
    """Rows of ``weight`` (shape ``(vocabulary, width)``) looked up by integer ids of any shape:
    ids (N, T) give (N, T, width). The gradient accumulates into the rows that were used.

    >>> import nnlayers.expr as ex
    >>> from nnlayers.layers import Embedding
    >>> chars = Embedding(128, 16, seed=0)
    >>> chars(ex.placeholder((None, 40), "int64")).shape
    (None, 40, 16)
    """

    def __init__(
        self,
        vocabulary: int,
        width: int,
        *,
        init: Any = "normal",
        dtype: Any = None,
        weight_decay: float | None = None,
        name: str | None = None,
        seed: int | None = None,
    ) -> None:
        super().__init__(name=name, seed=seed)
        if int(vocabulary) < 1 or int(width) < 1:
            raise ValueError(
                f"Embedding: vocabulary and width must be positive, got {vocabulary}, {width}"
            )
        self.vocabulary = int(vocabulary)
        self.width = int(width)
        self.init = init
        self.dtype = DEFAULT_FLOAT if dtype is None else dtype
        self.weight_decay = weight_decay

    def build(self, spec: Spec) -> None:
        if spec.dtype.kind not in "iu":
            raise TypeError(
                f"Embedding {self.name!r}: needs integer ids, got {spec.dtype.name} of shape "
                f"{format_shape(spec.shape)}"
            )
        self.add_param(
            "weight",
            (self.vocabulary, self.width),
            self.init,
            dtype=self.dtype,
            weight_decay=self.weight_decay,
        )

    def forward(self, ids: Expr) -> Expr:
        return take(self._params["weight"], ids, axis=0)

    def config(self) -> dict[str, Any]:
        return {"vocabulary": self.vocabulary, "width": self.width, "name": self.name}
