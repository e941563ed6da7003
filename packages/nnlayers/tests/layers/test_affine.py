"""Affine/Linear: forward, gradients, lazily inferred input width, tied weights, errors."""

from __future__ import annotations

import numpy as np
import pytest

import nnlayers
import nnlayers.expr as ex
from nnlayers.layers import Affine, Linear


def test_affine_gradients(gradcheck) -> None:
    x = np.random.default_rng(0).normal(size=(3, 4))
    gradcheck(Affine(5, activation="tanh", seed=1), x)


def test_affine_over_the_last_axis_of_a_sequence(gradcheck) -> None:
    x = np.random.default_rng(1).normal(size=(2, 3, 4))
    layer = Affine(2, seed=0)
    graph = gradcheck(layer, x)
    assert graph.outputs[0].inputs[0].shape == (2, 3, 2)


def test_affine_computes_x_at_weight_plus_bias() -> None:
    layer = Affine(3, init="ones", bias_init=0.5)
    x = ex.placeholder((None, 2), name="x")
    graph = nnlayers.compile(layer(x), wrt=[])
    out = graph.xp.to_numpy(graph.forward({x: np.array([[1.0, 2.0]])}))
    np.testing.assert_allclose(out, [[3.5, 3.5, 3.5]])
    assert layer.weight.shape == (2, 3) and layer.bias.shape == (3,)
    assert layer.weight.name == "affine/weight" and layer.bias.weight_decay == 0.0


def test_linear_is_affine_and_the_input_width_is_inferred_once() -> None:
    assert Linear is Affine
    layer = Affine(4)
    with pytest.raises(AttributeError, match="first applied"):
        _ = layer.weight
    layer(ex.placeholder((None, 7)))
    assert layer.weight.shape == (7, 4)
    with pytest.raises(nnlayers.ShapeError, match="matmul"):
        _ = layer(ex.placeholder((None, 6))).shape  # a reused layer keeps its weights


def test_applying_a_layer_twice_shares_its_weights() -> None:
    layer = Affine(2, seed=0)
    a, b = ex.placeholder((None, 3), name="a"), ex.placeholder((None, 3), name="b")
    loss = ex.sum(layer(a)) + ex.sum(layer(b))
    graph = nnlayers.compile(loss)
    assert graph.wrt == [layer.weight, layer.bias]
    graph.forward({a: np.ones((1, 3)), b: 2 * np.ones((1, 3))})
    graph.backward()
    np.testing.assert_allclose(graph.xp.to_numpy(layer.weight.grad), np.full((3, 2), 3.0))


def test_tied_weight_from_a_function_of_another_layer() -> None:
    encode = Affine(2, use_bias=False, seed=0)
    decode = Affine(3, use_bias=False, weight=lambda: encode.weight.T)
    x = ex.placeholder((None, 3), name="x")
    y = decode(encode(x))
    assert decode.params == [] and encode.params == [encode.weight]
    graph = nnlayers.compile(ex.sum(y * y))
    assert graph.wrt == [encode.weight]


def test_seeds_make_initial_weights_reproducible() -> None:
    def weight(seed=None):
        layer = Affine(3, seed=seed)
        layer(ex.placeholder((None, 4)))
        return layer.weight.numpy()

    np.testing.assert_array_equal(weight(5), weight(5))
    nnlayers.seed(3)
    first = weight()
    nnlayers.seed(3)
    np.testing.assert_array_equal(first, weight())
    assert not np.array_equal(weight(), weight())


def test_affine_errors_name_the_layer() -> None:
    with pytest.raises(ValueError, match="units must be positive"):
        Affine(0)
    with pytest.raises(ValueError, match="Affine 'head': needs the last axis"):
        Affine(2, name="head")(ex.placeholder((None, None)))
    with pytest.raises(ValueError, match="unknown activation 'rleu'"):
        Affine(2, activation="rleu")
