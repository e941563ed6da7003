"""Indexing: basic slicing (getitem), gathers along an axis (take, embedding lookup), one_hot."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

import arraycore
from arraycore import ArrayNamespace

from ...expr.node import Expr
from ...expr.spec import DEFAULT_FLOAT, Spec, normalize_axes
from ..base import Grads, Inputs, Needs, Op


def _normalize_key(key: Any, ndim: int) -> tuple[Any, ...]:
    """A basic index as a tuple without Ellipsis; rejects anything but ints, slices and None."""
    key = key if isinstance(key, tuple) else (key,)
    for k in key:
        if isinstance(k, bool | np.bool_) or not (
            k is None or k is Ellipsis or isinstance(k, int | np.integer | slice)
        ):
            raise TypeError(
                f"only basic indexing (ints, slices, None, ...) is supported, got "
                f"{type(k).__name__}; use ex.take() to gather by index"
            )
    if sum(k is Ellipsis for k in key) > 1:
        raise IndexError("an index can only have a single ellipsis")
    used = sum(1 for k in key if k is not None and k is not Ellipsis)
    if used > ndim:
        raise IndexError(f"too many indices ({used}) for {ndim} dimensions")
    out: list[Any] = []
    for k in key:
        out.extend([slice(None)] * (ndim - used) if k is Ellipsis else [k])
    if Ellipsis not in key:
        out.extend([slice(None)] * (ndim - used))
    return tuple(int(k) if isinstance(k, np.integer) else k for k in out)


class GetItem(Op):
    """``x[key]`` with basic indexing; the gradient is ``dy`` written into zeros of ``x``'s shape,
    or added into the slice of a gradient the plan already holds (:meth:`accumulate_grad`)."""

    fresh_grads = True

    name = "getitem"

    def __init__(self, key: Any) -> None:
        self.key = key

    def infer(self, x: Spec) -> Spec:
        key = _normalize_key(self.key, x.ndim)
        shape: list[int | None] = []
        axis = 0
        for k in key:
            if k is None:
                shape.append(1)
                continue
            size = x.shape[axis]
            if isinstance(k, int):
                if size is not None and not -size <= k < size:
                    raise IndexError(f"index {k} is out of bounds for axis {axis} with size {size}")
            elif size is not None:
                shape.append(len(range(*k.indices(size))))
            else:
                shape.append(None)
            axis += 1
        self.index = key
        self.in_shape = x.shape
        return Spec(tuple(shape), x.dtype)

    def forward(self, xp: ArrayNamespace, x: Any) -> Any:
        return x[self.index]

    def backward(
        self, xp: ArrayNamespace, dy: Any, inputs: Inputs, output: Any, residual: Any, needs: Needs
    ) -> Grads:
        dx = xp.zeros(self.in_shape, dtype=dy.dtype)
        dx[self.index] = dy
        return (dx,)

    def accumulate_grad(self, xp: ArrayNamespace, acc: Any, dy: Any) -> None:
        """Add ``dy`` into ``acc[key]`` in place: what the plan runs instead of :meth:`backward`
        when ``acc``, the input's gradient so far, is an array it owns (a second slice of the
        same array, ``x[:, t]`` of a sequence), so no input-sized zeros are made per slice."""
        part = acc[self.index]
        part = xp.inplace.add(part, dy, out=part)
        # a no-op where basic indexing gives a view (NumPy, CuPy, OpenCL); a write-back elsewhere
        acc[self.index] = part


class Take(Op):
    """``x`` gathered at integer ``indices`` (any shape) along ``axis``: an embedding lookup.

    The gradient scatters ``dy`` back with ``scatter_add``, so repeated indices accumulate.
    """

    fresh_grads = True

    name = "take"
    keep_inputs = (1,)

    def __init__(self, axis: int) -> None:
        self.axis = axis

    def infer(self, x: Spec, indices: Spec) -> Spec:
        if indices.dtype.kind not in "iu":
            raise TypeError(f"indices must be integers, got {indices.dtype.name}")
        (ax,) = normalize_axes(self.axis, x.ndim)
        self.ax = ax
        self.in_shape = x.shape
        n = None if None in indices.shape else math.prod(d for d in indices.shape if d is not None)
        self.flat_shape = (*x.shape[:ax], n, *x.shape[ax + 1 :])
        return Spec((*x.shape[:ax], *indices.shape, *x.shape[ax + 1 :]), x.dtype)

    def index_input(self, *specs: Spec) -> tuple[int, int] | None:
        x, indices = specs
        if indices.dtype.kind not in "iu":
            return None
        (ax,) = normalize_axes(self.axis, x.ndim)
        n = x.shape[ax]
        return None if n is None else (1, int(n))

    def forward(self, xp: ArrayNamespace, x: Any, indices: Any) -> Any:
        out_shape = (*self.in_shape[: self.ax], *indices.shape, *self.in_shape[self.ax + 1 :])
        flat = xp.take(x, xp.reshape(indices, (-1,)), axis=self.ax)
        return xp.reshape(flat, out_shape)

    def backward(
        self, xp: ArrayNamespace, dy: Any, inputs: Inputs, output: Any, residual: Any, needs: Needs
    ) -> Grads:
        dx = xp.zeros(self.in_shape, dtype=dy.dtype)
        flat = xp.reshape(inputs[1], (-1,))
        # the very indices forward's take checked (or was told not to): checking them again
        # would cost a device backend a second wait for the queue each step
        with arraycore.checks(False, only="indices"):
            xp.inplace.scatter_add(dx, flat, xp.reshape(dy, self.flat_shape), axis=self.ax)
        return dx, None


class OneHot(Op):
    """One-hot rows of integer ``indices``: shape ``indices.shape + (num_classes,)``; no gradient."""

    name = "one_hot"
    differentiable = False
    arraycore_checks_labels = True  # xp.nn.one_hot checks them

    def __init__(self, num_classes: int, dtype: Any) -> None:
        self.num_classes = int(num_classes)
        self.dtype = np.dtype(dtype)

    def infer(self, indices: Spec) -> Spec:
        if indices.dtype.kind not in "iu":
            raise TypeError(f"indices must be integers, got {indices.dtype.name}")
        return Spec((*indices.shape, self.num_classes), self.dtype)

    def label_input(self, *specs: Spec) -> tuple[int, int | None] | None:
        return (0, self.num_classes) if specs[0].dtype.kind in "iu" else None

    def forward(self, xp: ArrayNamespace, indices: Any) -> Any:
        return xp.nn.one_hot(indices, self.num_classes, dtype=self.dtype)


def getitem(x: Any, key: Any) -> Expr:
    """``x[key]`` with basic indexing (ints, slices, None, Ellipsis)."""
    return GetItem(key)(x)


def take(x: Any, indices: Any, axis: int = 0) -> Expr:
    """Rows (or slices along ``axis``) of ``x`` at integer ``indices`` of any shape.

    ``take(E, word_ids)`` with ``E`` of shape ``(vocabulary, width)`` and ``word_ids`` of shape
    ``(N, T)`` gives ``(N, T, width)``: an embedding lookup.
    """
    from ...expr.node import as_expr

    idx = as_expr(indices)
    return Take(axis)(x, idx)


def one_hot(indices: Any, num_classes: int, dtype: Any = None) -> Expr:
    """One-hot encoding of integer ``indices`` (float32 unless ``dtype`` says otherwise)."""
    return OneHot(num_classes, DEFAULT_FLOAT if dtype is None else dtype)(indices)


__all__ = ["getitem", "one_hot", "take"]
