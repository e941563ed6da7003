"""A pytest plugin for the array-api-tests run (``-p no_shrink``): Hypothesis' profile of the
suite, without its shrink phase (a failure is reported as found, not minimised: the run takes
about a tenth of the time, and CI only needs to know what fails)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import Phase, settings


@pytest.hookimpl(trylast=True)
def pytest_configure(config: Any) -> None:
    base = settings.get_profile("array-api-tests")
    settings.register_profile(
        "array-api-tests-no-shrink",
        parent=base,
        phases=[p for p in Phase if p is not Phase.shrink],
    )
    settings.load_profile("array-api-tests-no-shrink")
