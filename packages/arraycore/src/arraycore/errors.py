"""The errors arraycore raises about backends and devices, and the warnings it gives."""

from __future__ import annotations


class BackendError(RuntimeError):
    """Base class: something is wrong with the choice or use of a backend."""


class BackendNotFoundError(BackendError):
    """No backend of that name is known (neither built in nor an installed entry point)."""


class BackendNotInstalledError(BackendError):
    """A backend arraycore knows by name, whose distribution is not installed."""


class BackendUnavailableError(BackendError):
    """An installed backend that cannot run here (library or device missing)."""


class BackendProtocolError(BackendError):
    """An installed backend this arraycore cannot run: it declares a major version of the
    backend protocol that arraycore does not know, or lacks a required primitive."""


class BackendMismatchError(BackendError, ValueError):
    """Arrays of two backends or two devices met in one call."""


class PerformanceWarning(UserWarning):
    """Something will run much slower than it could, and how to avoid it is known.

    For example: the machine is already loaded and BLAS would start one thread per core
    (``arraycore.check_threads``; ``ARRAYCORE_NUM_THREADS=1`` or ``arraycore.set_threads(1)``).
    """
