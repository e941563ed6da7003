"""Training curves saved as PNG through matplotlib's Agg canvas."""

from __future__ import annotations

import doctest
import math
import sys

import pytest

import nnlayers.plotting as plotting
from nnlayers.plotting import plot_history

pytest.importorskip("matplotlib")

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _image(path):
    from matplotlib.image import imread

    return imread(path)


def test_loss_and_accuracy_panels(tmp_path):
    history = {
        "loss": [1.0, 0.7, 0.5, 0.4],
        "val_loss": [1.2, 0.9, 0.8, 0.85],
        "accuracy": [0.4, 0.6, 0.7, 0.8],
        "val_accuracy": [0.3, 0.5, math.nan, 0.6],
        "time": [1.0, 1.0, 1.0, 1.0],
    }
    path = plot_history(history, tmp_path / "curves.png", title="run")
    assert path.read_bytes()[:8] == PNG_SIGNATURE
    image = _image(path)
    assert image.shape[0] == 360 and image.shape[1] == 1000  # two 5-inch panels at 100 dpi
    assert image.std() > 0.01  # something was drawn
    assert [p.name for p in tmp_path.iterdir()] == ["curves.png"]


def test_works_with_a_history_object_and_chosen_metrics(tmp_path):
    class History:  # the shape of nnlayers.train.History
        epochs = (5, 6, 7)

        def keys(self):
            return ["loss", "mse"]

        def __getitem__(self, name):
            return {"loss": [3.0, 2.0, 1.0], "mse": [0.3, 0.2, 0.1]}[name]

    path = plot_history(History(), tmp_path / "h.png", metrics=["mse"])
    assert _image(path).shape[:2] == (360, 500)
    # no loss/accuracy: every non-validation metric gets a panel
    path = plot_history({"mse": [1.0, 0.5], "val_mse": [1.2, 0.9]}, tmp_path / "m.png")
    assert _image(path).shape[:2] == (360, 500)


def test_the_process_wide_backend_is_left_alone(tmp_path):
    import matplotlib

    before = matplotlib.get_backend()
    plot_history({"loss": [1.0, 0.5]}, tmp_path / "a.png")
    assert matplotlib.get_backend() == before
    assert "matplotlib.pyplot" not in sys.modules or before == matplotlib.get_backend()


def test_errors(tmp_path):
    with pytest.raises(ValueError, match=r"no metric 'accuracy'.*it has 'loss'"):
        plot_history({"loss": [1.0]}, tmp_path / "x.png", metrics=["accuracy"])
    with pytest.raises(ValueError, match="no metric to plot"):
        plot_history({}, tmp_path / "x.png")
    with pytest.raises(TypeError, match="must map metric names"):
        plot_history([1.0, 2.0], tmp_path / "x.png")


def test_missing_matplotlib_names_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    monkeypatch.setitem(sys.modules, "matplotlib.backends.backend_agg", None)
    with pytest.raises(ImportError, match=r'pip install "nnlayers\[plot\]"'):
        plot_history({"loss": [1.0]}, tmp_path / "x.png")
    assert not (tmp_path / "x.png").exists()


def test_docstring_example_runs():
    assert doctest.testmod(plotting).failed == 0
