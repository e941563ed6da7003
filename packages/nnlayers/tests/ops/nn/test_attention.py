"""scaled_dot_product_attention: the composed expression's values and gradients, clear errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

import nnlayers
import nnlayers.expr as ex


def _grads(build, arrays):
    phs = [ex.placeholder(a.shape, "float64", name=f"in{i}") for i, a in enumerate(arrays)]
    out = build(*phs)
    weights = np.random.default_rng(3).uniform(0.5, 1.5, out.shape)
    graph = nnlayers.compile([ex.sum(out * ex.constant(weights, dtype="float64")), out], wrt=phs)
    value = graph.xp.to_numpy(graph.forward(dict(zip(phs, arrays, strict=True)))[1])
    grads = graph.backward()
    return [value] + [graph.xp.to_numpy(grads[p]) for p in phs]


def test_one_op_equals_the_composed_expression() -> None:
    rng = np.random.default_rng(0)
    q, k, v = (rng.normal(size=(2, 4, 8, 16)) for _ in range(3))

    def composed(q, k, v):
        s = (q @ ex.permute_dims(k, (0, 1, 3, 2))) * (1.0 / math.sqrt(16))
        return ex.softmax(s, axis=-1) @ v

    fused = _grads(ex.scaled_dot_product_attention, [q, k, v])
    plain = _grads(composed, [q, k, v])
    for got, want in zip(fused, plain, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_a_fully_masked_row_is_zero_like_pytorch() -> None:
    q = ex.placeholder((1, 2, 4), "float64", name="q")
    kv = ex.placeholder((1, 3, 4), "float64", name="kv")
    mask = np.array([[True, True, True], [False, False, False]])
    graph = nnlayers.compile(ex.scaled_dot_product_attention(q, kv, kv, ex.constant(mask)), wrt=[])
    out = graph.xp.to_numpy(graph.forward({q: np.ones((1, 2, 4)), kv: np.ones((1, 3, 4))}))
    np.testing.assert_array_equal(out[0, 0], np.ones(4))
    np.testing.assert_array_equal(out[0, 1], np.zeros(4))


@pytest.mark.parametrize(
    ("shapes", "match"),
    [
        ([(2, 4, 8), (2, 4, 9), (2, 4, 8)], "do not align"),
        ([(2, 4, 8), (3, 4, 8), (3, 4, 8)], "leading"),
        ([(4, 8), (4, 8), (4, 8, 1)], "same number of axes"),
    ],
)
def test_shapes_that_do_not_fit_are_named(shapes, match) -> None:
    q, k, v = (ex.placeholder(s, name=n) for s, n in zip(shapes, "qkv", strict=True))
    with pytest.raises(ValueError, match=f"scaled_dot_product_attention: .*{match}"):
        _ = ex.scaled_dot_product_attention(q, k, v).shape


def test_bad_masks_are_named() -> None:
    q = ex.placeholder((None, 2, 5, 4), name="q")
    with pytest.raises(ValueError, match=r"mask \(3, 5\) does not broadcast"):
        _ = ex.scaled_dot_product_attention(q, q, q, ex.placeholder((3, 5), "bool")).shape
    with pytest.raises(ValueError, match=r"mask must be boolean or of q.s dtype float32"):
        _ = ex.scaled_dot_product_attention(q, q, q, ex.placeholder((5, 5), "int64")).shape


@pytest.mark.parametrize("options", [{}, {"causal": True}, {"mask": "bool"}, {"mask": "add"}])
def test_the_memory_saving_backward_equals_keeping_the_probabilities(options) -> None:
    rng = np.random.default_rng(4)
    q, k, v = (rng.normal(size=(2, 3, 5, 4)) for _ in range(3))
    kind = options.get("mask")
    mask = None
    if kind == "bool":
        mask = rng.uniform(size=(5, 5)) > 0.3
        mask[:, 0] = True
    elif kind == "add":
        mask = rng.normal(size=(1, 3, 5, 5))
    causal = options.get("causal", False)

    def build(recompute):
        return lambda q, k, v: ex.scaled_dot_product_attention(
            q, k, v, mask, causal=causal, recompute=recompute
        )

    kept = _grads(build(False), [q, k, v])
    recomputed = _grads(build(True), [q, k, v])
    for got, want in zip(recomputed, kept, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_the_memory_saving_backward_with_dropout_keeps_the_mask() -> None:
    rng = np.random.default_rng(5)
    arrays = [rng.normal(size=(2, 6, 4)) for _ in range(3)]
    phs = [ex.placeholder(a.shape, "float64", name=f"in{i}") for i, a in enumerate(arrays)]
    results = []
    for recompute in (False, True):
        out = ex.scaled_dot_product_attention(*phs, dropout=0.5, recompute=recompute)
        graph = nnlayers.compile([ex.sum(out * out), out], wrt=phs, seed=3)
        value = graph.xp.to_numpy(graph.forward(dict(zip(phs, arrays, strict=True)))[1])
        grads = graph.backward()
        results.append([value] + [graph.xp.to_numpy(grads[p]) for p in phs])
    for got, want in zip(results[1], results[0], strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
