"""The installed distribution: importable, versioned, typed, and built on arraycore."""

from __future__ import annotations

from importlib import metadata, resources

import nnlayers


def test_version_matches_the_installed_distribution() -> None:
    assert nnlayers.__version__ == metadata.version("nnlayers")


def test_depends_on_the_arraycore_of_the_same_release() -> None:
    requires = metadata.requires("nnlayers") or []
    assert f"arraycore=={nnlayers.__version__}" in requires
    assert metadata.version("arraycore") == nnlayers.__version__


def test_ships_type_information() -> None:
    assert resources.files("nnlayers").joinpath("py.typed").is_file()
