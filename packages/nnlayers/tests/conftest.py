"""Shared fixtures: the active backend (``ARRAYCORE_BACKEND``) and its tolerances."""

from __future__ import annotations

import os

import pytest

import arraycore
from nnlayers.testing import tolerances

# Every graph the suite compiles asserts that each op's output and gradients have the shape and
# dtype that setup inferred (Graph's check_specs), so a declaration that lies fails a test.
os.environ.setdefault("NNLAYERS_CHECK_SPECS", "1")


@pytest.fixture(scope="session", autouse=True)
def xp():
    """The arraycore namespace the suite runs on.

    Every test skips, with the reason, if the backend named by ``ARRAYCORE_BACKEND`` is
    installed but cannot run here (no device); an unknown or uninstalled name fails them.
    """
    try:
        return arraycore.namespace()
    except arraycore.BackendUnavailableError as exc:
        pytest.skip(f"the selected arraycore backend is not usable here: {exc}")
    except arraycore.BackendError as exc:
        pytest.fail(f"cannot run on the selected arraycore backend: {exc}", pytrace=False)


@pytest.fixture(scope="session")
def tol():
    """Strict float64 tolerances on NumPy, looser float32 ones elsewhere."""
    return tolerances()


@pytest.fixture
def other_xp(xp):
    """A usable backend other than the suite's (the tiny test backend, NumPy or OpenCL), for
    tests that move parameters between backends; skips, with the reason, without one."""
    for name in ("tiny", "numpy", "opencl"):
        if name not in arraycore._registry.entry_points():
            continue
        try:
            candidate = arraycore.namespace(name)
        except arraycore.BackendError:
            continue
        if candidate is not xp:
            return candidate
    pytest.skip(f"needs a second usable backend beside {xp.name}")
