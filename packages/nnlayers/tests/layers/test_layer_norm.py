"""LayerNorm: gradients and per-example normalisation."""

from __future__ import annotations

import numpy as np

import nnlayers
import nnlayers.expr as ex
from nnlayers.layers import LayerNorm


def test_layer_norm_gradients(gradcheck) -> None:
    x = np.random.default_rng(0).normal(size=(3, 2, 4))
    gradcheck(LayerNorm(), x)


def test_layer_norm_normalises_each_example() -> None:
    norm = LayerNorm()
    x = ex.placeholder((None, 6), "float64", name="x")
    graph = nnlayers.compile(norm(x), wrt=[])
    out = graph.xp.to_numpy(graph.forward({x: np.random.default_rng(1).normal(5, 3, (4, 6))}))
    np.testing.assert_allclose(out.mean(axis=1), 0.0, atol=1e-12)
    np.testing.assert_allclose(out.var(axis=1), 1.0, rtol=1e-4)
    assert [p.shape for p in norm.params] == [(6,), (6,)]
