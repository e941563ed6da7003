"""LSTM: gradients through time and through the cell state, the gate equations, states."""

from __future__ import annotations

import numpy as np
import pytest

import nnlayers
import nnlayers.expr as ex
from nnlayers.layers import LSTM


def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def test_lstm_gradients_through_time(gradcheck) -> None:
    x = np.random.default_rng(0).normal(size=(2, 3, 2))
    gradcheck(LSTM(2, return_sequences=True, seed=0), x)


def test_lstm_matches_the_gate_equations_and_keeps_both_states() -> None:
    lstm = LSTM(3, seed=0)
    x = ex.placeholder((None, 3, 2), "float64", name="x")
    h0 = ex.placeholder((None, 3), "float64", name="h0")
    c0 = ex.placeholder((None, 3), "float64", name="c0")
    last = lstm(x, initial_state=(h0, c0))
    h_final, c_final = lstm.state
    graph = nnlayers.compile([last, h_final, c_final], wrt=[])
    rng = np.random.default_rng(1)
    data, h, c = rng.normal(size=(2, 3, 2)), rng.normal(size=(2, 3)), rng.normal(size=(2, 3))
    got = [graph.xp.to_numpy(v) for v in graph.forward({x: data, h0: h, c0: c})]
    w, u, b = (p.numpy() for p in lstm.params)
    np.testing.assert_array_equal(b[3:6], 1.0)  # unit forget bias
    for t in range(3):
        z = data[:, t] @ w + h @ u + b
        i, f, g, o = _sigmoid(z[:, :3]), _sigmoid(z[:, 3:6]), np.tanh(z[:, 6:9]), _sigmoid(z[:, 9:])
        c = f * c + i * g
        h = o * np.tanh(c)
    for value, want in zip(got, [h, h, c]):
        np.testing.assert_allclose(value, want, rtol=1e-12)


def test_lstm_initial_state_is_a_pair() -> None:
    with pytest.raises(ValueError, match="initial_state c"):
        LSTM(3)(
            ex.placeholder((None, 2, 2)),
            initial_state=(ex.placeholder((None, 3)), ex.placeholder((None, 2))),
        )
