"""Manipulation: reshape, permute_dims, expand_dims, squeeze, broadcasting, concat, stack, flip, tile, repeat."""

from __future__ import annotations

import builtins
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ._base import NamespaceBase
from ._dtypes import result_type
from .backend import Array, normalize_axes


class ManipulationFunctions(NamespaceBase):
    """Manipulation: reshape, permute_dims, expand_dims, squeeze, broadcasting, concat, stack, flip, tile, repeat."""

    def reshape(self, x: Array, /, shape: Any, *, copy: builtins.bool | None = None) -> Array:
        """``x`` in a new shape (one dimension may be -1)."""
        self._check("reshape", x)
        shape = tuple(int(s) for s in ((shape,) if isinstance(shape, int) else shape))
        if shape.count(-1) > 1:
            raise ValueError(f"reshape: at most one -1 in shape {shape}")
        known = math.prod(s for s in shape if s != -1)
        if -1 in shape:
            if known == 0 or x.size % known:
                raise ValueError(f"reshape: cannot reshape array of shape {x.shape} into {shape}")
            shape = tuple(x.size // known if s == -1 else s for s in shape)
        if math.prod(shape) != x.size or any(s < 0 for s in shape):
            raise ValueError(f"reshape: cannot reshape array of shape {x.shape} into {shape}")
        if copy is False:
            raise ValueError("reshape: copy=False is not supported by the generic path")
        out = self._backend.reshape(x, shape)
        return self._backend.astype(out, out.dtype) if copy else out

    def permute_dims(self, x: Array, /, axes: Sequence[int]) -> Array:
        """Axes of ``x`` reordered."""
        self._check("permute_dims", x)
        n = len(x.shape)
        norm = tuple(int(a) % n if n else int(a) for a in axes)
        if sorted(norm) != list(range(n)):
            raise ValueError(f"permute_dims: {tuple(axes)} is not a permutation of {n} axes")
        return self._backend.permute_dims(x, norm)

    def moveaxis(self, x: Array, source: Any, destination: Any, /) -> Array:
        """Move axes to new positions, the others keeping their order."""
        self._check("moveaxis", x)
        n = len(x.shape)
        src_list = [source % n] if isinstance(source, int) else [int(a) % n for a in source]
        dst_list = (
            [destination % n] if isinstance(destination, int) else [int(a) % n for a in destination]
        )
        if len(src_list) != len(dst_list):
            raise ValueError("moveaxis: source and destination need the same number of axes")
        order = [i for i in range(n) if i not in src_list]
        for d, s in sorted(zip(dst_list, src_list, strict=True)):
            order.insert(d, s)
        return self._backend.permute_dims(x, tuple(order))

    def expand_dims(self, x: Array, /, axis: int = 0) -> Array:
        """``x`` with a new axis of size 1 at ``axis``."""
        self._check("expand_dims", x)
        n = len(x.shape)
        if not -n - 1 <= axis <= n:  # the standard's error for an invalid position
            raise IndexError(f"expand_dims: axis {axis} is out of range for shape {x.shape}")
        axis = axis % (n + 1)
        return self._backend.reshape(x, (*x.shape[:axis], 1, *x.shape[axis:]))

    def squeeze(self, x: Array, /, axis: Any) -> Array:
        """``x`` without the given axes, which must have size 1."""
        self._check("squeeze", x)
        axes = normalize_axes(axis, len(x.shape), "squeeze")
        for a in axes:
            if x.shape[a] != 1:
                raise ValueError(
                    f"squeeze: axis {a} of shape {x.shape} has size {x.shape[a]}, not 1"
                )
        return self._backend.reshape(x, tuple(s for i, s in enumerate(x.shape) if i not in axes))

    def broadcast_to(self, x: Array, /, shape: Any) -> Array:
        """``x`` broadcast to ``shape``."""
        self._check("broadcast_to", x)
        shape = self._shape(shape, "broadcast_to")
        try:
            if np.broadcast_shapes(tuple(x.shape), shape) != shape:
                raise ValueError
        except ValueError as exc:
            raise ValueError(f"broadcast_to: cannot broadcast {tuple(x.shape)} to {shape}") from exc
        return self._backend.broadcast_to(x, shape)

    def broadcast_arrays(self, *arrays: Array) -> list[Array]:
        """The arrays broadcast against each other."""
        self._check("broadcast_arrays", *arrays)
        try:
            shape = np.broadcast_shapes(*(tuple(a.shape) for a in arrays))
        except ValueError as exc:
            shapes = ", ".join(str(tuple(a.shape)) for a in arrays)
            raise ValueError(f"broadcast_arrays: shapes {shapes} do not broadcast") from exc
        return [self._backend.broadcast_to(a, shape) for a in arrays]

    def concat(self, arrays: Sequence[Array], /, *, axis: int | None = 0) -> Array:
        """Join arrays along an existing axis (flattened first when ``axis`` is None)."""
        arrays = list(arrays)
        if not arrays:
            raise ValueError("concat: needs at least one array")
        self._check("concat", *arrays)
        if axis is None:
            arrays = [self._backend.reshape(a, (a.size,)) for a in arrays]
            axis = 0
        dt = result_type(*(a.dtype for a in arrays))
        if all(a.dtype != dt for a in arrays):  # int32 with float32 is float64, maybe missing
            dt = self._dtype(dt, "concat")
        ndim = len(arrays[0].shape)
        if ndim == 0:
            raise ValueError("concat: zero-dimensional arrays cannot be concatenated")
        (ax,) = normalize_axes(axis, ndim, "concat")
        first = arrays[0].shape
        for a in arrays[1:]:
            if len(a.shape) != ndim or any(a.shape[i] != first[i] for i in range(ndim) if i != ax):
                shapes = ", ".join(str(tuple(b.shape)) for b in arrays)
                raise ValueError(f"concat: shapes {shapes} differ off axis {ax}")
        total = sum(a.shape[ax] for a in arrays)
        out_shape = (*first[:ax], total, *first[ax + 1 :])
        out = self._backend.full(out_shape, 0, dt)
        start = 0
        for a in arrays:
            stop = start + a.shape[ax]
            self._backend.setitem(
                out, self._axis_key(ndim, ax, slice(start, stop)), self._cast(a, dt)
            )
            start = stop
        return out

    def stack(self, arrays: Sequence[Array], /, *, axis: int = 0) -> Array:
        """Join same-shaped arrays along a new axis."""
        arrays = list(arrays)
        if not arrays:
            raise ValueError("stack: needs at least one array")
        self._check("stack", *arrays)
        shape = tuple(arrays[0].shape)
        for a in arrays:
            if tuple(a.shape) != shape:
                shapes = ", ".join(str(tuple(b.shape)) for b in arrays)
                raise ValueError(f"stack: all arrays need the same shape, got {shapes}")
        return self.concat([self.expand_dims(a, axis=axis) for a in arrays], axis=axis)

    def flip(self, x: Array, /, *, axis: Any = None) -> Array:
        """``x`` with the order of elements reversed along ``axis`` (all axes by default)."""
        self._check("flip", x)
        axes = normalize_axes(axis, len(x.shape), "flip")
        key = tuple(
            slice(None, None, -1) if i in axes else slice(None) for i in range(len(x.shape))
        )
        return self._backend.getitem(x, key)

    def tile(self, x: Array, repetitions: Sequence[int], /) -> Array:
        """``x`` repeated ``repetitions`` times along each axis."""
        self._check("tile", x)
        reps = tuple(int(r) for r in repetitions)
        n = max(len(reps), len(x.shape))
        reps = (1,) * (n - len(reps)) + reps
        shape = (1,) * (n - len(x.shape)) + tuple(x.shape)
        x = self._backend.reshape(x, shape)
        expanded = self._backend.reshape(x, tuple(v for s in shape for v in (1, s)))
        big = self._backend.broadcast_to(
            expanded, tuple(v for r, s in zip(reps, shape, strict=True) for v in (r, s))
        )
        return self._backend.reshape(
            self._backend.astype(big, x.dtype),
            tuple(r * s for r, s in zip(reps, shape, strict=True)),
        )

    def repeat(self, x: Array, repeats: Any, /, *, axis: int | None = None) -> Array:
        """Each element of ``x`` repeated ``repeats`` times along ``axis`` (flattened if None)."""
        self._check("repeat", x)
        if axis is None:
            x = self._backend.reshape(x, (x.size,))
            axis = 0
        (ax,) = normalize_axes(axis, len(x.shape), "repeat")
        if isinstance(repeats, int | np.integer):
            if repeats < 0:
                raise ValueError(f"repeat: repeats must be non-negative, got {repeats}")
            shape = tuple(x.shape)
            expanded = self._backend.reshape(x, (*shape[: ax + 1], 1, *shape[ax + 1 :]))
            big = self._backend.broadcast_to(
                expanded, (*shape[: ax + 1], int(repeats), *shape[ax + 1 :])
            )
            return self._backend.reshape(
                self._backend.astype(big, x.dtype),
                (*shape[:ax], shape[ax] * int(repeats), *shape[ax + 1 :]),
            )
        counts = self.to_numpy(repeats) if self._is_array(repeats) else np.asarray(repeats)
        if counts.shape in ((), (1,)):  # one count for every element (broadcast)
            counts = np.broadcast_to(counts.reshape(-1), (x.shape[ax],))
        if counts.shape != (x.shape[ax],) or (counts < 0).any():
            raise ValueError(
                f"repeat: repeats must be non-negative with shape ({x.shape[ax]},), "
                f"got {counts.tolist()}"
            )
        idx = np.repeat(np.arange(x.shape[ax], dtype=np.int64), counts)
        return self._backend.take(x, self._backend.from_numpy(idx), ax)

    # -- indexing ------------------------------------------------------------------------------------
