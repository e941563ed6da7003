"""Conv2D: gradients, geometry, inferred channels, errors."""

from __future__ import annotations

import numpy as np
import pytest

import nnlayers
import nnlayers.expr as ex
from nnlayers.layers import Conv2D


@pytest.mark.parametrize(
    "options",
    [
        {"padding": "same"},
        {"stride": 2, "padding": 1, "activation": "tanh"},
        {"dilation": 2, "use_bias": False},
    ],
)
def test_conv2d_gradients(gradcheck, options) -> None:
    x = np.random.default_rng(0).normal(size=(2, 2, 5, 5))
    gradcheck(Conv2D(3, 3, seed=0, **options), x)


def test_conv2d_matches_a_direct_sum() -> None:
    rng = np.random.default_rng(1)
    layer = Conv2D(2, (2, 3), seed=0)
    x = ex.placeholder((None, 3, 4, 5), "float64", name="x")
    graph = nnlayers.compile(layer(x), wrt=[])
    data = rng.normal(size=(2, 3, 4, 5))
    out = graph.xp.to_numpy(graph.forward({x: data}))
    w, b = layer.weight.numpy(), layer.bias.numpy()
    want = np.zeros((2, 2, 3, 3))
    for i in range(3):
        for j in range(3):
            want[:, :, i, j] = np.einsum("nchw,ochw->no", data[:, :, i : i + 2, j : j + 3], w)
    np.testing.assert_allclose(out, want + b.reshape(1, -1, 1, 1), rtol=1e-10)
    assert layer.weight.shape == (2, 3, 2, 3) and layer.weight.dtype.name == "float64"


def test_conv2d_needs_images_with_known_channels() -> None:
    with pytest.raises(ValueError, match="Conv2D 'conv2d': needs NCHW image inputs"):
        Conv2D(4, 3)(ex.placeholder((None, 8)))
    with pytest.raises(ValueError, match="channel axis"):
        Conv2D(4, 3)(ex.placeholder((None, None, 8, 8)))
    with pytest.raises(ValueError, match="kernel_size"):
        Conv2D(4, 0)
