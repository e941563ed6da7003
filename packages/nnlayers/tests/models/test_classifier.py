"""Classifier: probabilities, predictions, accuracy, per-position targets, shape errors."""

from __future__ import annotations

import numpy as np
import pytest

from nnlayers.layers import LSTM, Affine, Embedding, Sequential
from nnlayers.models import Classifier
from nnlayers.optim import Adam


def test_predict_proba_predict_and_evaluate_agree() -> None:
    model = Classifier(Sequential([Affine(8, activation="relu"), Affine(4)], seed=0), (3,))
    x = np.random.default_rng(0).normal(size=(10, 3)).astype(np.float32)
    proba = model.predict_proba(x, batch_size=4)
    assert proba.shape == (10, 4)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-5)
    labels = model.predict(x)
    np.testing.assert_array_equal(labels, proba.argmax(axis=1))
    scores = model.evaluate(x, labels)
    assert scores["accuracy"] == 1.0
    want = -np.mean(np.log(proba[np.arange(10), labels]))
    assert scores["loss"] == pytest.approx(want, rel=1e-4)
    assert model.classes == 4 and model.metric_names == ["loss", "accuracy"]


def test_a_label_per_time_step_averages_the_loss_per_position() -> None:
    net = Sequential([Embedding(5, 4), LSTM(8, return_sequences=True), Affine(5)], seed=0)
    model = Classifier(net, (6,), input_dtype="int64", target_shape=(6,), optimizer=Adam(0.05))
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 5, size=(8, 6))
    targets = (ids + 1) % 5  # the next id: learnable from each position alone
    start = model.evaluate(ids, targets)
    assert start["loss"] == pytest.approx(np.log(5), rel=0.1)
    for _ in range(60):
        model.train_step((ids, targets))
    end = model.evaluate(ids, targets)
    assert end["accuracy"] == 1.0 and end["loss"] < 0.2
    assert model.predict(ids).shape == (8, 6)


def test_logits_of_the_wrong_shape_are_refused() -> None:
    with pytest.raises(ValueError, match="expected \\(None, 'classes'\\)"):
        Classifier(lambda x: x[:, 0], (3,))
    with pytest.raises(TypeError, match="must return an expression"):
        Classifier(lambda x: 3, (3,))  # type: ignore[arg-type, return-value]
