"""scikit-learn's Array API dispatch on a backend that is not NumPy (the tiny test backend): its
documented estimators and metrics give NumPy's results and keep their arrays on the backend."""

from __future__ import annotations

import os
import subprocess
import sys


def test_scikit_learn_runs_on_the_tiny_backend() -> None:
    env = {**os.environ, "SCIPY_ARRAY_API": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "arraycore.testing.sklearn_client", "tiny"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ok   LinearDiscriminantAnalysis" in done.stdout
