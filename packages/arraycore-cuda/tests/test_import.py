"""The installed distribution: importable, versioned, and registered as the ``cuda`` backend."""

from __future__ import annotations

from importlib import metadata, resources

import arraycore_cuda


def test_version_matches_the_installed_distribution() -> None:
    assert arraycore_cuda.__version__ == metadata.version("arraycore-cuda")


def test_entry_point_names_the_backend_class() -> None:
    eps = metadata.distribution("arraycore-cuda").entry_points
    (ep,) = [ep for ep in eps if ep.group == "arraycore.backends"]
    assert ep.name == "cuda"
    assert ep.load() is arraycore_cuda.CudaBackend


def test_ships_type_information() -> None:
    assert resources.files("arraycore_cuda").joinpath("py.typed").is_file()
