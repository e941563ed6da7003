"""Callbacks: hooks in order, early stopping with patience and best weights restored."""

from __future__ import annotations

import numpy as np
import pytest

from nnlayers.layers import Affine
from nnlayers.models import Regressor
from nnlayers.optim import SGD
from nnlayers.train import Callback, EarlyStopping, fit


class Recorder(Callback):
    def __init__(self) -> None:
        self.calls: list[str] = []

    def on_train_begin(self) -> None:
        self.calls.append("train_begin")

    def on_epoch_begin(self, epoch: int) -> None:
        self.calls.append(f"begin {epoch}")

    def on_epoch_end(self, epoch, logs) -> None:
        self.calls.append(f"end {epoch} {sorted(logs)[:2]}")

    def on_train_end(self) -> None:
        self.calls.append("train_end")


def _model(lr=0.05):
    return Regressor(Affine(1, seed=0), (2,), optimizer=SGD(lr))


def _data():
    x = np.random.default_rng(0).normal(size=(32, 2)).astype(np.float32)
    return x, (x @ np.array([[1.0], [2.0]], np.float32))


def test_hooks_run_in_order_and_see_the_model() -> None:
    model = _model()
    x, y = _data()
    recorder = Recorder()
    fit(model, [(x, y)], epochs=2, callbacks=[recorder], progress=False)
    assert recorder.calls == [
        "train_begin",
        "begin 1", "end 1 ['examples_per_second', 'loss']",
        "begin 2", "end 2 ['examples_per_second', 'loss']",
        "train_end",
    ]  # fmt: skip
    assert recorder.model is model and len(recorder.history) == 2
    with pytest.raises(TypeError, match="must be Callback objects"):
        fit(model, [(x, y)], epochs=3, callbacks=[print], progress=False)  # type: ignore[list-item]


def test_early_stopping_waits_patience_epochs_and_restores_the_best() -> None:
    model = _model(lr=1.5)  # too large: the loss climbs after the first epochs
    x, y = _data()
    stop = EarlyStopping("loss", patience=2)
    history = fit(model, [(x, y)], epochs=50, callbacks=[stop], progress=False)
    assert stop.stopped_epoch == stop.best_epoch + 2 == len(history)
    best = history.best("loss")
    assert best == (stop.best_epoch, pytest.approx(stop.best))
    # The weights are those of the best epoch: the loss after it, before its updates ran on.
    assert model.evaluate(x, y)["loss"] <= history["loss"][stop.stopped_epoch - 1]


def test_early_stopping_on_a_metric_that_is_not_there() -> None:
    model = _model()
    x, y = _data()
    with pytest.raises(KeyError, match="pass validation= to fit"):
        fit(model, [(x, y)], epochs=1, callbacks=[EarlyStopping()], progress=False)


def test_early_stopping_min_delta_and_mode() -> None:
    stop = EarlyStopping("val_accuracy", patience=1, min_delta=0.01)
    assert stop.mode == "max" and "patience=1" in repr(stop)
    with pytest.raises(ValueError, match="patience"):
        EarlyStopping(patience=-1)


def test_plot_curves_writes_a_png_each_epoch(tmp_path) -> None:
    from nnlayers.models import Classifier
    from nnlayers.train import PlotCurves

    rng = np.random.default_rng(0)
    x = rng.normal(size=(32, 2)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64)
    model = Classifier(Affine(2, seed=0), (2,), optimizer=SGD(0.1))
    path = tmp_path / "curves.png"
    plot = PlotCurves(path)
    rarely = PlotCurves(tmp_path / "rarely.png", ["accuracy"], every=5)
    fit(model, [(x, y)], epochs=2, validation=(x, y), callbacks=[plot, rarely], progress=False)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "rarely.png").is_file()  # drawn once, at the end
    assert "curves.png" in repr(plot)
