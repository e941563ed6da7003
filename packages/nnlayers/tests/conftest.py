"""Shared fixtures: the active backend (``ARRAYCORE_BACKEND``) and its tolerances."""

from __future__ import annotations

import pytest

import arraycore
from nnlayers.testing import tolerances


@pytest.fixture(scope="session")
def xp():
    """The arraycore namespace the suite runs on."""
    return arraycore.namespace()


@pytest.fixture(scope="session")
def tol():
    """Strict float64 tolerances on NumPy, looser float32 ones elsewhere."""
    return tolerances()
