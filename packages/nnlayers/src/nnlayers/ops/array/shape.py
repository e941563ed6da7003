"""Shape changes: reshape, transpose/permute_dims, expand_dims, squeeze, flatten, broadcast_to."""

from __future__ import annotations

import math
from typing import Any

from arraycore import ArrayNamespace

from ...expr.node import Expr
from ...expr.spec import Spec, broadcast_shapes, format_shape, normalize_axes
from ..base import Grads, Inputs, Needs, Op, reduction_plan, unbroadcast


class Reshape(Op):
    """``x`` in a new shape; one size may be ``-1`` (or ``None``: the batch axis follows it)."""

    name = "reshape"

    def __init__(self, shape: tuple[int | None, ...], lead: int = 0) -> None:
        self.shape = shape
        #: leading axes of ``x`` kept as they are (known or not); ``shape`` is the rest's
        self.lead = lead

    def infer(self, x: Spec) -> Spec:
        if self.lead:
            if x.ndim < self.lead:
                raise ValueError(f"cannot keep {self.lead} axes of {format_shape(x.shape)}")
            head, rest = (
                x.shape[: self.lead],
                Reshape(self.shape).infer(Spec(x.shape[self.lead :], x.dtype)),
            )
            self.in_shape = x.shape
            self.out_shape = (*head, *rest.shape)
            return Spec(self.out_shape, x.dtype)
        target = [None if d is None or d == -1 else int(d) for d in self.shape]
        free = [i for i, d in enumerate(target) if d is None]
        if len(free) > 1:
            raise ValueError(f"at most one -1 or None in the new shape {format_shape(self.shape)}")
        if any(d is not None and d < 0 for d in target):
            raise ValueError(f"negative size in the new shape {format_shape(self.shape)}")
        known = math.prod(d for d in target if d is not None)
        problem = f"cannot reshape {format_shape(x.shape)} into {format_shape(self.shape)}"
        if x.is_concrete:
            total = math.prod(x.shape)  # type: ignore[arg-type]
            if free:
                if known == 0 or total % known:
                    raise ValueError(problem)
                target[free[0]] = total // known
            elif known != total:
                raise ValueError(problem)
        elif not free:
            raise ValueError(f"{problem}: a size is unknown until run time, so use -1 for it")
        self.in_shape = x.shape
        self.out_shape = tuple(target)
        return Spec(self.out_shape, x.dtype)

    def forward(self, xp: ArrayNamespace, x: Any) -> Any:
        return xp.reshape(x, self.out_shape)

    def backward(
        self, xp: ArrayNamespace, dy: Any, inputs: Inputs, output: Any, residual: Any, needs: Needs
    ) -> Grads:
        return (xp.reshape(dy, self.in_shape),)


class PermuteDims(Op):
    """Axes reordered; the gradient is permuted back."""

    name = "permute_dims"

    def __init__(self, axes: tuple[int, ...] | None) -> None:
        self.axes = axes

    def infer(self, x: Spec) -> Spec:
        axes = tuple(reversed(range(x.ndim))) if self.axes is None else self.axes
        norm = tuple(int(a) % x.ndim if x.ndim else int(a) for a in axes)
        if sorted(norm) != list(range(x.ndim)):
            raise ValueError(f"axes {tuple(axes)} are not a permutation of {x.ndim} axes")
        self.order = norm
        self.inverse = tuple(sorted(range(x.ndim), key=lambda i: norm[i]))
        return Spec(tuple(x.shape[a] for a in norm), x.dtype)

    def forward(self, xp: ArrayNamespace, x: Any) -> Any:
        return xp.permute_dims(x, self.order)

    def backward(
        self, xp: ArrayNamespace, dy: Any, inputs: Inputs, output: Any, residual: Any, needs: Needs
    ) -> Grads:
        return (xp.permute_dims(dy, self.inverse),)


class BroadcastTo(Op):
    """``x`` broadcast to ``shape`` (``None`` keeps an unknown size); the gradient is summed back."""

    name = "broadcast_to"

    def __init__(self, shape: tuple[int | None, ...]) -> None:
        self.shape = shape

    def infer(self, x: Spec) -> Spec:
        lead = len(self.shape) - x.ndim
        if lead < 0:
            raise ValueError(
                f"cannot broadcast {format_shape(x.shape)} to {format_shape(self.shape)}"
            )
        target = tuple(
            x.shape[i - lead] if d is None and i >= lead else d for i, d in enumerate(self.shape)
        )
        if broadcast_shapes(x.shape, target) != target:
            raise ValueError(
                f"cannot broadcast {format_shape(x.shape)} to {format_shape(self.shape)}"
            )
        self.in_shape = x.shape
        self.out_shape = target
        self.plan = reduction_plan(x.shape, target)
        return Spec(target, x.dtype)

    def forward(self, xp: ArrayNamespace, x: Any) -> Any:
        return xp.broadcast_to(x, self.out_shape)

    def backward(
        self, xp: ArrayNamespace, dy: Any, inputs: Inputs, output: Any, residual: Any, needs: Needs
    ) -> Grads:
        return (unbroadcast(xp, dy, self.in_shape, self.plan),)


def reshape(x: Any, shape: Any, *, lead: int = 0) -> Expr:
    """``x`` in a new shape; use ``-1`` (or ``None``) for the one size to infer, e.g. the batch.

    ``lead=k`` keeps the first ``k`` axes as they are, known or not, and ``shape`` is the new
    shape of the rest: ``reshape(x, (heads, -1), lead=2)`` splits the last axis of
    ``(N, T, d)`` whatever ``N`` and ``T`` are."""
    shape = (shape,) if isinstance(shape, int) or shape is None else tuple(shape)
    return Reshape(shape, int(lead))(x)


def permute_dims(x: Any, axes: Any) -> Expr:
    """Axes of ``x`` in the order ``axes``."""
    return PermuteDims(tuple(axes))(x)


def transpose(x: Any, axes: Any = None) -> Expr:
    """``numpy.transpose``: axes reversed, or in the order ``axes``."""
    return PermuteDims(None if axes is None else tuple(axes))(x)


def _as_expr(x: Any) -> Expr:
    from ...expr.node import as_expr

    return as_expr(x)


def expand_dims(x: Any, axis: int = 0) -> Expr:
    """``x`` with a new axis of size 1 at ``axis`` (a reshape)."""
    x = _as_expr(x)
    n = x.ndim
    if not -n - 1 <= axis <= n:
        raise ValueError(
            f"expand_dims: axis {axis} is out of range for shape {format_shape(x.shape)}"
        )
    axis %= n + 1
    return reshape(x, (*x.shape[:axis], 1, *x.shape[axis:]))


def squeeze(x: Any, axis: Any = None) -> Expr:
    """``x`` without the given size-1 axes (all size-1 axes by default; a reshape)."""
    x = _as_expr(x)
    if axis is None:
        axes = tuple(i for i, d in enumerate(x.shape) if d == 1)
    else:
        axes = normalize_axes(axis, x.ndim)
        bad = [a for a in axes if x.shape[a] != 1]
        if bad:
            raise ValueError(f"squeeze: axis {bad[0]} of shape {format_shape(x.shape)} is not 1")
    return reshape(x, tuple(d for i, d in enumerate(x.shape) if i not in axes))


def flatten(x: Any, start_axis: int = 1) -> Expr:
    """Axes from ``start_axis`` on merged into one (``(N, C, H, W) -> (N, C*H*W)``)."""
    x = _as_expr(x)
    rest = x.shape[start_axis:]
    size = None if None in rest else math.prod(d for d in rest if d is not None)
    head = x.shape[:start_axis]
    if size is None or None in head[1:]:
        raise ValueError(
            f"flatten: sizes after the first axis must be known, got {format_shape(x.shape)}"
        )
    return reshape(
        x, (-1 if head and head[0] is None else head[0], *head[1:], size) if head else (size,)
    )


def broadcast_to(x: Any, shape: Any) -> Expr:
    """``x`` broadcast to ``shape``; ``None`` in ``shape`` keeps ``x``'s size on that axis."""
    return BroadcastTo(tuple(shape))(x)
