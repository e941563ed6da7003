"""Tracing of ``xp.inplace.fuse`` chains, shared by the backends' fusers.

A chain that promises ``scalar_operands`` is called once with stand-ins of its arguments
(:class:`Arg` for arrays, :class:`Scalar` for Python scalars) while the namespace's ``inplace``
element-wise functions are swapped for recorders; what comes back is the list of its calls,
``(op name, operands, index of the argument written)``. Anything else it does (operators or other
functions on the stand-ins, a return value) makes it :class:`Untraceable`, and the backend runs
it as it is. The swap lasts one call of the chain, under a lock; another thread calling
``xp.inplace`` functions at that very moment would be recorded instead of run, which is why a
fuser traces once per signature, not per call.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from . import _optable

_TRACE_LOCK = threading.Lock()


class Untraceable(Exception):
    """The function does something a fused kernel does not express; it runs as it is."""


class Arg:
    """Stands for the array argument ``index`` while a chain is traced."""

    def __init__(self, index: int) -> None:
        self.index = index

    def __repr__(self) -> str:
        return f"<argument {self.index}>"


class Scalar:
    """Stands for the scalar argument ``index`` while a chain is traced."""

    def __init__(self, index: int) -> None:
        self.index = index


Step = tuple[str, tuple[Any, ...], int]


def _recorder(steps: list[Step], name: str) -> Callable[..., Any]:
    arity = 1 if name in _optable.UNARY_PRIMITIVES else 2

    def record(*operands: Any, out: Any = None) -> Any:
        if len(operands) != arity or not isinstance(out, Arg):
            raise Untraceable(f"inplace.{name} with {len(operands)} operands into {out!r}")
        for x in operands:
            if not isinstance(x, Arg | Scalar) and not (
                isinstance(x, int | float) and not isinstance(x, bool)
            ):
                raise Untraceable(f"inplace.{name} of {type(x).__name__}")
        steps.append((name, operands, out.index))
        return out

    return record


def trace(inplace: Any, fn: Callable[..., Any], kinds: tuple[str, ...]) -> list[Step]:
    """The ``xp.inplace`` calls of ``fn`` called with stand-ins of ``kinds`` (``"a"`` array,
    ``"s"`` scalar), in order."""
    steps: list[Step] = []
    names = sorted(_optable.UNARY_PRIMITIVES | _optable.BINARY_PRIMITIVES)
    args = [Arg(i) if kind == "a" else Scalar(i) for i, kind in enumerate(kinds)]
    with _TRACE_LOCK:
        saved = {name: inplace.__dict__.get(name) for name in names}
        try:
            for name in names:
                setattr(inplace, name, _recorder(steps, name))
            try:
                result = fn(*args)
            except Untraceable:
                raise
            except Exception as exc:  # operators or functions on the stand-ins
                raise Untraceable(f"{type(exc).__name__}: {exc}") from exc
        finally:
            for name, fn_before in saved.items():
                if fn_before is None:
                    inplace.__dict__.pop(name, None)
                else:
                    setattr(inplace, name, fn_before)
    if result is not None:
        raise Untraceable("the function returns a value")
    if not steps:
        raise Untraceable("no xp.inplace calls")
    return steps
