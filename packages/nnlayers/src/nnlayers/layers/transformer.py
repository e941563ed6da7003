"""Transformer blocks: ``TransformerEncoderLayer`` and ``TransformerDecoderLayer``.

Both are PyTorch's layers of the same names with ``batch_first=True`` (inputs ``(N, T, d)``),
``d`` read from the first input: multi-head attention and a two-layer feed-forward network
(``dim_feedforward`` units, ``activation``), each with dropout, a residual add and a
:class:`~nnlayers.layers.LayerNorm` around it. ``norm_first=False`` (PyTorch's default) is the
original post-norm block, ``x = norm(x + f(x))``; ``norm_first=True`` is the pre-norm block
most models train today, ``x = x + f(norm(x))``. Masks mean what they mean in
:class:`~nnlayers.layers.MultiHeadAttention` (and in PyTorch).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from ..expr.node import Expr, as_expr
from ..expr.spec import Spec
from ..ops.nn.dropout import dropout as _dropout
from .affine import Affine
from .attention import MultiHeadAttention
from .base import Activation, Layer, get_activation, known, require_ndim
from .layer_norm import LayerNorm


class _Block(Layer):
    """What the encoder and decoder layers share: settings, the feed-forward part, the
    residual wiring and the sublayers' names."""

    def __init__(
        self,
        num_heads: int,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: str | Activation = "relu",
        *,
        layer_norm_eps: float = 1e-5,
        norm_first: bool = False,
        use_bias: bool = True,
        name: str | None = None,
        seed: int | None = None,
    ) -> None:
        super().__init__(name=name, seed=seed)
        what = type(self).__name__
        if int(dim_feedforward) < 1:
            raise ValueError(f"{what}: dim_feedforward must be positive, got {dim_feedforward}")
        if not 0.0 <= float(dropout) < 1.0:
            raise ValueError(f"{what}: dropout must lie in [0, 1), got {dropout}")
        if get_activation(activation) is None:
            raise ValueError(f"{what}: the feed-forward part needs an activation, got {activation}")
        self.num_heads = int(num_heads)
        self.dim_feedforward = int(dim_feedforward)
        self.dropout = float(dropout)
        self.activation = activation
        self.layer_norm_eps = float(layer_norm_eps)
        self.norm_first = bool(norm_first)
        self.use_bias = use_bias

    def _make_common(self, spec: Spec, attentions: tuple[str, ...]) -> None:
        require_ndim(self, spec, (3,), "(N, T, d)")
        (d,) = known(self, spec, (2,), "last axis (d)")
        if self.num_heads == d and self.dim_feedforward < d:
            # PyTorch's TransformerEncoderLayer(d_model, nhead) pasted: d_model became the
            # number of heads and nhead the feed-forward width, which builds without error
            what = type(self).__name__
            raise ValueError(
                f"{what} {self.name!r}: {self.num_heads} heads of width 1 and a feed-forward "
                f"width of {self.dim_feedforward} for {d}-wide inputs looks like PyTorch's "
                f"{what}(d_model={d}, nhead={self.dim_feedforward}); nnlayers reads d_model from "
                f"the input and takes the heads first: write {what}({self.dim_feedforward}) or "
                f"{what}(num_heads={self.dim_feedforward}, dim_feedforward=...)"
            )
        self.d_model = d

        def next_seed() -> int | None:
            return self.child_seed(len(self._parts) + 1)

        for key in attentions:
            self.add_sublayer(
                key,
                MultiHeadAttention(
                    self.num_heads,
                    dropout=self.dropout,
                    use_bias=self.use_bias,
                    name=f"{self.name}/{key}",
                    seed=next_seed(),
                ),
            )
        self.add_sublayer(
            "linear1",
            Affine(
                self.dim_feedforward,
                use_bias=self.use_bias,
                name=f"{self.name}/linear1",
                seed=next_seed(),
            ),
        )
        self.add_sublayer(
            "linear2",
            Affine(d, use_bias=self.use_bias, name=f"{self.name}/linear2", seed=next_seed()),
        )
        for i in range(len(attentions) + 1):
            self.add_sublayer(
                f"norm{i + 1}", LayerNorm(eps=self.layer_norm_eps, name=f"{self.name}/norm{i + 1}")
            )

    def _drop(self, x: Expr) -> Expr:
        return _dropout(x, self.dropout) if self.dropout else x

    def _feed_forward(self, x: Expr) -> Expr:
        act = get_activation(self.activation)
        assert act is not None
        h = self._drop(act(self._parts["linear1"](x)))
        return self._drop(self._parts["linear2"](h))

    def _residual(self, x: Expr, norm: str, f: Callable[[Expr], Expr]) -> Expr:
        """``x + f(norm(x))`` (pre-norm) or ``norm(x + f(x))`` (post-norm)."""
        layer_norm = self._parts[norm]
        if self.norm_first:
            return x + f(layer_norm(x))
        out: Expr = layer_norm(x + f(x))
        return out

    def config(self) -> dict[str, Any]:
        return {
            "num_heads": self.num_heads,
            "dim_feedforward": self.dim_feedforward,
            "dropout": self.dropout,
            "activation": self.activation,
            "norm_first": self.norm_first,
            "name": self.name,
        }


class TransformerEncoderLayer(_Block):
    """Self-attention and a feed-forward network, each a residual branch (PyTorch's
    ``nn.TransformerEncoderLayer(d, num_heads, batch_first=True)``; see the module).

    ``layer(x, attn_mask=None, key_padding_mask=None, causal=False)`` with ``x`` (N, T, d).
    Sublayers, attributes once built as in PyTorch (``block.self_attn.in_weight``), their
    parameters named under the layer's name: ``self_attn``, ``linear1``, ``linear2``, ``norm1``,
    ``norm2``.

    >>> import nnlayers.expr as ex
    >>> from nnlayers.layers import TransformerEncoderLayer
    >>> block = TransformerEncoderLayer(4, dim_feedforward=64, norm_first=True, seed=0)
    >>> block(ex.placeholder((None, 12, 32), name="x")).shape
    (None, 12, 32)
    """

    def build(self, spec: Spec) -> None:
        self._make_common(spec, ("self_attn",))

    def forward(
        self,
        x: Expr,
        *,
        attn_mask: Any = None,
        key_padding_mask: Any = None,
        causal: bool = False,
    ) -> Expr:
        attn = self._parts["self_attn"]

        def self_attention(h: Expr) -> Expr:
            y = attn(h, key_padding_mask=key_padding_mask, attn_mask=attn_mask, causal=causal)
            return self._drop(y)

        x = self._residual(x, "norm1", self_attention)
        return self._residual(x, "norm2", self._feed_forward)


class TransformerDecoderLayer(_Block):
    """Masked self-attention, attention to the encoder's output ``memory``, and a feed-forward
    network, each a residual branch (PyTorch's ``nn.TransformerDecoderLayer(d, num_heads,
    batch_first=True)``; see the module).

    ``layer(x, memory, *, causal=False, attn_mask=None, key_padding_mask=None,
    memory_mask=None, memory_key_padding_mask=None)`` with ``x`` (N, T, d) and ``memory``
    (N, S, dm): ``causal``, ``attn_mask`` and ``key_padding_mask`` go to the self-attention (a
    language model passes ``causal=True``), the ``memory_`` masks to the cross-attention.
    Sublayers: ``self_attn``, ``cross_attn``, ``linear1``, ``linear2``, ``norm1`` to ``norm3``.

    >>> import nnlayers.expr as ex
    >>> from nnlayers.layers import TransformerDecoderLayer
    >>> block = TransformerDecoderLayer(4, dim_feedforward=64, seed=0)
    >>> x, memory = ex.placeholder((None, 9, 32), name="x"), ex.placeholder((None, 5, 32))
    >>> block(x, memory, causal=True).shape
    (None, 9, 32)
    """

    def build(self, spec: Spec) -> None:
        self._make_common(spec, ("self_attn", "cross_attn"))

    def forward(
        self,
        x: Expr,
        memory: Any,
        *,
        causal: bool = False,
        attn_mask: Any = None,
        key_padding_mask: Any = None,
        memory_mask: Any = None,
        memory_key_padding_mask: Any = None,
    ) -> Expr:
        memory = as_expr(memory, x)
        self_attn, cross_attn = self._parts["self_attn"], self._parts["cross_attn"]

        def self_attention(h: Expr) -> Expr:
            y = self_attn(h, key_padding_mask=key_padding_mask, attn_mask=attn_mask, causal=causal)
            return self._drop(y)

        def cross_attention(h: Expr) -> Expr:
            y = cross_attn(
                h,
                memory,
                key_padding_mask=memory_key_padding_mask,
                attn_mask=memory_mask,
            )
            return self._drop(y)

        x = self._residual(x, "norm1", self_attention)
        x = self._residual(x, "norm2", cross_attention)
        return self._residual(x, "norm3", self._feed_forward)


class _Stack(Layer):
    """``num_layers`` copies of an unapplied layer, applied in turn (each copy its own
    parameters), then an optional final ``norm``: PyTorch's ``nn.TransformerEncoder`` and
    ``nn.TransformerDecoder``."""

    def __init__(
        self,
        layer: _Block,
        num_layers: int,
        *,
        norm: Layer | None = None,
        name: str | None = None,
        seed: int | None = None,
    ) -> None:
        super().__init__(name=name, seed=seed)
        what = type(self).__name__
        if not isinstance(layer, self._kind):
            raise TypeError(f"{what}: needs a {self._kind.__name__}, got {type(layer).__name__}")
        if layer.built:
            raise ValueError(
                f"{what}: the layer {layer.name!r} was already applied; give a new one (each "
                "copy needs parameters of its own)"
            )
        if int(num_layers) < 1:
            raise ValueError(f"{what}: num_layers must be positive, got {num_layers}")
        self.layer = layer
        self.num_layers = int(num_layers)
        self.norm = norm

    _kind: type[_Block] = _Block

    def build(self, spec: Spec) -> None:
        for i in range(self.num_layers):
            copy_ = copy.deepcopy(self.layer)
            copy_.name = f"{self.name}/layers.{i}"
            if self.layer.seed is not None:
                copy_.seed = self.layer.seed + i
            self.add_sublayer(f"layers_{i}", copy_)
        if self.norm is not None:
            self.norm.name = f"{self.name}/norm"
            self.add_sublayer("norm_layer", self.norm)

    def _layers(self) -> list[Any]:
        return [getattr(self, f"layers_{i}") for i in range(self.num_layers)]

    def _finish(self, x: Expr) -> Expr:
        out: Expr = x if self.norm is None else self.norm(x)
        return out

    def config(self) -> dict[str, Any]:
        return {"num_layers": self.num_layers, "name": self.name}


class TransformerEncoder(_Stack):
    """``num_layers`` copies of a :class:`TransformerEncoderLayer` and an optional final
    ``norm`` (a pre-norm stack ends with one): PyTorch's ``nn.TransformerEncoder(layer,
    num_layers, norm)``. ``encoder(x, attn_mask=, key_padding_mask=, causal=)`` passes the
    masks to every layer.

    >>> import nnlayers.expr as ex
    >>> from nnlayers.layers import LayerNorm, TransformerEncoder, TransformerEncoderLayer
    >>> layer = TransformerEncoderLayer(4, 64, norm_first=True, seed=0)
    >>> encoder = TransformerEncoder(layer, 3, norm=LayerNorm())
    >>> encoder(ex.placeholder((None, 10, 32)), causal=True).shape
    (None, 10, 32)
    """

    _kind = TransformerEncoderLayer

    def forward(self, x: Expr, **masks: Any) -> Expr:
        for layer in self._layers():
            x = layer(x, **masks)
        return self._finish(x)


class TransformerDecoder(_Stack):
    """``num_layers`` copies of a :class:`TransformerDecoderLayer` and an optional final
    ``norm``: PyTorch's ``nn.TransformerDecoder``. ``decoder(x, memory, causal=True, ...)``
    passes ``memory`` and the masks to every layer."""

    _kind = TransformerDecoderLayer

    def forward(self, x: Expr, memory: Any, **masks: Any) -> Expr:
        for layer in self._layers():
            x = layer(x, memory, **masks)
        return self._finish(x)
