"""Shared fixtures: the cuda namespace, or a skip that says why this machine cannot run it.

Nothing here stands in for a GPU: tests that need one run on a real device or are skipped with
the reason the backend itself gives (missing CuPy, no NVIDIA driver, no device).
"""

from __future__ import annotations

import functools
from typing import Any

import pytest

import arraycore


@functools.cache
def cuda_unusable_reason() -> str | None:
    """Why ``arraycore.namespace("cuda")`` fails here, or None when it works."""
    try:
        arraycore.namespace("cuda")
    except arraycore.BackendError as exc:
        return str(exc)
    return None


@pytest.fixture(scope="session")
def xp() -> Any:
    """The namespace of the cuda backend on its default device (skips without a usable GPU)."""
    reason = cuda_unusable_reason()
    if reason is not None:
        pytest.skip(f"no usable CUDA GPU here: {reason}")
    return arraycore.namespace("cuda")


@pytest.fixture(scope="session")
def ref() -> Any:
    """The NumPy reference namespace."""
    return arraycore.namespace("numpy")
