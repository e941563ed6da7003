"""BatchNorm: dense and spatial gradients, running statistics, eval phase, buffers."""

from __future__ import annotations

import numpy as np
import pytest

import nnlayers
import nnlayers.expr as ex
from nnlayers.layers import BatchNorm


@pytest.mark.parametrize("shape", [(5, 3), (3, 2, 3, 3)])
def test_batch_norm_gradients_in_the_train_phase(gradcheck, shape) -> None:
    x = np.random.default_rng(0).normal(1.0, 2.0, size=shape)
    gradcheck(BatchNorm(), x)


@pytest.mark.parametrize("shape", [(5, 3), (3, 2, 3, 3)])
def test_batch_norm_gradients_in_the_eval_phase(gradcheck, shape) -> None:
    x = np.random.default_rng(1).normal(size=shape)
    gradcheck(BatchNorm(), x, training=False)


def test_batch_norm_normalises_and_tracks_running_statistics() -> None:
    norm = BatchNorm(momentum=0.5)
    x = ex.placeholder((None, 2, 2, 2), "float64", name="x")
    graph = nnlayers.compile(norm(x), wrt=[], training=True)
    data = np.random.default_rng(2).normal(3.0, 2.0, size=(4, 2, 2, 2))
    out = graph.xp.to_numpy(graph.forward({x: data}))
    np.testing.assert_allclose(out.mean(axis=(0, 2, 3)), 0.0, atol=1e-12)
    np.testing.assert_allclose(out.var(axis=(0, 2, 3)), 1.0, rtol=1e-4)
    np.testing.assert_allclose(norm.running_mean.numpy(), 0.5 * data.mean(axis=(0, 2, 3)))
    assert [p.name for p in norm.params] == ["batch_norm/gamma", "batch_norm/beta"]
    assert [p.name for p in norm.buffers] == ["batch_norm/running_mean", "batch_norm/running_var"]
    graph.eval()
    before = norm.running_mean.numpy()
    graph.forward({x: data})
    np.testing.assert_array_equal(norm.running_mean.numpy(), before)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_an_empty_batch_leaves_the_running_statistics_alone(dtype) -> None:
    """A batch of 0 examples (the last, short batch of a split, say) gives an empty output and
    no statistics: the running mean and variance stay as they were, not NaN or pulled to 0."""
    norm = BatchNorm(momentum=0.5)
    x = ex.placeholder((None, 3, 2, 2), dtype, name="x")
    graph = nnlayers.compile(norm(x), wrt=[], training=True)
    graph.forward({x: np.random.default_rng(3).normal(2.0, 1.5, size=(4, 3, 2, 2)).astype(dtype)})
    mean, var = norm.running_mean.numpy(), norm.running_var.numpy()
    with np.errstate(invalid="ignore", divide="ignore"):  # the reference's mean of nothing
        out = graph.xp.to_numpy(graph.forward({x: np.zeros((0, 3, 2, 2), dtype)}))
    assert out.shape == (0, 3, 2, 2)
    np.testing.assert_array_equal(norm.running_mean.numpy(), mean)
    np.testing.assert_array_equal(norm.running_var.numpy(), var)


def test_batch_norm_needs_known_channels() -> None:
    with pytest.raises(ValueError, match=r"needs \(N, C\) or \(N, C, H, W\) inputs"):
        BatchNorm()(ex.placeholder((None, 2, 3)))
    with pytest.raises(ValueError, match="momentum"):
        BatchNorm(momentum=2.0)
