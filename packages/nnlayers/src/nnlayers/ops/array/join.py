"""Joining and splitting: concat, stack, split, pad."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

from arraycore import ArrayNamespace

from ...expr.node import Expr, as_expr, as_exprs
from ...expr.spec import Spec, format_shape, normalize_axes
from ..base import Grads, Inputs, Needs, Op, require_float, result_dtype


class Concat(Op):
    """Inputs joined along an existing ``axis``; each gradient is its slice of ``dy``."""

    name = "concat"

    def __init__(self, axis: int) -> None:
        self.axis = axis

    def infer(self, *specs: Spec) -> Spec:
        if not specs:
            raise ValueError("needs at least one input")
        ndim = specs[0].ndim
        if ndim == 0 or any(s.ndim != ndim for s in specs):
            raise ValueError("inputs need the same number (at least 1) of dimensions")
        (ax,) = normalize_axes(self.axis, ndim)
        shape: list[int | None] = []
        for i in range(ndim):
            dims = [s.shape[i] for s in specs]
            if i == ax:
                shape.append(None if None in dims else sum(dims))  # type: ignore[arg-type]
                continue
            known = {d for d in dims if d is not None}
            if len(known) > 1:
                shapes = ", ".join(format_shape(s.shape) for s in specs)
                raise ValueError(f"shapes {shapes} differ off axis {ax}")
            shape.append(known.pop() if known else None)
        self.ax = ax
        self.keys = []
        start: int | None = 0
        for s in specs:
            size = s.shape[ax]
            stop = None if size is None or start is None else start + size
            self.keys.append(
                tuple(slice(start, stop) if i == ax else slice(None) for i in range(ndim))
            )
            start = stop
        return Spec(tuple(shape), result_dtype(*specs))

    def forward(self, xp: ArrayNamespace, *xs: Any) -> Any:
        return xp.concat(xs, axis=self.ax)

    def backward(
        self, xp: ArrayNamespace, dy: Any, inputs: Inputs, output: Any, residual: Any, needs: Needs
    ) -> Grads:
        return tuple(dy[k] if need else None for k, need in zip(self.keys, needs, strict=True))


class Pad(Op):
    """``x`` surrounded by ``value`` (``pad_width`` per axis as in NumPy); the gradient is the
    centre of ``dy``."""

    name = "pad"

    def __init__(self, pad_width: Any, value: float) -> None:
        self.pad_width = pad_width
        self.value = value

    def infer(self, x: Spec) -> Spec:
        require_float(self.name, x)
        width = self.pad_width
        pairs: list[Any]
        if isinstance(width, int):
            pairs = [(width, width)] * x.ndim
        elif len(width) == 2 and all(isinstance(w, int) for w in width):
            pairs = [tuple(width)] * x.ndim
        else:
            pairs = [tuple(w) if not isinstance(w, int) else (w, w) for w in width]
        if len(pairs) != x.ndim or any(len(p) != 2 or min(p) < 0 for p in pairs):
            raise ValueError(f"pad_width {width!r} does not fit {x.ndim} dimensions")
        self.out_shape = tuple(
            None if d is None else d + b + a for d, (b, a) in zip(x.shape, pairs, strict=True)
        )
        self.centre = tuple(
            slice(b, None if d is None else b + d) for d, (b, _) in zip(x.shape, pairs, strict=True)
        )
        return Spec(self.out_shape, x.dtype)

    def forward(self, xp: ArrayNamespace, x: Any) -> Any:
        out = xp.full(self.out_shape, self.value, dtype=x.dtype)
        out[self.centre] = x
        return out

    def backward(
        self, xp: ArrayNamespace, dy: Any, inputs: Inputs, output: Any, residual: Any, needs: Needs
    ) -> Grads:
        return (dy[self.centre],)


def concat(xs: Any, axis: int = 0) -> Expr:
    """Expressions joined along an existing ``axis``."""
    xs = list(xs)
    like = next((x for x in xs if isinstance(x, Expr)), None)
    return Expr(Concat(axis), tuple(as_expr(x, like) for x in xs))


def stack(xs: Any, axis: int = 0) -> Expr:
    """Same-shaped expressions joined along a new ``axis`` (expand_dims, then concat)."""
    from .shape import expand_dims

    xs = list(as_exprs(*xs))
    shapes = {x.shape for x in xs}
    if len(shapes) > 1:
        raise ValueError(
            "stack: inputs need one shape, got " + ", ".join(map(format_shape, shapes))
        )
    return concat([expand_dims(x, axis) for x in xs], axis=axis)


def split(x: Any, indices_or_sections: Any, axis: int = 0) -> list[Expr]:
    """``numpy.split``: equal sections, or pieces cut at ``indices`` along ``axis`` (slices)."""
    from .indexing import getitem

    x = as_expr(x)
    (ax,) = normalize_axes(axis, x.ndim)
    size = x.shape[ax]
    if isinstance(indices_or_sections, int):
        if size is None or size % indices_or_sections:
            raise ValueError(
                f"split: axis {ax} of {format_shape(x.shape)} does not divide into "
                f"{indices_or_sections} equal sections"
            )
        step = size // indices_or_sections
        cuts = list(range(step, size, step))
    else:
        cuts = list(indices_or_sections)
    bounds = [0, *cuts, None]
    pre = (slice(None),) * ax
    return [getitem(x, (*pre, slice(a, b))) for a, b in pairwise(bounds)]


def pad(x: Any, pad_width: Any, value: float = 0.0) -> Expr:
    """``x`` padded with the constant ``value``; ``pad_width`` as in ``numpy.pad``."""
    return Pad(pad_width, value)(x)
