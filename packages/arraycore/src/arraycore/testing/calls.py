"""Recording what a piece of work asks of a backend: is it ready to be captured?

A step that a backend captures once and replays (a CUDA graph) may not copy between host and
device, may not wait for the device, and must make the same calls with the same non-array
arguments every time: a Python scalar handed to a kernel is frozen into the capture.
:class:`CallRecorder` wraps the protocol methods of one backend object (``xp._backend``) so that
a block of work can be recorded and two blocks compared::

    with CallRecorder(xp) as recorder:
        step()  # warm-up: compiles, allocates state
        first = recorder.record(step)
        second = recorder.record(step)
    assert not recorder.transfers(first) and not recorder.syncs(first)
    assert first == second

Each call is recorded as ``(name, arguments)`` with arrays described by shape and dtype and
every other argument as it is. Work that reaches the device without a protocol method (a
backend's own overrides calling its kernels directly) is recorded by watching those methods too:
:meth:`CallRecorder.watch`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..backend import Backend

#: Protocol methods that copy between host and device.
TRANSFERS = frozenset({"from_numpy", "to_numpy"})
#: Protocol methods that wait for the device.
SYNCS = frozenset({"synchronize"})
#: Protocol methods that are no work on the device (not recorded).
_QUIET = frozenset(
    {"devices", "probe", "version", "select_device", "owns", "device_of", "overrides"}
)
#: Every public method of the protocol.
PROTOCOL_METHODS = tuple(
    sorted(
        name
        for name in dir(Backend)
        if not name.startswith("_") and callable(getattr(Backend, name)) and name not in _QUIET
    )
)

Call = tuple[str, Any]


class CallRecorder:
    """Records the protocol calls of ``xp``'s backend object inside :meth:`record` (a context
    manager: the methods are wrapped on entry and restored on exit)."""

    def __init__(self, xp: Any) -> None:
        self.backend = xp._backend
        self._log: list[Call] | None = None
        self._saved: list[tuple[Any, str, Any]] = []
        self._kinds: dict[str, str] = {}

    def __enter__(self) -> CallRecorder:
        for name in PROTOCOL_METHODS:
            if hasattr(self.backend, name):
                kind = "transfer" if name in TRANSFERS else "sync" if name in SYNCS else "call"
                self.watch(self.backend, name, kind)
        return self

    def __exit__(self, *exc: Any) -> None:
        for owner, name, saved in reversed(self._saved):
            if saved is None:
                delattr(owner, name)
            else:
                setattr(owner, name, saved)
        self._saved.clear()

    def watch(
        self,
        owner: Any,
        name: str,
        kind: str = "call",
        *,
        label: str | None = None,
        when: Callable[..., bool] | None = None,
    ) -> None:
        """Record calls of ``owner.name`` as ``label`` (default ``name``) of ``kind`` (``"call"``,
        ``"transfer"`` or ``"sync"``), those for which ``when(*args, **kwargs)`` holds if given."""
        original = getattr(owner, name)
        own = owner.__dict__.get(name) if hasattr(owner, "__dict__") else None
        self._saved.append((owner, name, own))
        tag = label or name
        self._kinds[tag] = kind
        describe = self.describe

        def recorded(*args: Any, **kwargs: Any) -> Any:
            log = self._log
            if log is not None and (when is None or when(*args, **kwargs)):
                items = tuple(sorted((k, describe(v)) for k, v in kwargs.items()))
                log.append((tag, (describe(args), items)))
            return original(*args, **kwargs)

        setattr(owner, name, recorded)

    def describe(self, value: Any) -> Any:
        """``value`` as a comparable record: arrays by kind, shape and dtype."""
        if self.backend.owns(value):
            return ("array", tuple(value.shape), str(value.dtype))
        if isinstance(value, np.ndarray):
            return ("host array", tuple(value.shape), str(value.dtype))
        if isinstance(value, tuple | list):
            return tuple(self.describe(v) for v in value)
        if isinstance(value, dict):
            return tuple(sorted((str(k), self.describe(v)) for k, v in value.items()))
        if isinstance(value, np.generic):
            return value.item()
        if value is None or isinstance(value, int | float | str | bool | slice | np.dtype):
            return value
        return type(value).__name__

    def record(self, work: Callable[[], Any]) -> list[Call]:
        """The calls ``work()`` makes, in order."""
        log: list[Call] = []
        self._log = log
        try:
            work()
        finally:
            self._log = None
        return log

    def _of_kind(self, calls: list[Call], kind: str) -> list[Call]:
        return [c for c in calls if self._kinds.get(c[0]) == kind]

    def transfers(self, calls: list[Call]) -> list[Call]:
        """The calls among ``calls`` that copy between host and device."""
        return self._of_kind(calls, "transfer")

    def syncs(self, calls: list[Call]) -> list[Call]:
        """The calls among ``calls`` that wait for the device."""
        return self._of_kind(calls, "sync")


def first_difference(first: list[Call], second: list[Call]) -> str | None:
    """Where two recordings differ, in words (``None``: they are the same calls)."""
    for i, (a, b) in enumerate(zip(first, second, strict=False)):
        if a != b:
            return f"call {i} differs: {a!r} then {b!r}"
    if len(first) != len(second):
        return f"{len(first)} calls, then {len(second)}"
    return None
