"""The host path: derived functions that copy their input to the host, compute with NumPy, and
copy the result back.

A few functions cannot reasonably be built from the backend primitives (matrix decompositions,
sorting, sets with data-dependent sizes). arraycore's derived version of each runs on the host
through :func:`run`, and says so: :data:`HOST_FUNCTIONS` lists them, ``arraycore info`` and
``xp.__array_namespace_info__().host_functions()`` show which of them a backend leaves on the host
(the ones it does not override with a device kernel), and ``docs/host-path.md`` explains the cost
(two copies and a wait for the device). Never a silent fallback: a backend either overrides the
function or the listing says it runs on the host.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from ._base import NamespaceBase

#: Dotted namespace names (``"sort"``, ``"linalg.qr"``) whose derived version runs on the host.
HOST_FUNCTIONS: set[str] = set()


def host_function(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Mark a derived namespace function as running on the host (listed in HOST_FUNCTIONS)."""

    def mark(fn: Callable[..., Any]) -> Callable[..., Any]:
        HOST_FUNCTIONS.add(name)
        fn.__arraycore_host__ = name  # type: ignore[attr-defined]
        return fn

    return mark


def to_host(xp: NamespaceBase, x: Any) -> np.ndarray:
    """``x`` (an array of ``xp``) as a NumPy array (a copy and a wait on device backends)."""
    return xp._backend.to_numpy(x)


def to_device(xp: NamespaceBase, a: Any) -> Any:
    """A NumPy result back on ``xp``'s device, in native byte order."""
    host = np.asarray(a, order="C")  # (ascontiguousarray would make a 0-d result 1-d)
    return xp._backend.from_numpy(
        host if host.dtype.isnative else host.astype(host.dtype.newbyteorder("="))
    )


def run(xp: NamespaceBase, fn: Callable[..., Any], *arrays: Any, **kwargs: Any) -> Any:
    """``fn(*host arrays, **kwargs)`` with every array of ``xp`` copied to the host; arrays in the
    result (also inside tuples) are copied back to ``xp``'s device."""
    host = [to_host(xp, a) if xp._backend.owns(a) else a for a in arrays]
    result = fn(*host, **kwargs)
    return _back(xp, result)


def _back(xp: NamespaceBase, result: Any) -> Any:
    if isinstance(result, np.ndarray | np.generic):
        return to_device(xp, np.asarray(result))
    if isinstance(result, tuple):
        items = [_back(xp, r) for r in result]
        return type(result)(*items) if hasattr(result, "_fields") else tuple(items)
    return result


def left_on_host(xp: Any) -> list[str]:
    """The host-path functions this namespace does not override: they run on the host."""
    names = []
    for dotted in sorted(HOST_FUNCTIONS):
        owner: Any = xp
        *path, attr = dotted.split(".")
        for part in path:
            owner = getattr(owner, part, None)
        fn = getattr(owner, attr, None)
        if fn is not None and getattr(fn, "__arraycore_host__", None) == dotted:
            names.append(dotted)
    from ._optional import ON_HOST  # optional primitives the backend leaves to arraycore

    return sorted(names + [name for name in ON_HOST if name in getattr(xp, "_fallbacks", ())])
