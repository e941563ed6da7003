"""scikit-learn's Array API dispatch on a backend that is not NumPy (the tiny test backend): its
documented estimators and metrics give NumPy's results and keep their arrays on the backend."""

from __future__ import annotations

from arraycore.testing.sklearn_client import run_in_subprocess


def test_scikit_learn_runs_on_the_tiny_backend() -> None:
    assert "ok   LinearDiscriminantAnalysis" in run_in_subprocess("tiny")
