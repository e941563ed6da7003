"""scikit-learn's Array API dispatch on OpenCL arrays: its documented estimators and metrics give
NumPy's results and return arrays on the same OpenCL device."""

from __future__ import annotations

import pytest

from arraycore.backend import BackendUnavailable
from arraycore.testing.sklearn_client import run_in_subprocess
from arraycore_opencl import OpenCLBackend

try:
    OpenCLBackend.probe()
except BackendUnavailable as exc:  # pragma: no cover - only where OpenCL is absent
    pytest.skip(f"no usable OpenCL device here: {exc}", allow_module_level=True)


def test_scikit_learn_runs_on_opencl() -> None:
    assert "ok   PCA" in run_in_subprocess("opencl")
