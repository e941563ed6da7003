"""``layer(array)`` computes, as Keras's ``layer(x)`` and PyTorch's ``module(x)`` do, instead of
quietly returning an expression: the output of the eval phase as a backend array, equal to the
compiled graph's; a NumPy float64 array does not build float64 weights."""

from __future__ import annotations

import numpy as np

import nnlayers
import nnlayers.expr as ex
from nnlayers.layers import LSTM, Affine, Dropout, Sequential


def test_a_layer_called_on_an_array_returns_its_output(xp, tol) -> None:
    net = Sequential([Affine(4, activation="relu"), Dropout(0.5), Affine(2)], seed=0)
    x = np.random.default_rng(0).normal(size=(3, 5))  # float64, NumPy's default
    y = net(x)
    assert not isinstance(y, ex.Expr)
    assert tuple(y.shape) == (3, 2)
    assert all(p.dtype == np.float32 for p in net.params)
    source = ex.placeholder((None, 5), name="x")
    graph = nnlayers.compile(net(source), training=False)
    want = np.asarray(xp.to_numpy(graph.forward({source: x.astype(np.float32)})))
    np.testing.assert_allclose(np.asarray(xp.to_numpy(y)), want, rtol=1e-6)
    again = net(x)  # the eval phase: dropout is off, the same numbers
    np.testing.assert_array_equal(np.asarray(xp.to_numpy(again)), np.asarray(xp.to_numpy(y)))


def test_a_recurrent_layer_on_an_array(xp) -> None:
    out = LSTM(3, seed=0)(np.ones((2, 4, 5), np.float32))
    assert tuple(out.shape) == (2, 3)
