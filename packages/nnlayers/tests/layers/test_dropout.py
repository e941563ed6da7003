"""Dropout: gradients with a fixed mask, dense and spatial masks, identity in eval."""

from __future__ import annotations

import numpy as np
import pytest

import nnlayers
import nnlayers.expr as ex
from nnlayers.layers import Dropout, SpatialDropout


def test_dropout_gradients_with_a_fixed_mask(gradcheck) -> None:
    x = np.random.default_rng(0).normal(size=(4, 5))
    gradcheck(Dropout(0.4), x, reseed=True)


def test_spatial_dropout_gradients_with_a_fixed_mask(gradcheck) -> None:
    x = np.random.default_rng(0).normal(size=(2, 3, 2, 2))
    gradcheck(SpatialDropout(0.5), x, reseed=True)


def test_spatial_dropout_drops_whole_channels_and_eval_is_identity() -> None:
    x = ex.placeholder((8, 6, 3, 3), name="x")
    graph = nnlayers.compile(Dropout(0.5, spatial=True)(x), wrt=[], seed=1)
    out = graph.xp.to_numpy(graph.forward({x: np.ones((8, 6, 3, 3))}))
    per_channel = out.reshape(8, 6, 9)
    assert set(np.unique(per_channel)) <= {0.0, 2.0}
    assert np.all(per_channel.min(axis=2) == per_channel.max(axis=2))
    assert 0 < (per_channel[:, :, 0] == 0).sum() < 48
    graph.eval()
    np.testing.assert_array_equal(graph.xp.to_numpy(graph.forward({x: np.ones((8, 6, 3, 3))})), 1)


def test_dropout_errors() -> None:
    with pytest.raises(ValueError, match=r"rate must lie in \[0, 1\)"):
        Dropout(1.0)
    with pytest.raises(ValueError, match="NCHW"):
        Dropout(0.5, spatial=True)(ex.placeholder((None, 4)))
