"""scaled_dot_product_attention on a row whose every key is masked out (an all-padding sequence):
output 0 and no gradient from it, as PyTorch's math kernel (``_safe_softmax``, since 2.5), on the
active backend, with the probabilities kept and with the memory-saving form (the fused kernels on
the device backends); the other rows exactly as before."""

from __future__ import annotations

import math

import numpy as np
import pytest

import nnlayers
import nnlayers.expr as ex
from nnlayers.testing.oracle import ORACLE_TOLERANCES

try:
    import torch
except ImportError:  # a test-only dependency (nox -s oracle installs it)
    torch = None

TORCH_SAFE_SOFTMAX = torch is not None and tuple(
    int(p) for p in torch.__version__.split("+")[0].split(".")[:2]
) >= (2, 5)


@pytest.fixture
def dtype(xp) -> str:
    """float64 where the backend has it (the comparisons are then tight), else float32."""
    return "float64" if "float64" in xp.__array_namespace_info__().dtypes() else "float32"


def _case(kind: str, dtype: str):
    """q, k, v (2, 3, 5, 4) and dy, a mask of ``kind`` ("bool" keeps where true, "add" is 0 /
    -inf) that leaves batch 1, query 2 without keys and batch 0 queries 0 and 1 without keys
    under ``causal`` only (keys 0 and 1 masked for every query), and the empty rows' flags."""
    rng = np.random.default_rng(21)
    q, k, v, dy = (rng.normal(size=(2, 3, 5, 4)).astype(dtype) for _ in range(4))
    keep = np.ones((2, 1, 5, 5), bool)
    keep[1, :, 2] = False
    keep[0, :, :, :2] = False
    mask = keep if kind == "bool" else np.where(keep, 0.0, -np.inf).astype(dtype)
    return q, k, v, dy, mask, keep


def _empty(keep: np.ndarray, causal: bool) -> np.ndarray:
    """(2, 1, 5) flags: the rows no key is left to."""
    allowed = keep & np.tril(np.ones((5, 5), bool)) if causal else keep
    return ~allowed.any(axis=-1)


def _pytorch_math(q, k, v, dy, keep, causal):
    """PyTorch's math path in float64, written out: ``_safe_softmax`` is ``where(all(s == -inf,
    -1), 0, softmax(s))`` (aten/src/ATen/native/transformers/attention.cpp), differentiated by
    hand: ``(out, dq, dk, dv)`` of ``sum(out * dy)``."""
    q, k, v, dy = (a.astype(np.float64) for a in (q, k, v, dy))
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    allowed = keep & np.tril(np.ones(s.shape[-2:], bool)) if causal else keep
    s = np.where(allowed, s, -np.inf)
    empty = (s == -np.inf).all(axis=-1, keepdims=True)
    top = np.where(empty, 0.0, s.max(axis=-1, keepdims=True))
    e = np.exp(s - top)
    p = np.where(empty, 0.0, e / np.where(empty, 1.0, e.sum(axis=-1, keepdims=True)))
    out = p @ v
    dp = dy @ np.swapaxes(v, -1, -2)
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True)) / math.sqrt(q.shape[-1])
    return out, ds @ k, np.swapaxes(ds, -1, -2) @ q, np.swapaxes(p, -1, -2) @ dy


def _constant(a: np.ndarray, dtype) -> ex.Expr:
    """A constant that keeps ``a``'s values: boolean, or of the inputs' ``dtype``."""
    return ex.constant(a) if a.dtype == np.bool_ else ex.constant(a, dtype=dtype)


def _ours(q, k, v, dy, mask, causal, recompute):
    """``(out, dq, dk, dv)`` of ``sum(out * dy)`` through the op, on the host in float64."""
    phs = [ex.placeholder(a.shape, a.dtype, name=n) for a, n in zip((q, k, v), "qkv", strict=True)]
    out = ex.scaled_dot_product_attention(
        *phs, _constant(mask, q.dtype), causal=causal, recompute=recompute
    )
    loss = ex.sum(out * _constant(dy, q.dtype))
    graph = nnlayers.compile([loss, out], wrt=phs)
    value = graph.xp.to_numpy(graph.forward(dict(zip(phs, (q, k, v), strict=True)))[1])
    grads = graph.backward()
    return [np.asarray(value, np.float64)] + [
        np.asarray(graph.xp.to_numpy(grads[p]), np.float64) for p in phs
    ]


OPTIONS = [
    pytest.param(kind, causal, recompute, id=f"{kind}-{'causal-' if causal else ''}{name}")
    for kind in ("bool", "add")
    for causal in (False, True)
    for recompute, name in ((False, "probabilities"), (True, "recompute"))
]


@pytest.mark.parametrize(("kind", "causal", "recompute"), OPTIONS)
def test_a_row_without_keys_is_zero_and_passes_no_gradient(kind, causal, recompute, dtype) -> None:
    q, k, v, dy, mask, keep = _case(kind, dtype)
    got = _ours(q, k, v, dy, mask, causal, recompute)
    for name, g in zip(("out", "dq", "dk", "dv"), got, strict=True):
        assert np.isfinite(g).all(), f"{name} is not finite"
    empty = _empty(keep, causal)
    assert empty.sum() == (3 if causal else 1)
    rows = np.broadcast_to(empty, (2, 3, 5))
    np.testing.assert_array_equal(got[0][rows], 0.0)  # the output of an empty row
    np.testing.assert_array_equal(got[1][rows], 0.0)  # and its query's gradient
    want = _pytorch_math(q, k, v, dy, keep, causal)
    for name, g, w in zip(("out", "dq", "dk", "dv"), got, want, strict=True):
        tol = ORACLE_TOLERANCES[np.dtype(dtype)]
        np.testing.assert_allclose(g, w, rtol=tol.rtol, atol=tol.atol, err_msg=name)


@pytest.mark.skipif(not TORCH_SAFE_SOFTMAX, reason="needs PyTorch 2.5 or later (_safe_softmax)")
@pytest.mark.parametrize(("kind", "causal", "recompute"), OPTIONS)
def test_a_row_without_keys_equals_pytorch(kind, causal, recompute, dtype) -> None:
    """Against ``torch.nn.functional.scaled_dot_product_attention`` on its math kernel."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q, k, v, dy, mask, keep = _case(kind, dtype)
    got = _ours(q, k, v, dy, mask, causal, recompute)
    tensors = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (q, k, v)]
    allowed = keep & np.tril(np.ones((5, 5), bool)) if causal else keep
    with sdpa_kernel(SDPBackend.MATH):
        out = torch.nn.functional.scaled_dot_product_attention(
            *tensors, attn_mask=torch.tensor(allowed)
        )
    (out * torch.tensor(dy, dtype=torch.float64)).sum().backward()
    want = [out.detach().numpy()] + [t.grad.numpy() for t in tensors]
    for name, g, w in zip(("out", "dq", "dk", "dv"), got, want, strict=True):
        tol = ORACLE_TOLERANCES[np.dtype(dtype)]
        np.testing.assert_allclose(g, w, rtol=tol.rtol, atol=tol.atol, err_msg=name)


@pytest.mark.parametrize("recompute", [False, True], ids=["probabilities", "recompute"])
@pytest.mark.parametrize("kind", ["bool", "add"])
def test_an_empty_sequence_changes_nothing_for_the_others(kind, recompute, dtype) -> None:
    """A batch with an all-padding sequence gives the other sequences' outputs and gradients
    bit for bit as the batch without it does (the sequences are independent)."""
    rng = np.random.default_rng(22)
    q, k, v, dy = (rng.normal(size=(3, 2, 6, 4)).astype(dtype) for _ in range(4))
    keep = np.ones((3, 1, 1, 6), bool)
    keep[0, ..., 4:] = False  # partly padded
    keep[1] = False  # all padding
    keep[2, ..., 1:] = False  # one key left
    mask = keep if kind == "bool" else np.where(keep, 0.0, -np.inf).astype(dtype)
    full = _ours(q, k, v, dy, mask, False, recompute)
    rest = [0, 2]
    alone = _ours(q[rest], k[rest], v[rest], dy[rest], mask[rest], False, recompute)
    for name, g, w in zip(("out", "dq", "dk", "dv"), full, alone, strict=True):
        np.testing.assert_array_equal(g[rest], w, err_msg=name)
        np.testing.assert_array_equal(g[1], 0.0, err_msg=name)


@pytest.mark.parametrize("kind", ["bool", "add"])
def test_partly_masked_rows_are_computed_as_before(xp, kind, dtype) -> None:
    """Where no row is empty the op (keeping the probabilities) is, bit for bit, the products
    and the backend's softmax it always was: the check for empty rows changes no value."""
    rng = np.random.default_rng(23)
    q, k, v, dy = (rng.normal(size=(2, 3, 5, 4)).astype(dtype) for _ in range(4))
    keep = rng.uniform(size=(2, 1, 5, 5)) > 0.4
    keep[..., 0] = True
    mask = keep if kind == "bool" else np.where(keep, 0.0, -np.inf).astype(dtype)
    got = _ours(q, k, v, dy, mask, False, False)
    a = [xp.asarray(x) for x in (q, k, v, dy, mask)]
    s = xp.matmul(a[0], xp.matrix_transpose(a[1]))
    s *= 1.0 / math.sqrt(4)
    if kind == "bool":
        s = xp.where(a[4], s, -math.inf)
    else:
        s += a[4]
    p = xp.nn.softmax(s, axis=-1)
    ds = xp.nn.softmax_backward(xp.matmul(a[3], xp.matrix_transpose(a[2])), p, axis=-1)
    ds *= 1.0 / math.sqrt(4)
    want = [
        xp.matmul(p, a[2]),
        xp.matmul(ds, a[1]),
        xp.matmul(xp.matrix_transpose(ds), a[0]),
        xp.matmul(xp.matrix_transpose(p), a[3]),
    ]
    for name, g, w in zip(("out", "dq", "dk", "dv"), got, want, strict=True):
        np.testing.assert_array_equal(g, np.asarray(xp.to_numpy(w), np.float64), err_msg=name)
