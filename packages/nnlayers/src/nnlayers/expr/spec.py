"""``Spec``: the static shape and dtype of a node, with ``None`` for sizes known only at run time."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

Dim = int | None
Shape = tuple[Dim, ...]

DEFAULT_FLOAT = np.dtype("float32")


@dataclass(frozen=True)
class Spec:
    """Shape and dtype of an expression; a ``None`` size (the batch axis) is fixed by the feeds.

    >>> Spec((None, 3), np.dtype("float32"))
    Spec((None, 3), float32)
    """

    shape: Shape
    dtype: np.dtype

    @property
    def ndim(self) -> int:
        """Number of axes."""
        return len(self.shape)

    @property
    def is_concrete(self) -> bool:
        """Whether every size is known."""
        return None not in self.shape

    @property
    def is_float(self) -> bool:
        """Whether the dtype is a floating-point type."""
        return self.dtype.kind == "f"

    @property
    def size(self) -> int | None:
        """Number of elements, or ``None`` while a size is unknown."""
        return math.prod(self.shape) if self.is_concrete else None  # type: ignore[arg-type]

    @property
    def nbytes(self) -> int:
        """Bytes of an array of this spec (0 while a size is unknown)."""
        size = self.size
        return 0 if size is None else size * self.dtype.itemsize

    def __str__(self) -> str:
        return f"{format_shape(self.shape)} {self.dtype.name}"

    def __repr__(self) -> str:
        return f"Spec({format_shape(self.shape)}, {self.dtype.name})"


def format_shape(shape: Shape) -> str:
    """``(None, 3)`` style text for a shape (a 1-tuple keeps its comma)."""
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def as_dtype(dtype: Any, default: np.dtype = DEFAULT_FLOAT) -> np.dtype:
    """``dtype`` as a NumPy dtype object (arraycore's dtype objects), ``default`` for ``None``."""
    return default if dtype is None else np.dtype(dtype)


def broadcast_shapes(*shapes: Shape) -> Shape:
    """NumPy broadcasting of shapes that may hold ``None``; raises ``ValueError`` on a clash.

    An unknown size broadcast against a known size other than 1 takes the known size (the feed
    must then agree, which the run-time specialisation checks).
    """
    ndim = max(len(s) for s in shapes)
    out: list[Dim] = []
    for axis in range(ndim):
        dims = [s[axis - ndim + len(s)] for s in shapes if axis - ndim + len(s) >= 0]
        known = {d for d in dims if d is not None and d != 1}
        if len(known) > 1:
            raise ValueError(
                "shapes " + ", ".join(format_shape(s) for s in shapes) + " do not broadcast"
            )
        if known:
            out.append(known.pop())
        elif None in dims:
            out.append(None)
        else:
            out.append(1)
    return tuple(out)


def normalize_axes(axis: Any, ndim: int) -> tuple[int, ...]:
    """``axis`` (None, an int or a sequence) as sorted non-negative ints; ``ValueError`` if bad."""
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, int | np.integer) else tuple(axis)
    out = []
    for a in axes:
        if not -ndim <= a < ndim:
            raise ValueError(f"axis {a} is out of range for {ndim} dimensions")
        out.append(int(a) % ndim)
    if len(set(out)) != len(out):
        raise ValueError(f"repeated axis in {axis!r}")
    return tuple(sorted(out))
