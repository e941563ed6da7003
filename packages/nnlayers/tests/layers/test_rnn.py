"""RNN: gradients through time, the recurrence itself, states in and out."""

from __future__ import annotations

import numpy as np
import pytest

import nnlayers
import nnlayers.expr as ex
from nnlayers.layers import RNN


def test_rnn_gradients_through_time(gradcheck) -> None:
    x = np.random.default_rng(0).normal(size=(2, 3, 2))
    gradcheck(RNN(3, return_sequences=True, seed=0), x)


def test_rnn_matches_the_recurrence() -> None:
    rnn = RNN(3, return_sequences=True, seed=0)
    x = ex.placeholder((None, 4, 2), "float64", name="x")
    graph = nnlayers.compile([rnn(x), rnn.state], wrt=[])
    data = np.random.default_rng(1).normal(size=(2, 4, 2))
    seq, last = (graph.xp.to_numpy(v) for v in graph.forward({x: data}))
    w, u, b = (p.numpy() for p in rnn.params)
    h = np.zeros((2, 3))
    for t in range(4):
        h = np.tanh(data[:, t] @ w + h @ u + b)
        np.testing.assert_allclose(seq[:, t], h, rtol=1e-12)
    np.testing.assert_allclose(last, h, rtol=1e-12)


def test_rnn_initial_state_and_return_state(gradcheck) -> None:
    rnn = RNN(3, return_state=True, seed=0)
    x = ex.placeholder((None, 2, 2), name="x")
    h0 = ex.placeholder((None, 3), name="h0")
    out, state = rnn(x, initial_state=h0)
    assert out is state and out.shape == (None, 3)
    with pytest.raises(ValueError, match=r"initial_state must have shape \(N, 3\)"):
        rnn(x, initial_state=ex.placeholder((None, 4)))


def test_rnn_needs_sequences_of_any_length() -> None:
    with pytest.raises(ValueError, match=r"needs \(N, T, features\) inputs"):
        RNN(3)(ex.placeholder((None, 4)))
    assert RNN(3)(ex.placeholder((None, None, 4))).shape == (None, 3)  # one op: any length
    with pytest.raises(ValueError, match="time axis"):
        RNN(3, fused=False)(ex.placeholder((None, None, 4)))  # the unrolled loop needs it
