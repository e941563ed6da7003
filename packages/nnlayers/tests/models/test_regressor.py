"""Regressor: squared-error training and the mean absolute error metric."""

from __future__ import annotations

import numpy as np

from nnlayers.layers import Affine
from nnlayers.models import Regressor
from nnlayers.optim import SGD


def test_regressor_learns_a_linear_map() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 3)).astype(np.float32)
    y = (x @ np.array([[1.0, 0.0], [-2.0, 1.0], [0.5, 3.0]]) + 0.25).astype(np.float32)
    model = Regressor(Affine(2, seed=0), (3,), optimizer=SGD(0.1, momentum=0.9))
    for _ in range(100):
        model.train_step((x, y))
    scores = model.evaluate(x, y)
    assert scores["loss"] < 1e-3 and scores["mae"] < 1e-2
    np.testing.assert_allclose(model.predict(x), y, atol=0.05)
    assert model.metric_names == ["loss", "mae"]
