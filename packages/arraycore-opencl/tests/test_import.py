"""The installed distribution: importable, versioned, and registered as the ``opencl`` backend."""

from __future__ import annotations

from importlib import metadata, resources

import arraycore_opencl


def test_version_matches_the_installed_distribution() -> None:
    assert arraycore_opencl.__version__ == metadata.version("arraycore-opencl")


def test_entry_point_names_the_backend_class() -> None:
    eps = metadata.distribution("arraycore-opencl").entry_points
    (ep,) = [ep for ep in eps if ep.group == "arraycore.backends"]
    assert ep.name == "opencl"
    assert ep.load() is arraycore_opencl.OpenCLBackend


def test_ships_type_information() -> None:
    assert resources.files("arraycore_opencl").joinpath("py.typed").is_file()
