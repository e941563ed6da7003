"""Shared fixtures of arraycore-opencl's tests: ``xp``, the namespace of the first OpenCL
device, skipping (with the reason printed) where no OpenCL device is usable."""

from __future__ import annotations

from typing import Any

import pytest

import arraycore
from arraycore.backend import BackendUnavailable
from arraycore_opencl import OpenCLBackend


@pytest.fixture(scope="module")
def xp() -> Any:
    try:
        OpenCLBackend.probe()
    except BackendUnavailable as exc:  # pragma: no cover - only where OpenCL is absent
        pytest.skip(f"no usable OpenCL device here: {exc}")
    return arraycore.namespace("opencl", device=0)
