"""The custom-loop API, in PyTorch's terms: ``model(x)`` predicts; ``loss_and_gradients``
gives the loss and the gradients from one call; ``backward(accumulate=True, scale=1/k)`` sums
micro-batches (PyTorch's default), ``zero_grad`` starts over; four micro-batches of 8 give the
gradients, and after ``optimizer.step()`` the weights, of one batch of 32."""

from __future__ import annotations

import numpy as np
import pytest

import nnlayers.expr as ex
from nnlayers.layers import Affine, Sequential
from nnlayers.models import Classifier
from nnlayers.optim import SGD

RNG = np.random.default_rng(0)
X = RNG.normal(size=(32, 5)).astype(np.float32)
Y = RNG.integers(0, 3, 32)


def classifier() -> Classifier:
    network = Sequential([Affine(8, activation="tanh"), Affine(3)], seed=0)
    return Classifier(network, (5,), optimizer=SGD(0.5))


def host(model, grads) -> dict[str, np.ndarray]:
    return {p.name: np.asarray(model.xp.to_numpy(g)) for p, g in grads.items()}


def test_a_model_is_callable_on_arrays_as_predict(xp) -> None:
    model = classifier()
    np.testing.assert_array_equal(model(X), model.predict(X))
    np.testing.assert_array_equal(model(X.tolist(), batch_size=5), model.predict(X))
    with pytest.raises(TypeError, match="called on arrays"):
        model(ex.placeholder((None, 5)))


def test_loss_and_gradients_from_one_call(xp, tol) -> None:
    model = classifier()
    values, grads = model.loss_and_gradients(X, Y)
    loss = float(xp.to_numpy(values[0]))
    assert loss == pytest.approx(model.evaluate(X, Y, batch_size=32)["loss"], rel=1e-5)
    assert set(grads) == set(model.params)
    for p, g in grads.items():
        assert p.grad is g


def test_four_micro_batches_accumulated_are_one_batch(xp) -> None:
    whole = classifier()
    want = host(whole, whole.gradients(X, Y))
    model = classifier()
    model.zero_grad()
    for k in range(4):
        model.forward(X[k * 8 : (k + 1) * 8], Y[k * 8 : (k + 1) * 8])
        grads = model.backward(accumulate=True, scale=1 / 4)
    got = host(model, grads)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6, err_msg=name)
    model.optimizer.step()
    whole.optimizer.step()
    for a, b in zip(model.params, whole.params, strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)


def test_without_accumulate_a_backward_replaces_the_last(xp) -> None:
    model = classifier()
    first = host(model, model.gradients(X[:8], Y[:8]))
    again = host(model, model.gradients(X[:8], Y[:8]))
    for name in first:
        np.testing.assert_allclose(again[name], first[name], rtol=1e-6)
    doubled = host(model, model.gradients(X[:8], Y[:8], accumulate=True))
    for name in first:
        np.testing.assert_allclose(doubled[name], 2 * first[name], rtol=1e-5, atol=1e-7)
    model.zero_grad()
    assert all(p.grad is None for p in model.params)
    with pytest.raises(TypeError, match="scale must be a number"):
        model.gradients(X[:8], Y[:8], scale="half")
