"""Spirals: shapes, determinism and geometry."""

from __future__ import annotations

import numpy as np
import pytest

from nnlayers.datasets import spirals


def test_shapes_dtypes_and_labels():
    x, y = spirals(n_per_class=40, classes=4, noise=0.1, seed=3)
    assert x.shape == (160, 2) and x.dtype == np.float32
    assert y.dtype == np.int64 and np.bincount(y).tolist() == [40] * 4


def test_same_seed_same_points_other_seed_other_points():
    a, b, c = spirals(seed=1), spirals(seed=1), spirals(seed=2)
    np.testing.assert_array_equal(a.inputs, b.inputs)
    assert not np.allclose(a.inputs, c.inputs)
    np.testing.assert_array_equal(a.targets, c.targets)


def test_without_noise_points_lie_on_the_arms():
    x, y = spirals(n_per_class=50, classes=3, noise=0.0)
    radius = np.hypot(x[:, 0], x[:, 1])
    np.testing.assert_allclose(radius, np.tile(np.linspace(0, 1, 50), 3), atol=1e-6)
    angle = np.arctan2(x[y == 1, 0], x[y == 1, 1])
    expected = np.linspace(4.0, 8.0, 50)
    np.testing.assert_allclose(np.cos(angle[1:]), np.cos(expected[1:]), atol=1e-5)
    assert np.abs(x).max() <= 1.0


@pytest.mark.parametrize(
    "kwargs", [{"n_per_class": 0}, {"classes": 0}, {"noise": -0.1}, {"n_per_class": 2.5}]
)
def test_bad_arguments(kwargs):
    with pytest.raises(ValueError, match="spirals"):
        spirals(**kwargs)
