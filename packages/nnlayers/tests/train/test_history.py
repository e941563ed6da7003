"""History: per-epoch records, metric columns, best epochs, JSON round trip."""

from __future__ import annotations

import math

import pytest

from nnlayers.train import History


def test_history_columns_best_and_json() -> None:
    h = History()
    h.append({"epoch": 1, "loss": 1.0, "accuracy": 0.5})
    h.append({"epoch": 2, "loss": 0.5, "accuracy": 0.7, "val_loss": 0.6, "val_accuracy": 0.8})
    h.append({"epoch": 3, "loss": 0.4, "accuracy": 0.75, "val_loss": 0.7, "val_accuracy": 0.78})
    assert h.keys() == ["loss", "accuracy", "val_loss", "val_accuracy"]
    assert h["loss"] == [1.0, 0.5, 0.4] and math.isnan(h["val_loss"][0])
    assert h.best("val_loss") == (2, 0.6) and h.best("val_accuracy") == (2, 0.8)
    assert h.best("loss", mode="max") == (1, 1.0)
    assert h.epochs == [1, 2, 3] and h.last["epoch"] == 3 and len(h) == 3
    assert "val_loss" in h and "nope" not in h
    again = History.from_json(h.to_json())
    assert again.records == h.records and again.as_dict()["epoch"] == [1.0, 2.0, 3.0]
    assert "3 epochs" in repr(h)
    with pytest.raises(KeyError, match="no metric 'acc'"):
        h["acc"]
    with pytest.raises(ValueError, match="mode must be"):
        h.best("loss", mode="lowest")
    with pytest.raises(ValueError, match="no value"):
        History([{"epoch": 1, "loss": 1.0}]).best("val_loss")
