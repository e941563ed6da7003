"""Sequential: composition, functions and activation names as items, nesting, seeds, params."""

from __future__ import annotations

import numpy as np
import pytest

import nnlayers
import nnlayers.expr as ex
from nnlayers.layers import Affine, BatchNorm, Conv2D, Flatten, Pool2D, Sequential


def test_sequential_gradients(gradcheck) -> None:
    net = Sequential([Affine(3, seed=0), "tanh", Affine(2, seed=1), lambda h: h * 2.0])
    gradcheck(net, np.random.default_rng(0).normal(size=(2, 4)))
    assert len(net.params) == 4


def test_a_small_convnet_as_one_sequential(gradcheck) -> None:
    net = Sequential(
        [Conv2D(2, 3, padding="same"), BatchNorm(), ex.relu, Pool2D(2), Flatten(), Affine(3)],
        seed=0,
    )
    gradcheck(net, np.random.default_rng(1).normal(size=(3, 1, 4, 4)))
    assert [p.name for p in net.buffers] == ["batch_norm/running_mean", "batch_norm/running_var"]


def test_sequential_seed_fixes_every_item_and_nesting_lists_params_once() -> None:
    def build():
        inner = Sequential([Affine(4), "relu"])
        net = Sequential([inner, inner, Affine(2)], seed=7)
        net(ex.placeholder((None, 4)))
        return net

    a, b = build(), build()
    assert len(a.params) == 4  # the inner stack is used twice, its parameters listed once
    for p, q in zip(a.params, b.params):
        np.testing.assert_array_equal(p.numpy(), q.numpy())
    assert len(a) == 3 and isinstance(a[2], Affine)
    assert "Affine(units=2" in repr(a)


def test_sequential_rejects_what_it_cannot_call() -> None:
    with pytest.raises(TypeError, match="layers or functions"):
        Sequential([3])
    with pytest.raises(ValueError, match="unknown activation"):
        Sequential(["relux"])


def test_sequential_output_trains_with_the_graph() -> None:
    net = Sequential([Affine(8, activation="relu"), Affine(1)], seed=0)
    x = ex.placeholder((None, 2), name="x")
    loss = ex.mean(ex.square(net(x)))
    graph = nnlayers.compile(loss)
    data = np.random.default_rng(0).normal(size=(16, 2))
    first = float(graph.xp.to_numpy(graph.forward({x: data})))
    for _ in range(20):
        graph.forward({x: data})
        graph.backward()
        for p in net.params:
            graph.xp.inplace.subtract(p.value, graph.xp.multiply(p.grad, 0.1), out=p.value)
    assert float(graph.xp.to_numpy(graph.forward({x: data}))) < 0.5 * first
