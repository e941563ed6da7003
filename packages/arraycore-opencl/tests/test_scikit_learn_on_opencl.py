"""scikit-learn's Array API dispatch on OpenCL arrays: its documented estimators and metrics give
NumPy's results and return arrays on the same OpenCL device."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from arraycore.backend import BackendUnavailable
from arraycore_opencl import OpenCLBackend

try:
    OpenCLBackend.probe()
except BackendUnavailable as exc:  # pragma: no cover - only where OpenCL is absent
    pytest.skip(f"no usable OpenCL device here: {exc}", allow_module_level=True)


def test_scikit_learn_runs_on_opencl() -> None:
    env = {**os.environ, "SCIPY_ARRAY_API": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "arraycore.testing.sklearn_client", "opencl"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ok   PCA" in done.stdout
