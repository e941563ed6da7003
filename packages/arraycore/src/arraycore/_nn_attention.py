"""Scaled dot-product attention, the reference kernels of ``xp.nn.scaled_dot_product_attention``
and its gradient, written against the namespace ``xp`` like the rest of :mod:`arraycore._nn`.

The semantics are PyTorch's ``torch.nn.functional.scaled_dot_product_attention``: ``q (..., Tq,
d)``, ``k (..., Tk, d)`` and ``v (..., Tk, dv)`` with the same leading (batch, head) axes give
``softmax(q @ k^T * scale + mask) @ v`` of shape ``(..., Tq, dv)``. ``scale`` defaults to
``1 / sqrt(d)``. A boolean ``mask`` broadcasting to the scores ``(..., Tq, Tk)`` keeps the
positions where it is true; a floating one (q's dtype) is added to the scores. ``causal=True``
lets query ``i`` see keys ``j <= i`` only (top-left aligned, as PyTorch's ``is_causal``). A row
whose every key the mask excludes (``False``, or ``-inf`` in a floating mask; alone or with
``causal``) attends to nothing: its output is 0 and no gradient flows from it, as PyTorch's math
kernel gives since 2.5 (``_safe_softmax``) and FlashAttention does, so one all-padding sequence
in a batch cannot poison training (its log-sum-exp is ``+inf``, which makes backward's ``exp(s -
lse)`` 0). Such rows are told from the mask (a key-padding mask's check costs no pass over the
scores), the fused kernels' from a row sum of 0: with finite q and k they agree. A row with a NaN
or ``+inf`` score stays NaN; without a mask no row is empty (``causal`` keeps key 0).
``dropout_mask`` (the scores' shape, q's dtype: 0 or ``1 / (1 - rate)``) multiplies the
probabilities before the product with ``v``; the caller draws it.

The forward pass returns ``(out, saved)`` where ``saved`` is what backward needs besides the
inputs: either each row's log-sum-exp ``(..., Tq)``, in q's dtype or (cuDNN's, for half
precision) float32 (backward recomputes the probabilities
from it with one more product, as memory-efficient and flash attention do) or the probabilities
themselves ``(..., Tq, Tk)``. The reference keeps the probabilities for small score matrices
and the log-sum-exp from :data:`RECOMPUTE_ELEMENTS` on (``recompute=`` decides instead); fused
device kernels always keep the log-sum-exp. Backward accepts either form.
"""

from __future__ import annotations

import math
from typing import Any

from . import _constants
from ._nn import Array, Namespace, check_float, softmax, softmax_backward

#: From this many attention probabilities per call (16 MB in float32) the reference keeps each
#: row's log-sum-exp instead of the probabilities and recomputes them in backward.
RECOMPUTE_ELEMENTS = 1 << 22

FORWARD = "scaled_dot_product_attention"
BACKWARD = "scaled_dot_product_attention_backward"


def _shape(a: Array) -> tuple[int, ...]:
    return tuple(int(s) for s in a.shape)


def _broadcasts(small: tuple[int, ...], big: tuple[int, ...]) -> bool:
    """Whether ``small`` broadcasts to ``big`` without changing it."""
    if len(small) > len(big):
        return False
    tail = big[len(big) - len(small) :]
    return all(s in (1, b) for s, b in zip(small, tail, strict=True))


def check_attention(
    op: str,
    xp: Any,
    q: Array,
    k: Array,
    v: Array,
    mask: Array | None,
    dropout_mask: Array | None,
    scale: float | None,
) -> float:
    """The checks of the forward pass (also run by backward); returns the scale factor. ``xp``:
    the namespace, or an ``isdtype`` function (a backend's own kernels pass NumPy's)."""
    check_float(op, xp, q=q, k=k, v=v)
    isdtype = getattr(xp, "isdtype", xp)
    qs, ks, vs = _shape(q), _shape(k), _shape(v)
    if len(qs) < 2 or len(ks) != len(qs) or len(vs) != len(qs):
        raise ValueError(
            f"{op}: q, k and v need the same number of axes, at least 2 (..., T, d); got shapes "
            f"{qs}, {ks}, {vs}"
        )
    if not qs[:-2] == ks[:-2] == vs[:-2]:
        raise ValueError(
            f"{op}: q, k and v must share their leading (batch, head) axes; got shapes {qs}, "
            f"{ks}, {vs}"
        )
    if qs[-1] != ks[-1] or ks[-2] != vs[-2]:
        raise ValueError(
            f"{op}: q (..., Tq, d), k (..., Tk, d) and v (..., Tk, dv) do not align: shapes "
            f"{qs}, {ks}, {vs}"
        )
    scores = (*qs[:-1], ks[-2])
    if mask is not None:
        owned_check = getattr(xp, "_check", None)
        if owned_check is not None:
            owned_check(f"nn.{op}", mask)
        if not (isdtype(mask.dtype, "bool") or mask.dtype == q.dtype):
            raise TypeError(
                f"{op}: mask must be boolean or of q's dtype {q.dtype} (added to the scores), "
                f"got {mask.dtype}"
            )
        if not _broadcasts(_shape(mask), scores):
            raise ValueError(
                f"{op}: mask of shape {_shape(mask)} does not broadcast to the scores {scores}"
            )
    if dropout_mask is not None:
        check_float(op, xp, q=q, dropout_mask=dropout_mask)
        if _shape(dropout_mask) != scores:
            raise ValueError(
                f"{op}: dropout_mask has shape {_shape(dropout_mask)}, expected the scores' "
                f"{scores}"
            )
    if scale is None:
        return 1.0 / math.sqrt(qs[-1]) if qs[-1] else 1.0
    factor = float(scale)
    if not math.isfinite(factor):
        raise ValueError(f"{op}: scale must be finite, got {scale}")
    return factor


def check_attention_backward(
    xp: Any,
    dy: Array,
    q: Array,
    k: Array,
    v: Array,
    out: Array,
    saved: Array,
    mask: Array | None,
    dropout_mask: Array | None,
    scale: float | None,
) -> tuple[float, bool]:
    """The checks of the backward pass; returns the scale factor and whether ``saved`` holds the
    probabilities (else the rows' log-sum-exp)."""
    op = BACKWARD
    factor = check_attention(op, xp, q, k, v, mask, dropout_mask, scale)
    check_float(op, xp, q=q, dy=dy, out=out)
    want = (*_shape(q)[:-1], int(v.shape[-1]))
    for name, a in (("dy", dy), ("out", out)):
        if _shape(a) != want:
            raise ValueError(f"{op}: {name} has shape {_shape(a)}, expected {want}")
    rows, scores = _shape(q)[:-1], (*_shape(q)[:-1], int(k.shape[-2]))
    if _shape(saved) not in (rows, scores):
        raise ValueError(
            f"{op}: saved has shape {_shape(saved)}, expected the rows' log-sum-exp {rows} or "
            f"the probabilities {scores} that the forward pass returned"
        )
    has_p = _shape(saved) == scores
    isdtype = getattr(xp, "isdtype", xp)
    if saved.dtype != q.dtype and (has_p or not isdtype(saved.dtype, "real floating")):
        raise TypeError(
            f"{op}: saved has dtype {saved.dtype}; the probabilities have q's dtype {q.dtype}, "
            f"the log-sum-exp q's dtype or a wider float"
        )
    return factor, has_p


def _scores(
    xp: Namespace, q: Array, k: Array, mask: Array | None, causal: bool, factor: float
) -> Array:
    """``q @ k^T * scale`` with the mask added or applied and the causal mask."""
    s = xp.matmul(q, xp.matrix_transpose(k))
    s *= factor
    if mask is not None:
        if xp.isdtype(mask.dtype, "bool"):
            s = xp.where(mask, s, -math.inf)
        else:
            s += mask
    if causal:
        tq, tk = int(s.shape[-2]), int(s.shape[-1])
        # made once per namespace: no host copy in the step (docs/capture.md)
        rows = xp.reshape(_constants.arange(xp, tq), (tq, 1))
        s = xp.where(rows >= xp.reshape(_constants.arange(xp, tk), (1, tk)), s, -math.inf)
    return s


def _empty_rows(xp: Namespace, mask: Array, causal: bool, tq: int, tk: int) -> Array:
    """Which rows ``mask`` (with ``causal``) leaves without keys: boolean, of the mask's shape
    broadcast with the causal triangle's, the last axis 1 (a key-padding mask's rows cost a
    pass over the mask, not over the scores). A floating mask excludes a key by ``-inf``."""
    kept = mask if xp.isdtype(mask.dtype, "bool") else xp.not_equal(mask, -math.inf)
    if causal:
        rows = xp.reshape(_constants.arange(xp, tq), (tq, 1))
        kept = xp.logical_and(kept, rows >= xp.reshape(_constants.arange(xp, tk), (1, tk)))
    return xp.logical_not(xp.any(kept, axis=-1, keepdims=True))


def _softmax(xp: Namespace, s: Array) -> Array:
    """Softmax over the last axis: the namespace's own ``nn.softmax`` where it has one."""
    nn = getattr(xp, "nn", None)
    return softmax(xp, s, -1) if nn is None else nn.softmax(s, axis=-1)


def _softmax_backward(xp: Namespace, dp: Array, p: Array) -> Array:
    """:func:`softmax_backward` over the last axis: the namespace's own where it has one."""
    nn = getattr(xp, "nn", None)
    return softmax_backward(xp, dp, p, -1) if nn is None else nn.softmax_backward(dp, p, axis=-1)


def scaled_dot_product_attention(
    xp: Namespace,
    q: Array,
    k: Array,
    v: Array,
    mask: Array | None = None,
    *,
    scale: float | None = None,
    causal: bool = False,
    dropout_mask: Array | None = None,
    recompute: bool | None = None,
) -> tuple[Array, Array]:
    """``(out, saved)``: ``softmax(q @ k^T * scale + mask) @ v`` and, for backward, the rows'
    log-sum-exp or the probabilities (see the module)."""
    factor = check_attention(FORWARD, xp, q, k, v, mask, dropout_mask, scale)
    causal = bool(causal)
    tq, tk = int(q.shape[-2]), int(k.shape[-2])
    if recompute is None:
        recompute = math.prod(_shape(q)[:-1]) * tk >= RECOMPUTE_ELEMENTS
    recompute = bool(recompute) and tk > 0
    # the rows left without keys give 0; only a mask can leave one (causal keeps key 0)
    empty = None if mask is None else _empty_rows(xp, mask, causal, tq, tk)
    if mask is not None and empty is not None and not recompute:
        # their softmax sees every key, so that it is finite, and is then multiplied by 0: a
        # pass over the mask and one in place over p, where the scores' max and a where on p
        # would cost two over the scores
        if xp.isdtype(mask.dtype, "bool"):
            mask = xp.logical_or(mask, empty)
        else:
            mask = xp.where(empty, 0.0, mask)
    s = _scores(xp, q, k, mask, causal, factor)
    if recompute:
        top = xp.max(s, axis=-1, keepdims=True)
        top = xp.where(xp.isfinite(top), top, math.nan)  # such rows are NaN, without warnings
        if empty is not None:
            top = xp.where(empty, 0.0, top)  # exp(-inf - 0): the empty rows' probabilities are 0
        s -= top
        p = xp.exp(s)
        del s
        total = xp.sum(p, axis=-1, keepdims=True)
        if empty is not None:
            total = xp.where(empty, 1.0, total)  # 0 / 1, and log(1) without a warning
        p /= total
        lse = xp.log(total) + top
        if empty is not None:
            lse = xp.where(empty, math.inf, lse)  # backward's exp(s - lse) is then 0
        saved = xp.reshape(lse, _shape(q)[:-1])
    else:
        p = _softmax(xp, s)
        del s
        if empty is not None:
            p *= xp.astype(xp.logical_not(empty), p.dtype)
        saved = p
    kept = p if dropout_mask is None else p * dropout_mask
    return xp.matmul(kept, v), saved


def scaled_dot_product_attention_backward(
    xp: Namespace,
    dy: Array,
    q: Array,
    k: Array,
    v: Array,
    out: Array,
    saved: Array,
    mask: Array | None = None,
    *,
    scale: float | None = None,
    causal: bool = False,
    dropout_mask: Array | None = None,
) -> tuple[Array, Array, Array]:
    """``(dq, dk, dv)`` of :func:`scaled_dot_product_attention` from ``dy``, the gradient of its
    output ``out``, and the ``saved`` it returned::

        dv = (p m)^T @ dy     dp = (dy @ v^T) m     ds = p (dp - sum(dp p)) scale
        dq = ds @ k           dk = ds^T @ q

    with ``m`` the dropout mask (1 without)."""
    factor, has_p = check_attention_backward(xp, dy, q, k, v, out, saved, mask, dropout_mask, scale)
    if has_p:
        p = saved
    else:
        p = _scores(xp, q, k, mask, bool(causal), factor)
        lse = saved if saved.dtype == q.dtype else xp.astype(saved, q.dtype)
        p -= xp.expand_dims(lse, axis=-1)
        p = xp.exp(p)
    kept = p if dropout_mask is None else p * dropout_mask
    dv = xp.matmul(xp.matrix_transpose(kept), dy)
    del kept
    ds = xp.matmul(dy, xp.matrix_transpose(v))
    if dropout_mask is not None:
        ds *= dropout_mask
    ds = _softmax_backward(xp, ds, p)
    ds *= factor
    return xp.matmul(ds, k), xp.matmul(xp.matrix_transpose(ds), q), dv
