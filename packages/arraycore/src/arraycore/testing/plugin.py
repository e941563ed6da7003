"""pytest plugin of the conformance kit (registered through the ``pytest11`` entry point).

Adds ``--arraycore-backend`` and ``--arraycore-device`` and the ``xp`` fixture: the namespace
of the backend under test. An unusable backend skips every test that needs it, with the reason.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("arraycore")
    group.addoption(
        "--arraycore-backend",
        default=None,
        help="backend under test (entry-point name); default: $ARRAYCORE_BACKEND or numpy",
    )
    group.addoption(
        "--arraycore-device",
        default=None,
        help="device of the backend under test; default: $ARRAYCORE_DEVICE or the first one",
    )


def selected_backend(config: pytest.Config) -> tuple[str, str | None]:
    """The backend name and device selector chosen on the command line or in the environment."""
    name = config.getoption("--arraycore-backend") or os.environ.get("ARRAYCORE_BACKEND")
    device = config.getoption("--arraycore-device") or os.environ.get("ARRAYCORE_DEVICE")
    return (name or "numpy"), (device or None)


def pytest_report_header(config: pytest.Config) -> str:
    name, device = selected_backend(config)
    return f"arraycore backend under test: {name}" + (f" (device {device})" if device else "")


@pytest.fixture(scope="session")
def xp(request: pytest.FixtureRequest) -> Iterator[Any]:
    """The :class:`arraycore.Namespace` of the backend under test.

    An installed backend that cannot run here (no device, a missing system library) skips every
    test with the reason; a backend name that is unknown or not installed fails them, so that a
    typo never passes as a green, all-skipped run.
    """
    import arraycore

    name, device = selected_backend(request.config)
    try:
        namespace = arraycore.namespace(name, device=device)
    except arraycore.BackendUnavailableError as exc:
        pytest.skip(f"backend {name!r} is not usable here: {exc}")
    except arraycore.BackendError as exc:
        pytest.fail(f"cannot test backend {name!r}: {exc}", pytrace=False)
    with arraycore.use(name, device=device):
        yield namespace
