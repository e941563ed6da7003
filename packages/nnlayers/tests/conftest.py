"""Shared fixtures: the active backend (``ARRAYCORE_BACKEND``) and its tolerances."""

from __future__ import annotations

import pytest

import arraycore
from nnlayers.testing import tolerances


@pytest.fixture(scope="session", autouse=True)
def xp():
    """The arraycore namespace the suite runs on (every test skips, with the reason, if the
    backend named by ``ARRAYCORE_BACKEND`` cannot run here)."""
    try:
        return arraycore.namespace()
    except arraycore.BackendError as exc:
        pytest.skip(f"the selected arraycore backend is not usable here: {exc}")


@pytest.fixture(scope="session")
def tol():
    """Strict float64 tolerances on NumPy, looser float32 ones elsewhere."""
    return tolerances()
