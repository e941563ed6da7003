"""Scaled dot-product attention as one op: ``softmax(q @ k^T * scale + mask) @ v``.

The semantics are PyTorch's ``torch.nn.functional.scaled_dot_product_attention``: ``q``
``(..., Tq, d)``, ``k`` ``(..., Tk, d)``, ``v`` ``(..., Tk, dv)`` with the same leading (batch,
head) axes; ``scale`` defaults to ``1 / sqrt(d)``; a boolean ``mask`` (broadcast to
``(..., Tq, Tk)``) keeps the positions where it is true, a floating one is added to the scores;
``causal=True`` lets position ``i`` see positions ``j <= i`` only. A row whose every position is
masked out has no defined attention and gives NaN, as in PyTorch's reference implementation.

Forward computes the scores, softmaxes them in place and multiplies by ``v``; the op keeps only
the attention probabilities ``p`` (not the scores or any other temporary) for backward::

    dv = p^T @ dy     dp = dy @ v^T     ds = p * (dp - sum(dp * p)) * scale
    dq = ds @ k       dk = ds^T @ q

so training through attention holds one ``(..., Tq, Tk)`` array per layer. Where that array is
large (``recompute=None``: from :data:`RECOMPUTE_ELEMENTS` elements on; ``recompute=True``
always) the op keeps only each row's log-sum-exp ``(..., Tq, 1)`` and backward recomputes
``p = exp(q @ k^T * scale + mask - lse)`` with one more product, as memory-efficient attention
kernels do: between forward and backward a layer then holds ``Tk`` times less.

``dropout=rate`` (PyTorch's ``dropout_p``) zeroes each attention probability with probability
``rate`` in the train phase and scales the rest by ``1 / (1 - rate)``, a new mask every step from
the graph's seeded generator (``compile(..., seed=)``), as :func:`nnlayers.expr.dropout` does; in
the eval phase it does nothing. With dropout the op also keeps the mask for backward::

    out = (p * m) @ v     dv = (p * m)^T @ dy     dp = (dy @ v^T) * m
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from arraycore import ArrayNamespace

from ...expr.node import Expr, as_expr
from ...expr.spec import Spec, broadcast_shapes, format_shape
from ..base import Grads, Inputs, Needs, Op, require_float, require_same_dtype


class ScaledDotProductAttention(Op):
    """See the module docstring; inputs ``q, k, v`` and optionally ``mask``."""

    name = "scaled_dot_product_attention"
    has_residual = True
    keep_inputs = (0, 1, 2)
    fresh_grads = True
    nondiff_inputs = (3,)
    phase_dependent = True  # dropout: the train phase and the graph's generator

    def __init__(
        self,
        scale: float | None = None,
        causal: bool = False,
        dropout: float = 0.0,
        recompute: bool | None = None,
    ) -> None:
        if not 0.0 <= float(dropout) < 1.0:
            raise ValueError(
                f"scaled_dot_product_attention: dropout must lie in [0, 1), got {dropout}"
            )
        self.scale = scale
        self.causal = bool(causal)
        self.dropout = float(dropout)
        self.recompute = recompute

    def infer(self, q: Spec, k: Spec, v: Spec, *mask: Spec) -> Spec:
        op = self.name
        require_float(op, q, k, v)
        require_same_dtype(q=q, k=k, v=v)
        if q.ndim < 2 or k.ndim != q.ndim or v.ndim != q.ndim:
            raise ValueError(
                f"{op}: q, k and v need the same number of axes, at least 2 (..., T, d); got "
                f"{format_shape(q.shape)}, {format_shape(k.shape)}, {format_shape(v.shape)}"
            )
        batch = [q.shape[:-2], k.shape[:-2], v.shape[:-2]]
        if not all(_same(batch[0], b) for b in batch[1:]):
            raise ValueError(
                f"{op}: q, k and v must share their leading (batch, head) axes; got "
                f"{format_shape(q.shape)}, {format_shape(k.shape)}, {format_shape(v.shape)}"
            )
        if not _same((q.shape[-1],), (k.shape[-1],)) or not _same((k.shape[-2],), (v.shape[-2],)):
            raise ValueError(
                f"{op}: q (..., Tq, d), k (..., Tk, d) and v (..., Tk, dv) do not align: "
                f"{format_shape(q.shape)}, {format_shape(k.shape)}, {format_shape(v.shape)}"
            )
        d = q.shape[-1]
        if self.scale is not None:
            self.factor = float(self.scale)
        elif d is None:
            raise ValueError(f"{op}: the last axis of q must be known to pick the scale")
        else:
            self.factor = 1.0 / math.sqrt(int(d))
        scores = (*q.shape[:-1], k.shape[-2])
        self.mask_kind = None
        if mask:
            (m,) = mask
            if m.dtype != np.bool_ and m.dtype != q.dtype:
                raise TypeError(
                    f"{op}: mask must be boolean or of q's dtype {q.dtype.name} (added to the "
                    f"scores), got {m.dtype.name}"
                )
            try:
                joined = broadcast_shapes(m.shape, scores)
            except ValueError:
                joined = None
            if joined is None or len(joined) != len(scores) or not _same(joined, scores):
                raise ValueError(
                    f"{op}: mask {format_shape(m.shape)} does not broadcast to the scores "
                    f"{format_shape(scores)}"
                )
            self.mask_kind = "bool" if m.dtype == np.bool_ else "add"
        return Spec((*q.shape[:-1], v.shape[-1]), q.dtype)

    def _scores(self, xp: ArrayNamespace, q: Any, k: Any, mask: tuple[Any, ...]) -> Any:
        """``q @ k^T * scale`` with the mask added or applied and the causal mask."""
        s = xp.matmul(q, xp.matrix_transpose(k))
        s *= self.factor
        if self.mask_kind == "add":
            s += mask[0]
        neg = -math.inf
        if self.mask_kind == "bool":
            s = xp.where(mask[0], s, neg)
        if self.causal:
            tq, tk = int(s.shape[-2]), int(s.shape[-1])
            rows = xp.reshape(xp.arange(tq), (tq, 1))
            keep = rows >= xp.reshape(xp.arange(tk), (1, tk))
            s = xp.where(keep, s, neg)
        return s

    def forward(self, xp: ArrayNamespace, q: Any, k: Any, v: Any, *mask: Any) -> Any:
        s = self._scores(xp, q, k, mask)
        recompute = self.recompute
        if recompute is None:
            recompute = math.prod(int(n) for n in s.shape) >= RECOMPUTE_ELEMENTS
        if recompute:  # keep each row's log-sum-exp, not p
            top = xp.max(s, axis=-1, keepdims=True)
            s -= top
            p = xp.exp(s)
            total = xp.sum(p, axis=-1, keepdims=True)
            p /= total
            kept: Any = ("lse", xp.log(total) + top, mask)
        else:
            p = xp.nn.softmax(s, axis=-1)
            kept = ("p", p, None)
        del s
        if not self.dropout or not self.state.training:
            return xp.matmul(p, v), (*kept, None)
        keep = 1.0 - self.dropout
        m = self.state.rng.bernoulli(keep, tuple(int(n) for n in p.shape), dtype=p.dtype)
        m *= 1.0 / keep
        return xp.matmul(p * m, v), (*kept, m)

    def backward(
        self, xp: ArrayNamespace, dy: Any, inputs: Inputs, output: Any, residual: Any, needs: Needs
    ) -> Grads:
        q, k, v = inputs[:3]
        kind, saved, mask, m = residual
        if kind == "p":
            p = saved
        else:  # recompute the probabilities from the scores and the kept log-sum-exp
            p = self._scores(xp, q, k, mask)
            p -= saved
            p = xp.exp(p)
        kept = p if m is None else p * m
        dv = xp.matmul(xp.matrix_transpose(kept), dy) if needs[2] else None
        del kept
        ds = xp.matmul(dy, xp.matrix_transpose(v))
        if m is not None:
            ds *= m
        ds -= xp.sum(ds * p, axis=-1, keepdims=True)
        ds *= p
        ds *= self.factor
        dq = xp.matmul(ds, k) if needs[0] else None
        dk = xp.matmul(xp.matrix_transpose(ds), q) if needs[1] else None
        grads = (dq, dk, dv)
        return (*grads, None) if len(needs) == 4 else grads


#: From this many attention probabilities per call (16 MB in float32) the op keeps each row's
#: log-sum-exp instead of the probabilities and recomputes them in backward.
RECOMPUTE_ELEMENTS = 1 << 22


def _same(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    """Equal shapes, a ``None`` (unknown) size matching anything."""
    return len(a) == len(b) and all(x is None or y is None or x == y for x, y in zip(a, b))


def scaled_dot_product_attention(
    q: Any,
    k: Any,
    v: Any,
    mask: Any = None,
    *,
    scale: float | None = None,
    causal: bool = False,
    dropout: float = 0.0,
    recompute: bool | None = None,
) -> Expr:
    """``softmax(q @ k^T * scale + mask) @ v`` as one op (PyTorch's semantics; see the module),
    with ``dropout`` on the attention probabilities in the train phase; ``recompute`` chooses
    the memory-saving backward (``None``: for large score matrices).

    >>> import nnlayers.expr as ex
    >>> q = ex.placeholder((None, 4, 10, 16), name="q")  # (batch, heads, time, head width)
    >>> ex.scaled_dot_product_attention(q, q, q, causal=True).shape
    (None, 4, 10, 16)
    """
    q = as_expr(q)
    args = [q, as_expr(k, q), as_expr(v, q)]
    if mask is not None:
        args.append(as_expr(mask, q))  # a float array takes q's dtype, a boolean one stays
    return ScaledDotProductAttention(scale, causal, dropout, recompute)(*args)
