"""Scaled dot-product attention as one op: ``softmax(q @ k^T * scale + mask) @ v``.

The semantics are PyTorch's ``torch.nn.functional.scaled_dot_product_attention``: ``q``
``(..., Tq, d)``, ``k`` ``(..., Tk, d)``, ``v`` ``(..., Tk, dv)`` with the same leading (batch,
head) axes; ``scale`` defaults to ``1 / sqrt(d)``; a boolean ``mask`` (broadcast to
``(..., Tq, Tk)``) keeps the positions where it is true, a floating one is added to the scores;
``causal=True`` lets position ``i`` see positions ``j <= i`` only. A row whose every position is
masked out (by the mask, alone or with ``causal``) attends to nothing: its output is 0 and no
gradient flows from it, as PyTorch's math kernel gives since 2.5 (``_safe_softmax``) and
FlashAttention does, on every backend. So a batch may hold a sequence that is all padding: with
a key-padding mask and the loss excluding it (``where``), it adds nothing to the gradients
instead of turning them NaN. A row holding a NaN or ``+inf`` score is NaN.

The op is the backend's ``xp.nn.scaled_dot_product_attention`` and its backward. On the NumPy
backend (arraycore's reference) forward computes the scores, softmaxes them in place and
multiplies by ``v``, keeping only the attention probabilities ``p`` for backward::

    dv = p^T @ dy     dp = dy @ v^T     ds = p * (dp - sum(dp * p)) * scale
    dq = ds @ k       dk = ds^T @ q

so training through attention holds one ``(..., Tq, Tk)`` array per layer. Where that array is
large (``recompute=None``: from ``arraycore._nn_attention.RECOMPUTE_ELEMENTS`` elements on,
2^22; ``recompute=True`` always) it keeps only each row's log-sum-exp ``(..., Tq)`` and backward
recomputes ``p = exp(q @ k^T * scale + mask - lse)`` with one more product, as memory-efficient
attention kernels do: between forward and backward a layer then holds ``Tk`` times less. The
device backends (OpenCL, CUDA) run fused kernels that never write the scores at all and always
keep the log-sum-exp.

``dropout=rate`` (PyTorch's ``dropout_p``) zeroes each attention probability with probability
``rate`` in the train phase and scales the rest by ``1 / (1 - rate)``, a new mask every step from
the graph's seeded generator (``compile(..., seed=)``), as :func:`nnlayers.expr.dropout` does; in
the eval phase it does nothing. With dropout the op also keeps the mask for backward::

    out = (p * m) @ v     dv = (p * m)^T @ dy     dp = (dy @ v^T) * m

(a dropout mask is one ``(..., Tq, Tk)`` array: the fused kernels read it rather than draw it).
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
    keep_output = True  # the fused kernels' backward reads it (delta = sum(dy * out) per row)
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

    def forward(self, xp: ArrayNamespace, q: Any, k: Any, v: Any, *mask: Any) -> Any:
        m = None
        if self.dropout and self.state.training:
            keep = 1.0 - self.dropout
            shape = (*tuple(int(n) for n in q.shape[:-1]), int(k.shape[-2]))
            m = self.state.rng.bernoulli(keep, shape, dtype=q.dtype)
            m *= 1.0 / keep
        out, saved = xp.nn.scaled_dot_product_attention(
            q, k, v, *mask, scale=self.factor, causal=self.causal, dropout_mask=m,
            recompute=self.recompute,
        )  # fmt: skip
        return out, (saved, mask[0] if mask else None, m)

    def backward(
        self, xp: ArrayNamespace, dy: Any, inputs: Inputs, output: Any, residual: Any, needs: Needs
    ) -> Grads:
        q, k, v = inputs[:3]
        saved, mask, m = residual
        grads = xp.nn.scaled_dot_product_attention_backward(
            dy, q, k, v, output, saved, mask, scale=self.factor, causal=self.causal,
            dropout_mask=m,
        )  # fmt: skip
        wanted = tuple(g if need else None for g, need in zip(grads, needs, strict=False))
        return (*wanted, None) if len(needs) == 4 else wanted


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
