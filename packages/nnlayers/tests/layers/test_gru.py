"""GRU: gradients through time and the (reset-after) gate equations."""

from __future__ import annotations

import numpy as np

import nnlayers
import nnlayers.expr as ex
from nnlayers.layers import GRU


def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def test_gru_gradients_through_time(gradcheck) -> None:
    x = np.random.default_rng(0).normal(size=(2, 3, 2))
    gru = GRU(2, return_sequences=True, seed=0, bias_init="normal")
    gradcheck(gru, x)
    assert [p.name for p in gru.params] == [
        "gru/weight", "gru/recurrent_weight", "gru/bias", "gru/recurrent_bias",
    ]  # fmt: skip


def test_gru_matches_the_gate_equations() -> None:
    gru = GRU(3, return_sequences=True, seed=0, bias_init="normal")
    x = ex.placeholder((None, 4, 2), "float64", name="x")
    graph = nnlayers.compile(gru(x), wrt=[])
    data = np.random.default_rng(1).normal(size=(2, 4, 2))
    seq = graph.xp.to_numpy(graph.forward({x: data}))
    w, u, b, bh = (p.numpy() for p in gru.params)
    h = np.zeros((2, 3))
    for t in range(4):
        xs, hs = data[:, t] @ w + b, h @ u + bh
        r = _sigmoid(xs[:, :3] + hs[:, :3])
        z = _sigmoid(xs[:, 3:6] + hs[:, 3:6])
        n = np.tanh(xs[:, 6:] + r * hs[:, 6:])
        h = (1 - z) * n + z * h
        np.testing.assert_allclose(seq[:, t], h, rtol=1e-12)
