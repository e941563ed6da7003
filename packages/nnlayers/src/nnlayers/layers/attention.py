"""``MultiHeadAttention``: self- and cross-attention over ``(N, T, E)`` sequences.

The layer is PyTorch's ``nn.MultiheadAttention(embed_dim, num_heads, batch_first=True)``, with
the sizes read from the first inputs as every nnlayers layer does, and its masks mean what they
mean there:

- ``key_padding_mask`` ``(N, Tk)``: boolean, ``True`` marks a padding position that no query
  attends to (or a float mask added to the scores);
- ``attn_mask`` ``(Tq, Tk)`` or ``(N, num_heads, Tq, Tk)``: boolean, ``True`` marks a pair
  that may *not* attend (or a float mask added to the scores);
- ``causal=True``: query ``i`` attends to keys ``j <= i`` only.

A query whose every key is masked out attends to nothing: its output (before the output
projection) and its attention weights are 0 and no gradient flows from it, as PyTorch's
``scaled_dot_product_attention`` gives since 2.5. So a batch may hold a sequence that is all
padding (``key_padding_mask`` True throughout): with the loss excluding it, it adds nothing to the
gradients instead of making them NaN.
The heads run through one :func:`nnlayers.expr.scaled_dot_product_attention` op (one fused
softmax; backward keeps only the attention probabilities).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..expr.node import Expr, as_expr
from ..expr.spec import Spec, format_shape
from ..ops.array.join import split
from ..ops.array.shape import permute_dims, reshape
from ..ops.math.comparison import equal, where
from ..ops.math.reduction import max as reduce_max
from ..ops.nn.attention import scaled_dot_product_attention
from ..ops.nn.softmax import softmax
from .base import Layer, float_dtype, known


class MultiHeadAttention(Layer):
    """Multi-head attention (Vaswani et al., 2017): ``num_heads`` scaled-dot-product attentions
    over learnt projections of ``query``, ``key`` and ``value``, concatenated and projected.

    ``mha(x)`` is self-attention; ``mha(query, key, value)`` attends from ``query`` (N, Tq, Eq)
    to ``key`` (N, Tk, Ek) and ``value`` (N, Tk, Ev) (``value`` defaults to ``key``). The output
    has ``query``'s width ``Eq`` unless ``units`` says otherwise, which must divide by
    ``num_heads``. ``dropout`` drops attention probabilities in the train phase.

    Parameters, as PyTorch's with the weights transposed (``x @ weight``): where query, key and
    value have the same width, one packed ``in_weight`` (Eq, 3 * units) and ``in_bias``
    (self-attention projects with one product); else ``q_weight``, ``k_weight``, ``v_weight``
    and ``in_bias``; then ``out_weight`` (units, Eq) and ``out_bias``.

    ``return_attention_scores=True`` returns ``(output, weights)`` with the per-head attention
    weights (N, num_heads, Tq, Tk), computed beside the fused op (it costs a second softmax).

    >>> import nnlayers.expr as ex
    >>> from nnlayers.layers import MultiHeadAttention
    >>> mha = MultiHeadAttention(4, seed=0)
    >>> x = ex.placeholder((None, 10, 32), name="x")
    >>> mha(x, causal=True).shape, mha.in_weight.shape
    ((None, 10, 32), (32, 96))
    """

    def __init__(
        self,
        num_heads: int,
        *,
        units: int | None = None,
        dropout: float = 0.0,
        use_bias: bool = True,
        init: Any = "glorot_uniform",
        name: str | None = None,
        seed: int | None = None,
    ) -> None:
        super().__init__(name=name, seed=seed)
        if int(num_heads) < 1:
            raise ValueError(f"MultiHeadAttention: num_heads must be positive, got {num_heads}")
        if units is not None and int(units) < 1:
            raise ValueError(f"MultiHeadAttention: units must be positive, got {units}")
        if not 0.0 <= float(dropout) < 1.0:
            raise ValueError(f"MultiHeadAttention: dropout must lie in [0, 1), got {dropout}")
        self.num_heads = int(num_heads)
        self.units = None if units is None else int(units)
        self.dropout = float(dropout)
        self.use_bias = use_bias
        self.init = init

    # -- building -----------------------------------------------------------------------------
    def __call__(
        self,
        query: Any,
        key: Any = None,
        value: Any = None,
        *,
        key_padding_mask: Any = None,
        attn_mask: Any = None,
        causal: bool = False,
        return_attention_scores: bool = False,
    ) -> Any:
        q = as_expr(query)
        k = q if key is None else as_expr(key, q)
        v = k if value is None else as_expr(value, q)
        if not self.built:
            self._specs = (q.spec, k.spec, v.spec)
        return super().__call__(
            q,
            k,
            v,
            key_padding_mask=key_padding_mask,
            attn_mask=attn_mask,
            causal=causal,
            return_attention_scores=return_attention_scores,
        )

    def build(self, spec: Spec) -> None:
        qs, ks, vs = self._specs
        for what, s in (("query", qs), ("key", ks), ("value", vs)):
            if s.ndim != 3:
                raise ValueError(
                    f"MultiHeadAttention {self.name!r}: needs (N, T, E) sequences, got {what} "
                    f"of shape {format_shape(s.shape)}"
                )
        (eq,) = known(self, qs, (2,), "last axis (width) of the query")
        (ek,) = known(self, ks, (2,), "last axis (width) of the key")
        (ev,) = known(self, vs, (2,), "last axis (width) of the value")
        units = eq if self.units is None else self.units
        if units % self.num_heads:
            raise ValueError(
                f"MultiHeadAttention {self.name!r}: {units} units do not split into "
                f"{self.num_heads} heads (units must be a multiple of num_heads)"
            )
        self.width = units
        dt = float_dtype(qs)
        if eq == ek == ev:
            self.add_param("in_weight", (eq, 3 * units), self.init, dtype=dt, fans=(eq, units))
        else:
            for part, width in (("q", eq), ("k", ek), ("v", ev)):
                self.add_param(f"{part}_weight", (width, units), self.init, dtype=dt)
        if self.use_bias:
            self.add_param("in_bias", (3 * units,), "zeros", dtype=dt, weight_decay=0.0)
        self.add_param("out_weight", (units, eq), self.init, dtype=dt)
        if self.use_bias:
            self.add_param("out_bias", (eq,), "zeros", dtype=dt, weight_decay=0.0)

    # -- the expression -----------------------------------------------------------------------
    def _project(self, q: Expr, k: Expr, v: Expr) -> tuple[Expr, Expr, Expr]:
        p = self._params
        bias = p.get("in_bias")
        if "in_weight" in p and k is q and v is q:  # self-attention: one product
            z = q @ p["in_weight"]
            if bias is not None:
                z = z + bias
            qz, kz, vz = split(z, 3, axis=-1)
            return qz, kz, vz
        if "in_weight" in p:
            weights = split(p["in_weight"], 3, axis=-1)
        else:
            weights = [p["q_weight"], p["k_weight"], p["v_weight"]]
        biases = [None] * 3 if bias is None else split(bias, 3, axis=-1)
        out = []
        for x, w, b in zip((q, k, v), weights, biases, strict=True):
            y = x @ w
            out.append(y if b is None else y + b)
        return out[0], out[1], out[2]

    def _heads(self, x: Expr) -> Expr:
        """(N, T, units) -> (N, heads, T, units / heads)."""
        # the batch and the sequence length stay as they are, known or not
        heads = reshape(x, (self.num_heads, self.width // self.num_heads), lead=2)
        return permute_dims(heads, (0, 2, 1, 3))

    def _mask(self, q: Expr, key_padding_mask: Any, attn_mask: Any) -> Expr | None:
        """The masks as one float mask added to the scores (None without masks)."""
        dt = q.dtype
        total: Expr | None = None
        for what, mask in (("key_padding_mask", key_padding_mask), ("attn_mask", attn_mask)):
            if mask is None:
                continue
            m = as_expr(mask, q)  # a float array takes the query's dtype, a boolean one stays
            if m.dtype.kind == "b":
                m = where(m, as_expr(-math.inf, q), as_expr(0.0, q))
            elif m.dtype != dt:
                raise TypeError(
                    f"MultiHeadAttention {self.name!r}: {what} must be boolean or of the query's "
                    f"dtype {dt.name}, got {m.dtype.name}"
                )
            if what == "key_padding_mask":
                if m.ndim != 2:
                    raise ValueError(
                        f"MultiHeadAttention {self.name!r}: key_padding_mask must be (N, Tk), "
                        f"got shape {format_shape(m.shape)}"
                    )
                m = reshape(m, (-1, 1, 1, m.shape[1] if m.shape[1] is not None else -1))
            elif m.ndim not in (2, 4):
                raise ValueError(
                    f"MultiHeadAttention {self.name!r}: attn_mask must be (Tq, Tk) or "
                    f"(N, num_heads, Tq, Tk), got shape {format_shape(m.shape)}"
                )
            total = m if total is None else total + m
        return total

    def forward(
        self,
        query: Expr,
        key: Expr,
        value: Expr,
        *,
        key_padding_mask: Any = None,
        attn_mask: Any = None,
        causal: bool = False,
        return_attention_scores: bool = False,
    ) -> Any:
        specs = (query.spec, key.spec, value.spec)
        if not _same_widths(specs, self._specs):
            raise ValueError(
                f"MultiHeadAttention {self.name!r}: was built for widths "
                f"{[s.shape[-1] for s in self._specs]}, got "
                f"{[format_shape(s.shape) for s in specs]}"
            )
        qz, kz, vz = self._project(query, key, value)
        q, k, v = self._heads(qz), self._heads(kz), self._heads(vz)
        mask = self._mask(query, key_padding_mask, attn_mask)
        ctx = scaled_dot_product_attention(q, k, v, mask, causal=causal, dropout=self.dropout)
        merged = reshape(permute_dims(ctx, (0, 2, 1, 3)), (self.width,), lead=2)
        y = merged @ self._params["out_weight"]
        if "out_bias" in self._params:
            y = y + self._params["out_bias"]
        if not return_attention_scores:
            return y
        return y, self._weights(q, k, mask, causal)

    def _weights(self, q: Expr, k: Expr, mask: Expr | None, causal: bool) -> Expr:
        """softmax(q k^T / sqrt(d) + mask) per head, composed from expression ops."""
        s = (q @ permute_dims(k, (0, 1, 3, 2))) * (1.0 / math.sqrt(self.width // self.num_heads))
        if mask is not None:
            s = s + mask
        if causal:
            tq, tk = q.shape[2], k.shape[2]
            if tq is None or tk is None:
                raise ValueError(f"MultiHeadAttention {self.name!r}: causal needs known lengths")
            lower = np.tril(np.ones((tq, tk), dtype=bool))
            s = s + where(as_expr(lower), as_expr(0.0, s), as_expr(-math.inf, s))
        if mask is None:
            return softmax(s, axis=-1)  # every query sees a key (causal keeps key 0)
        # a query left without keys gets weights 0, as the fused op (and finite gradients)
        empty = equal(reduce_max(s, axis=-1, keepdims=True), as_expr(-math.inf, s))
        zero = as_expr(0.0, s)
        return where(empty, zero, softmax(where(empty, zero, s), axis=-1))

    def config(self) -> dict[str, Any]:
        return {
            "num_heads": self.num_heads,
            "units": self.units,
            "dropout": self.dropout,
            "name": self.name,
        }


def _same_widths(a: tuple[Spec, ...], b: tuple[Spec, ...]) -> bool:
    return all(x.ndim == 3 and x.shape[-1] == y.shape[-1] for x, y in zip(a, b, strict=True))
