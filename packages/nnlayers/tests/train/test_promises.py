"""What the docstrings promise, held: EarlyStopping(restore_best=True) puts the best epoch's
weights back at the end whether or not it stopped early; PlotCurves without matplotlib fails
when it is made, not after an epoch has trained."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from nnlayers.layers import Affine, Sequential
from nnlayers.models import Classifier
from nnlayers.optim import SGD
from nnlayers.train import Callback, EarlyStopping, PlotCurves, fit

RNG = np.random.default_rng(0)
X = RNG.normal(size=(32, 3)).astype(np.float32)
Y = RNG.integers(0, 2, 32)


class Snapshots(Callback):
    def on_train_begin(self) -> None:
        self.weights: dict[int, dict[str, np.ndarray]] = {}

    def on_epoch_end(self, epoch, logs) -> None:
        self.weights[epoch] = self.model.state_dict()


class WorseAt(Callback):
    """Makes the monitored value best at ``best`` and worse after it, whatever training does."""

    def __init__(self, best: int) -> None:
        self.best = best

    def on_epoch_end(self, epoch, logs) -> None:
        logs["score"] = -abs(epoch - self.best)  # type: ignore[index]


def test_restore_best_puts_the_best_weights_back_without_stopping_early(xp) -> None:
    model = Classifier(Sequential([Affine(4, activation="tanh"), Affine(2)], seed=0), (3,))
    snaps = Snapshots()
    stopping = EarlyStopping("score", patience=10, mode="max")
    batches = [(X[i : i + 8], Y[i : i + 8]) for i in range(0, 32, 8)]
    fit(model, batches, epochs=5, optimizer=SGD(0.5), callbacks=[WorseAt(2), snaps, stopping],
        progress=False)  # fmt: skip
    assert stopping.stopped_epoch == 0 and stopping.best_epoch == 2 and model.epoch == 5
    for name, value in model.state_dict().items():
        np.testing.assert_array_equal(value, snaps.weights[2][name], err_msg=name)


def test_plot_curves_without_matplotlib_fails_when_made(monkeypatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "matplotlib" else real(name, *a),
    )
    with pytest.raises(ImportError, match=r"PlotCurves needs matplotlib.*nnlayers\[plot\]"):
        PlotCurves("curves.png")
