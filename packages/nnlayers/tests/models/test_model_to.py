"""``model.to(backend)``, PyTorch's ``module.to(device)``: parameters, buffers and optimiser
state move, the graphs compile again there; predictions and the next training steps are what
they would have been on the old backend; a graph elsewhere still using the parameters raises
BackendMismatchError naming the parameter."""

from __future__ import annotations

import numpy as np
import pytest

import arraycore
import nnlayers
import nnlayers.expr as ex
from nnlayers.layers import Affine, BatchNorm, Sequential
from nnlayers.models import Classifier
from nnlayers.optim import Adam


def build() -> Classifier:
    net = Sequential([Affine(8), "relu", BatchNorm(), Affine(3)], seed=0)
    return Classifier(net, (4,), optimizer=Adam(0.05))


RNG = np.random.default_rng(0)
X = RNG.normal(size=(32, 4)).astype(np.float32)
Y = RNG.integers(0, 3, 32)


def test_a_trained_model_moves_and_trains_on_as_it_would_have(xp, other_xp) -> None:
    other = other_xp
    stay, move = build(), build()
    for model in (stay, move):
        nnlayers.fit(model, nnlayers.Feed(X, Y, batch_size=8), epochs=2, progress=False)
    assert move.to(other.name) is move
    assert move.xp is other and move.graph.xp is other
    for p in move._everything:
        assert arraycore.namespace_of(p.value) is other, p.name
    np.testing.assert_allclose(move.predict(X), stay.predict(X), rtol=1e-5, atol=1e-6)
    for _ in range(3):  # Adam's moments and step counts came along: the same updates
        stay.train_step((X, Y))
        move.train_step((X, Y))
    assert move.optimizer.step_count == stay.optimizer.step_count
    for a, b in zip(move._everything, stay._everything, strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-5, err_msg=a.name)
    assert move.evaluate(X, Y)["loss"] == pytest.approx(stay.evaluate(X, Y)["loss"], rel=1e-4)
    move.to(xp)  # and back
    np.testing.assert_allclose(move.predict(X), stay.predict(X), rtol=1e-4, atol=1e-5)


def test_a_graph_left_on_the_old_backend_names_the_parameter(xp, other_xp) -> None:
    other = other_xp
    model = build()
    model.train_step((X, Y))
    weight = model.params[0]
    old = nnlayers.compile(ex.sum(weight * 2.0))
    old.forward()
    model.to(other)
    with pytest.raises(arraycore.BackendMismatchError, match=repr(weight.name)):
        old.forward()
    with pytest.raises(TypeError, match="backend name"):
        model.to(42)
