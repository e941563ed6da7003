"""Small constant arrays made once per namespace, for arraycore's own derived kernels.

A derived function that needs ``arange(n)`` (one-hot class indices, a causal mask's rows and
columns) would otherwise make it at every call, and a device's ``arange`` copies its values
from the host: a transfer inside every training step, which a captured step cannot hold, and a
call that differs from a plain step's. These are shared and must only be read.
"""

from __future__ import annotations

import weakref
from typing import Any

Array = Any

#: namespace -> {(n, dtype): arange(n)}
_ARANGES: weakref.WeakKeyDictionary[Any, dict[tuple[int, Any], Array]] = weakref.WeakKeyDictionary()
_MAX = 64


def arange(xp: Any, n: int, dtype: Any = None) -> Array:
    """``xp.arange(n, dtype=dtype)``, made once per namespace (read it, never write it)."""
    try:
        cache = _ARANGES.setdefault(xp, {})
    except TypeError:  # a namespace that is no weak-referenceable object
        return xp.arange(n, dtype=dtype)
    key = (int(n), dtype)
    found = cache.get(key)
    if found is None:
        if len(cache) >= _MAX:
            cache.clear()
        found = cache[key] = xp.arange(n, dtype=dtype)
    return found
