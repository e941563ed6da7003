"""Training to a target: a spiral MLP in a bounded number of steps (the digits CNN's target is
checked by tests/test_demo.py: 97% held-out accuracy after 15 epochs of 45 steps)."""

from __future__ import annotations

import numpy as np

import nnlayers
from nnlayers.datasets import spirals, train_test_split
from nnlayers.layers import Affine, Sequential
from nnlayers.optim import SGD, Adam


def test_a_spiral_mlp_reaches_97_percent_within_400_steps() -> None:
    x, y = spirals(n_per_class=200, classes=3, noise=0.2, seed=0)
    train, test = train_test_split(x, y, test_fraction=0.25, seed=0)
    net = Sequential(
        [Affine(64, activation="relu"), Affine(64, activation="relu"), Affine(3)], seed=0
    )
    model = nnlayers.Classifier(net, (2,), optimizer=Adam(0.01))
    feed = nnlayers.Feed(train.inputs, train.targets, batch_size=64, seed=0)
    epochs = 400 // len(feed)
    nnlayers.fit(model, feed, epochs=epochs, progress=False)
    assert model.optimizer.step_count <= 400
    assert model.evaluate(test.inputs, test.targets)["accuracy"] >= 0.97


def test_nesterov_sgd_trains_the_same_mlp() -> None:
    x, y = spirals(n_per_class=200, classes=3, noise=0.2, seed=1)
    net = Sequential(
        [Affine(64, activation="tanh"), Affine(64, activation="tanh"), Affine(3)], seed=1
    )
    model = nnlayers.Classifier(net, (2,), optimizer=SGD(0.1, momentum=0.9, nesterov=True))
    history = nnlayers.fit(
        model, nnlayers.Feed(x, y, batch_size=32, seed=1), epochs=30, progress=False
    )
    assert history.last["accuracy"] >= 0.95
    assert np.all(np.diff(history["loss"][:5]) < 0.05)
