"""Shared fixtures for arraycore's own tests (the conformance kit lives in arraycore.testing)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from arraycore import _registry


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """No ARRAYCORE_* variables, and no backend selected by an outer ``use()``."""
    monkeypatch.delenv(_registry.ENV_BACKEND, raising=False)
    monkeypatch.delenv(_registry.ENV_DEVICE, raising=False)
    token = _registry._current.set(None)
    try:
        yield monkeypatch
    finally:
        _registry._current.reset(token)
