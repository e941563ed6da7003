"""The installed distribution: importable without CuPy, versioned, registered as ``cuda``."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata, resources

import arraycore_cuda
from arraycore.backend import Backend


def test_version_matches_the_installed_distribution() -> None:
    assert arraycore_cuda.__version__ == metadata.version("arraycore-cuda")


def test_entry_point_names_the_backend_class() -> None:
    eps = metadata.distribution("arraycore-cuda").entry_points
    (ep,) = [ep for ep in eps if ep.group == "arraycore.backends"]
    assert ep.name == "cuda"
    assert ep.value == "arraycore_cuda:CudaBackend"
    assert ep.load() is arraycore_cuda.CudaBackend


def test_the_class_is_a_complete_backend() -> None:
    cls = arraycore_cuda.CudaBackend
    assert issubclass(cls, Backend)
    assert not cls.__abstractmethods__, sorted(cls.__abstractmethods__)
    assert cls.name == "cuda"
    assert 'pip install "arraycore[cuda12]"' in cls.install_hint
    assert '"arraycore[cuda13]"' in cls.install_hint


def test_arraycore_resolves_the_entry_point_to_the_class() -> None:
    from arraycore import _registry

    assert _registry.backend_class("cuda") is arraycore_cuda.CudaBackend


def test_importing_the_backend_does_not_import_cupy() -> None:
    """Loading the entry point must work (and stay cheap) where CuPy is absent or broken."""
    code = (
        "import sys, arraycore_cuda\n"
        "from arraycore import _registry\n"
        "_registry.backend_class('cuda')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('cupy', 'cupyx', 'cudnn')))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_ships_type_information() -> None:
    assert resources.files("arraycore_cuda").joinpath("py.typed").is_file()
