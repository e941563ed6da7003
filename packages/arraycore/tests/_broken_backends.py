"""Backends that are installed but cannot run, to test arraycore's errors for that case.

These are real Backend subclasses with real failure modes (a missing library, no device), not
stand-ins for a device: they exercise the error paths users meet when a GPU or a driver is absent.
"""

from __future__ import annotations

from arraycore.backend import BackendUnavailable, Device
from arraycore_tiny import TinyBackend


class NoDeviceBackend(TinyBackend):
    """Imports fine, but finds no device (as a CUDA backend on a machine without a GPU)."""

    name = "nodevice"
    install_hint = "pip install nodevice-backend"

    @classmethod
    def devices(cls) -> list[Device]:
        return []


class MissingLibraryBackend(TinyBackend):
    """Its library is missing: probe() fails the way a missing cupy or pyopencl does."""

    name = "missinglib"
    install_hint = "pip install missinglib-backend"

    @classmethod
    def probe(cls) -> None:
        try:
            import arraycore_library_that_does_not_exist  # type: ignore[import-not-found] # noqa: F401
        except ImportError as exc:
            raise BackendUnavailable(
                "its library 'arraycore_library_that_does_not_exist' is missing"
            ) from exc


class NotABackend:
    """An entry point that names something that is not a Backend."""


class NoVersionBackend(MissingLibraryBackend):
    """Cannot tell its versions without its library either (``version()`` imports it)."""

    name = "noversion"

    @classmethod
    def version(cls) -> str:
        import arraycore_library_that_does_not_exist  # type: ignore[import-not-found] # noqa: F401

        return "never"
