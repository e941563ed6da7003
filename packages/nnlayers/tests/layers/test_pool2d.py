"""Pool2D: max and average pooling, gradients and shapes."""

from __future__ import annotations

import numpy as np
import pytest

import nnlayers
import nnlayers.expr as ex
from nnlayers.layers import AvgPool2D, MaxPool2D, Pool2D


@pytest.mark.parametrize("mode", ["max", "avg"])
def test_pool2d_gradients(gradcheck, mode) -> None:
    x = np.random.default_rng(0).permutation(2 * 2 * 4 * 4).reshape(2, 2, 4, 4) / 7.0
    gradcheck(Pool2D(2, mode=mode), x)


def test_pool2d_values_and_shortcuts() -> None:
    x = ex.placeholder((1, 1, 4, 4), "float64", name="x")
    data = np.arange(16.0).reshape(1, 1, 4, 4)
    xp = nnlayers.compile(x * 1.0, wrt=[]).xp
    biggest = xp.to_numpy(nnlayers.compile(MaxPool2D(2)(x), wrt=[]).forward({x: data}))
    average = xp.to_numpy(nnlayers.compile(AvgPool2D(2)(x), wrt=[]).forward({x: data}))
    np.testing.assert_array_equal(biggest[0, 0], [[5, 7], [13, 15]])
    np.testing.assert_array_equal(average[0, 0], [[2.5, 4.5], [10.5, 12.5]])
    assert Pool2D(3, stride=1, padding=1)(x).shape == (1, 1, 4, 4)
    assert MaxPool2D(2).params == []


def test_pool2d_errors() -> None:
    with pytest.raises(ValueError, match="mode must be 'max' or 'avg'"):
        Pool2D(2, mode="min")
    with pytest.raises(ValueError, match="NCHW"):
        Pool2D(2)(ex.placeholder((None, 4)))
