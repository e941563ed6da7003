"""Dropout: train/eval phases switch without rebuilding; the seeded generator moves on."""

from __future__ import annotations

import numpy as np

import nnlayers
import nnlayers.expr as ex


def test_phase_switch_changes_dropout_without_rebuilding() -> None:
    x = ex.placeholder((None, 1000), name="x")
    graph = nnlayers.compile(ex.dropout(x, 0.5), wrt=[], seed=3)
    ones = np.ones((2, 1000))
    train = graph.xp.to_numpy(graph.forward({x: ones}))
    assert set(np.unique(train)) == {0.0, 2.0}
    assert 0.4 < (train == 0).mean() < 0.6
    plans = len(graph._plans)
    graph.eval()
    np.testing.assert_array_equal(graph.xp.to_numpy(graph.forward({x: ones})), ones)
    graph.train()
    again = graph.xp.to_numpy(graph.forward({x: ones}))
    assert not np.array_equal(again, train)  # the generator moves on
    assert len(graph._plans) == plans
