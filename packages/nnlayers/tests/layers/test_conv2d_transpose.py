"""Conv2DTranspose: gradients, upsampling shapes, the adjoint of Conv2D."""

from __future__ import annotations

import numpy as np
import pytest

import nnlayers
import nnlayers.expr as ex
from nnlayers.layers import Conv2D, Conv2DTranspose


@pytest.mark.parametrize(
    "options",
    [{}, {"stride": 2, "padding": "same"}, {"stride": 2, "output_padding": 1, "use_bias": False}],
)
def test_conv2d_transpose_gradients(gradcheck, options) -> None:
    x = np.random.default_rng(0).normal(size=(2, 2, 3, 3))
    gradcheck(Conv2DTranspose(2, 3, seed=0, **options), x)


def test_stride_two_same_padding_doubles_the_size() -> None:
    up = Conv2DTranspose(4, 4, stride=2, padding="same", seed=0)
    assert up(ex.placeholder((None, 8, 7, 7))).shape == (None, 4, 14, 14)
    assert up.weight.shape == (8, 4, 4, 4)


def test_it_is_the_adjoint_of_a_convolution_with_the_same_weight() -> None:
    rng = np.random.default_rng(2)
    down = Conv2D(3, 3, stride=2, use_bias=False, seed=0)
    x = ex.placeholder((1, 2, 7, 7), "float64", name="x")
    y = down(x)
    up = Conv2DTranspose(2, 3, stride=2, use_bias=False)
    z = ex.placeholder((1, 3, 3, 3), "float64", name="z")
    up(z)
    up.weight.assign(down.weight.numpy())
    a, b = rng.normal(size=(1, 2, 7, 7)), rng.normal(size=(1, 3, 3, 3))
    fwd = nnlayers.compile(y, wrt=[]).forward({x: a})
    adj = nnlayers.compile(up(z), wrt=[]).forward({z: b})
    xp = nnlayers.compile(y, wrt=[]).xp
    lhs = float(np.sum(xp.to_numpy(fwd) * b))
    rhs = float(np.sum(a * xp.to_numpy(adj)))
    assert lhs == pytest.approx(rhs, rel=1e-10)
