"""Fixtures for the data-set tests: an isolated cache folder and a local 'mirror'."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def data_cache(tmp_path, monkeypatch):
    """Point ``NNLAYERS_DATA`` at a fresh folder, so no test touches the real cache."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("NNLAYERS_DATA", str(folder))
    return folder


@pytest.fixture
def mirror(tmp_path):
    """A folder served as a download mirror through ``file://`` URLs."""
    folder = tmp_path / "mirror"
    folder.mkdir()
    return folder
