"""Batch norm: running statistics updated in the train phase only, used in eval."""

from __future__ import annotations

import numpy as np
import pytest

import nnlayers
import nnlayers.expr as ex
from nnlayers import Parameter


def test_batch_norm_updates_running_statistics_in_train_only() -> None:
    x = ex.placeholder((None, 2), name="x")
    gamma = Parameter(np.ones(2), name="gamma")
    beta = Parameter(np.zeros(2), name="beta")
    mean = Parameter(np.zeros(2), name="mean", trainable=False)
    var = Parameter(np.ones(2), name="var", trainable=False)
    y = ex.batch_norm(x, gamma, beta, mean, var, momentum=0.5)
    graph = nnlayers.compile(ex.sum(y * y))
    data = np.array([[1.0, 10.0], [3.0, 14.0]])
    out = graph.xp.to_numpy(graph.forward({x: data}))
    graph.backward()
    assert out == pytest.approx(4.0, abs=1e-3)  # normalised: each column is (-1, 1)
    np.testing.assert_allclose(graph.xp.to_numpy(mean.value), [1.0, 6.0])
    # the batch variance comes back from the kernel's inv_std = 1/sqrt(var + eps): float32
    # rounding of a few ulp, as with cuDNN's saved inverse variance
    unbiased = [0.5 + 0.5 * 2.0, 0.5 + 0.5 * 8.0]
    np.testing.assert_allclose(graph.xp.to_numpy(var.value), unbiased, rtol=1e-6)
    assert mean.grad is None and var.grad is None
    graph.eval()
    before = graph.xp.to_numpy(mean.value).copy()
    out = graph.xp.to_numpy(graph.forward({x: data}))
    np.testing.assert_array_equal(graph.xp.to_numpy(mean.value), before)
    expected = ((data - [1.0, 6.0]) / np.sqrt(np.array([1.5, 4.5]) + 1e-5)) ** 2
    assert out == pytest.approx(expected.sum(), rel=1e-5)


def test_batch_norm_needs_non_trainable_parameters() -> None:
    x = ex.placeholder((None, 2))
    with pytest.raises(TypeError, match="running_mean must be a Parameter"):
        ex.batch_norm(x, np.ones(2), np.zeros(2), np.zeros(2), np.ones(2))
