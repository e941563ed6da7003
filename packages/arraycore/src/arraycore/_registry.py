"""Backend discovery (entry points), selection (context, environment) and array ownership.

Precedence, highest first: the backend of the arrays a call receives; ``with use(...)``; the
``ARRAYCORE_BACKEND`` / ``ARRAYCORE_DEVICE`` environment variables; ``numpy``. Nothing is
resolved at import time: the first call that needs a backend resolves it. New arrays live on the
active backend: ``asarray``, ``from_numpy`` and ``from_dlpack`` of host data (NumPy arrays
included) create theirs there (:func:`placement`).
"""

from __future__ import annotations

import contextlib
import difflib
import os
import threading
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from . import _interop
from ._namespace import Namespace
from .backend import Backend, BackendUnavailable, DeviceNotFound, protocol_problems
from .errors import (
    BackendNotFoundError,
    BackendNotInstalledError,
    BackendProtocolError,
    BackendUnavailableError,
)

ENTRY_POINT_GROUP = "arraycore.backends"
ENV_BACKEND = "ARRAYCORE_BACKEND"
ENV_DEVICE = "ARRAYCORE_DEVICE"
DEFAULT_BACKEND = "numpy"


@dataclass(frozen=True)
class KnownBackend:
    """A first-party backend arraycore can name even when it is not installed."""

    distribution: str
    install: str


KNOWN_BACKENDS: dict[str, KnownBackend] = {
    "numpy": KnownBackend("arraycore", "pip install arraycore"),
    "cuda": KnownBackend(
        "arraycore-cuda",
        'pip install "arraycore[cuda12]"   (or "arraycore[cuda13]" for a CUDA 13 driver)',
    ),
    "opencl": KnownBackend(
        "arraycore-opencl",
        'pip install "arraycore[opencl]"   (CLBlast from the system: apt-get install '
        "libclblast-dev, conda install -c conda-forge clblast, or brew install clblast)",
    ),
}

_lock = threading.RLock()
_classes: dict[str, type[Backend]] = {}
_namespaces: dict[tuple[str, Any], Namespace] = {}  # (name, device id) -> namespace
_some_namespace: dict[str, Namespace] = {}  # backend name -> one of its namespaces
_selected: dict[tuple[str, str | None], Namespace] = {}  # (name, selector) -> namespace
_owner_by_type: dict[type, str] = {}
_current: ContextVar[Namespace | None] = ContextVar("arraycore_backend", default=None)


#: The extras of a first-party backend's own distribution, for the command from a checkout.
_CHECKOUT_EXTRAS = {"cuda": "[cuda12]"}


def install_hint(name: str) -> str:
    """The install command for a backend: its own hint, the first-party one (from a checkout of
    this repository, where arraycore runs from its source tree: ``pip install -e`` of the
    backend's folder beside it, the command that works there), or a template."""
    cls = _classes.get(name)
    if cls is not None and cls.install_hint:
        return cls.install_hint
    known = KNOWN_BACKENDS.get(name)
    if known is None:
        return f"pip install <the distribution that provides {name!r}>"
    folder = _checkout_folder(known.distribution)
    if folder is None:
        return known.install
    extras = _CHECKOUT_EXTRAS.get(name, "")
    target = f'"{folder}{extras}"' if extras else str(folder)
    note = known.install.partition("(")[2].rstrip(")")  # the first-party hint's own advice
    note = f"; {note}" if note and not note.startswith("or ") else ""
    return f"pip install -e {target}   (from this checkout{note})"


def _checkout_folder(distribution: str) -> Path | None:
    """The folder of ``distribution`` beside arraycore's own in a source checkout (relative to
    the working directory when it lies below it), or ``None`` when arraycore is installed."""
    here = Path(__file__).resolve()
    if here.parents[1].name != "src" or here.parents[3].name != "packages":
        return None
    folder = here.parents[3] / distribution
    if not (folder / "pyproject.toml").is_file():
        return None
    try:
        return folder.relative_to(Path.cwd())
    except ValueError:
        return folder


def entry_points() -> dict[str, metadata.EntryPoint]:
    """Installed backends by entry-point name (the built-in NumPy backend always included)."""
    found = {ep.name: ep for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)}
    found.setdefault(
        "numpy",
        metadata.EntryPoint("numpy", "arraycore.backends.numpy:NumpyBackend", ENTRY_POINT_GROUP),
    )
    return found


def suggest(name: str, names: list[str]) -> str | None:
    """The backend name ``name`` was probably meant to be: the same name in another case
    (``OpenCL``), else the closest near miss (``opencll``, ``numpi``), else None."""
    by_lower = {n.lower(): n for n in names}
    text = name.strip().lower()
    if text in by_lower:
        return by_lower[text]
    close = difflib.get_close_matches(text, list(by_lower), n=1)
    return by_lower[close[0]] if close else None


def backend_class(name: str) -> type[Backend]:
    """Import and return the backend class registered under ``name``."""
    with _lock:
        if name in _classes:
            return _classes[name]
        eps = entry_points()
        if name not in eps:
            installed = ", ".join(sorted(eps))
            if name in KNOWN_BACKENDS:
                known = KNOWN_BACKENDS[name]
                try:
                    metadata.distribution(known.distribution)
                except metadata.PackageNotFoundError as exc:
                    raise BackendNotInstalledError(
                        f"backend {name!r} is not installed: the distribution "
                        f"{known.distribution!r} is missing. Install it with: {known.install}"
                    ) from exc
            close = suggest(name, [*eps, *KNOWN_BACKENDS])
            hint = f" Did you mean {close!r}?" if close else ""
            first_party = "; ".join(
                f"{known}: {info.install}" for known, info in KNOWN_BACKENDS.items()
            )
            raise BackendNotFoundError(
                f"unknown backend {name!r} (from ${ENV_BACKEND} or use()).{hint} Installed "
                f"backends: {installed}. First-party backends and how to install them: "
                f"{first_party}. A third-party backend is installed with its own distribution, "
                f"which declares it under the entry-point group {ENTRY_POINT_GROUP!r}."
            ) from KeyError(name)
        try:
            cls = eps[name].load()
        except Exception as exc:
            raise BackendUnavailableError(
                f"backend {name!r} is installed but failed to import ({type(exc).__name__}: "
                f"{exc}). Reinstall it with: {install_hint(name)}"
            ) from exc
        if not (isinstance(cls, type) and issubclass(cls, Backend)):
            raise BackendUnavailableError(
                f"entry point {name!r} = {eps[name].value} is not an arraycore.backend.Backend"
            )
        problems = protocol_problems(cls)
        if problems:
            raise BackendProtocolError(
                f"backend {name!r} ({eps[name].value}) cannot run on this arraycore: "
                + "; ".join(problems)
            )
        _classes[name] = cls
        return cls


def _env_selection() -> tuple[str, str | None]:
    name = os.environ.get(ENV_BACKEND, "").strip() or DEFAULT_BACKEND
    device = os.environ.get(ENV_DEVICE, "").strip() or None
    return name, device


def namespace(backend: str | None = None, device: str | int | None = None) -> Namespace:
    """The namespace of a backend and device.

    With no arguments: the backend of the innermost ``with use(...)``, else the one named by
    ``ARRAYCORE_BACKEND`` (device ``ARRAYCORE_DEVICE``), else NumPy.

    >>> import arraycore
    >>> xp = arraycore.namespace("numpy")
    >>> xp.sum(xp.ones((2, 3)), axis=1).tolist()
    [3.0, 3.0]
    """
    if backend is None:
        current = _current.get()
        if current is not None and device is None:
            return current
        if current is not None:
            backend = current.name
        else:
            backend, env_device = _env_selection()
            device = env_device if device is None else device
    elif device is None:
        env_name, env_device = _env_selection()
        if env_name == backend:
            device = env_device
    key = (backend, None if device is None else str(device))
    found = _selected.get(key)
    if found is not None:
        return found
    with _lock:
        if key in _selected:
            return _selected[key]
        cls = backend_class(backend)
        try:
            cls.probe()
            instance = cls(device)
        except DeviceNotFound as exc:
            raise BackendUnavailableError(str(exc)) from exc
        except BackendUnavailable as exc:
            hint = install_hint(backend)
            advice = "" if hint in str(exc) else f". Install what it needs with: {hint}"
            raise BackendUnavailableError(
                f"backend {backend!r} is installed but cannot run here: {exc}{advice}"
            ) from exc
        except Exception as exc:
            raise BackendUnavailableError(
                f"backend {backend!r} failed to start on device {device!r} "
                f"({type(exc).__name__}: {exc}). Install what it needs with: "
                f"{install_hint(backend)}"
            ) from exc
        ns = _namespaces.setdefault((backend, instance.device.id), Namespace(instance))
        _selected[key] = ns
        return ns


@contextlib.contextmanager
def use(backend: str, device: str | int | None = None) -> Iterator[Namespace]:
    """Make ``backend`` (and ``device``) the default inside a ``with`` block.

    The choice lives in a ContextVar, so threads and async tasks each keep their own.

    >>> import arraycore
    >>> with arraycore.use("numpy") as xp:
    ...     arraycore.zeros(2).tolist()
    [0.0, 0.0]
    """
    ns = namespace(backend, device)
    token = _current.set(ns)
    try:
        yield ns
    finally:
        _current.reset(token)


def current() -> Namespace:
    """The namespace that a call with no array arguments would use now."""
    return namespace()


def _owner(x: Any) -> Namespace | None:
    """The namespace of array ``x``, or None if ``x`` is not an array of a loaded backend."""
    kind = type(x)
    name = _owner_by_type.get(kind)
    if name is None:
        if isinstance(x, np.ndarray):
            name = "numpy"
        else:
            for ns in list(_namespaces.values()):
                if ns._backend.owns(x):
                    name = ns.name
                    break
            else:
                return None
        _owner_by_type[kind] = name
    if name == "numpy":
        return namespace("numpy", "cpu")
    some = _some_namespace.get(name)  # any namespace of the backend: it tells x's device
    if some is None:
        for (ns_name, _dev), ns in list(_namespaces.items()):
            if ns_name == name:
                some = _some_namespace[name] = ns
                break
        else:
            return None
    dev = some._backend.device_of(x)
    found = _namespaces.get((name, dev))
    return found if found is not None else namespace(name, dev)


def namespace_of(*args: Any) -> Namespace:
    """The namespace of the arrays among ``args`` (lists and tuples are searched one level).

    Arrays of two backends or two devices are an error. Without arrays: :func:`namespace`. NumPy
    scalars (what NumPy's reductions return) count as NumPy arrays when no other array is among
    ``args``; beside another backend's array, that backend's namespace decides (and refuses them
    with an error that names them, as the standard allows only Python scalars there). An array
    of another library (a PyTorch tensor, anything with DLPack, ``__array_namespace__`` or
    ``__array__`` that no loaded backend owns) is a BackendMismatchError, never NumPy's.
    """
    return dispatch_namespace(None, args)


def dispatch_namespace(op: str | None, args: Any) -> Namespace:
    """:func:`namespace_of` of ``args``, naming ``op`` in the error about mixed arrays."""
    found: Namespace | None = None
    found_arg: Any = None
    numpy_scalar = False
    for arg in args:
        items = arg if isinstance(arg, list | tuple) else (arg,)
        for x in items:
            if isinstance(x, np.generic):
                numpy_scalar = True
                continue
            if x is None or isinstance(x, bool | int | float | str | slice):
                continue
            ns = _owner(x)
            if ns is None:
                if _interop.is_foreign_array(x):
                    raise _interop.foreign(op, x, [name for name, _ in _namespaces])
                continue
            if found is None:
                found, found_arg = ns, x
            elif ns is not found:
                raise _interop.two_backends(op, found_arg, found, x, ns)
    if found is None and numpy_scalar:
        return namespace("numpy", "cpu")
    return found if found is not None else namespace()


def placement(obj: Any) -> Namespace:
    """Where ``arraycore.asarray(obj)`` makes its array: an array of a device backend stays with
    its backend (``asarray`` never moves data between devices); host data (NumPy arrays and
    scalars, Python scalars and lists, other libraries' arrays) goes to the active namespace,
    :func:`namespace`."""
    if not isinstance(obj, np.ndarray | np.generic | list | tuple | bool | int | float):
        ns = _owner(obj)
        if ns is not None and ns.name != "numpy":
            return ns
    return namespace()
