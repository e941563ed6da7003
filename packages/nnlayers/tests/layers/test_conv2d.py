"""Conv2D: gradients, geometry, inferred channels, errors."""

from __future__ import annotations

import numpy as np
import pytest

import nnlayers
import nnlayers.expr as ex
from nnlayers.errors import FeedError
from nnlayers.layers import Affine, Conv2D, Conv2DTranspose, Flatten, Sequential
from nnlayers.models import Classifier
from nnlayers.optim import SGD


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


@pytest.mark.parametrize("layer", [Conv2D(4, 3), Conv2DTranspose(4, 3)])
def test_channels_last_input_is_a_clear_error(layer) -> None:
    """Keras's layout given to a channels-first layer: the error names the axis that looks like
    the channels and the transpose; channels-first input of the same sizes is fine."""
    with pytest.raises(
        ValueError, match=r"looks channels-last \(N, H, W, C\): axis 3 \(of size 3\)"
    ):
        layer(ex.placeholder((None, 32, 32, 3), name="x"))
    assert layer(ex.placeholder((None, 3, 32, 32), name="y")).shape[1] == 4


def test_a_channels_last_feed_names_the_transpose() -> None:
    net = Sequential([Conv2D(4, 3, padding="same"), Flatten(), Affine(2)], seed=0)
    model = Classifier(net, (3, 8, 8), optimizer=SGD(0.1))
    with pytest.raises(FeedError, match=r"looks channels-last .* x\.transpose\(0, 3, 1, 2\)"):
        model.train_step((np.zeros((2, 8, 8, 3), "float32"), np.zeros(2, "int64")))
