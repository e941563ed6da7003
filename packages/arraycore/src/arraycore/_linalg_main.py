"""Linear algebra in the main namespace: matmul, matrix_transpose, tensordot, vecdot."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ._base import NamespaceBase
from .backend import Array


class LinearAlgebraFunctions(NamespaceBase):
    """Linear algebra in the main namespace: matmul, matrix_transpose, tensordot, vecdot."""

    def matmul(self, x1: Array, x2: Array, /) -> Array:
        """Matrix product with NumPy's rules for 1-D operands and broadcast batch axes."""
        self._check("matmul", x1, x2)
        if len(x1.shape) == 0 or len(x2.shape) == 0:
            raise ValueError("matmul: operands must have at least one dimension, got a 0-D array")
        a, b = self._promote("matmul", x1, x2)
        vec1, vec2 = len(a.shape) == 1, len(b.shape) == 1
        if vec1:
            a = self._backend.reshape(a, (1, a.shape[0]))
        if vec2:
            b = self._backend.reshape(b, (b.shape[0], 1))
        if a.shape[-1] != b.shape[-2]:
            raise ValueError(
                f"matmul: shapes {tuple(x1.shape)} and {tuple(x2.shape)} do not align "
                f"({a.shape[-1]} != {b.shape[-2]})"
            )
        try:
            batch = np.broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2]))
        except ValueError as exc:
            raise ValueError(
                f"matmul: batch axes of {tuple(x1.shape)} and {tuple(x2.shape)} do not broadcast"
            ) from exc
        if a.dtype == np.bool_:  # OR of ANDs, as in NumPy: a float32 count is 0 only if none
            f32 = np.dtype("float32")
            counts = self._backend.matmul(self._cast(a, f32), self._cast(b, f32))
            out = self._backend.binary("not_equal", counts, self._backend.full((), 0, f32))
        else:
            out = self._backend.matmul(a, b)
        shape = tuple(batch)
        shape += () if vec1 else (a.shape[-2],)
        shape += () if vec2 else (b.shape[-1],)
        return out if tuple(out.shape) == shape else self._backend.reshape(out, shape)

    def matrix_transpose(self, x: Array, /) -> Array:
        """Swap the last two axes."""
        self._check("matrix_transpose", x)
        n = len(x.shape)
        if n < 2:
            raise ValueError(f"matrix_transpose: needs at least 2 dimensions, got {x.shape}")
        return self._backend.permute_dims(x, (*range(n - 2), n - 1, n - 2))

    def tensordot(self, x1: Array, x2: Array, /, *, axes: Any = 2) -> Array:
        """Sum of products over the given axes, via one matmul."""
        self._check("tensordot", x1, x2)
        n1, n2 = len(x1.shape), len(x2.shape)
        if isinstance(axes, int | np.integer):
            if axes < 0 or axes > min(n1, n2):
                raise ValueError(
                    f"tensordot: axes={axes} is out of range for {x1.shape}, {x2.shape}"
                )
            ax1 = list(range(n1 - axes, n1))
            ax2 = list(range(axes))
        else:
            ax1 = [a % n1 for a in axes[0]]
            ax2 = [a % n2 for a in axes[1]]
        for a, b in zip(ax1, ax2, strict=True):
            if x1.shape[a] != x2.shape[b]:
                raise ValueError(
                    f"tensordot: axis {a} of {tuple(x1.shape)} and axis {b} of "
                    f"{tuple(x2.shape)} differ"
                )
        free1 = [i for i in range(n1) if i not in ax1]
        free2 = [i for i in range(n2) if i not in ax2]
        k = math.prod(x1.shape[a] for a in ax1)
        m = math.prod(x1.shape[a] for a in free1)
        n = math.prod(x2.shape[a] for a in free2)
        a = self.reshape(self.permute_dims(x1, (*free1, *ax1)), (m, k))
        b = self.reshape(self.permute_dims(x2, (*ax2, *free2)), (k, n))
        out = self.matmul(a, b)
        return self.reshape(
            out, tuple(x1.shape[i] for i in free1) + tuple(x2.shape[i] for i in free2)
        )

    def vecdot(self, x1: Array, x2: Array, /, *, axis: int = -1) -> Array:
        """Dot product of vectors along ``axis``, with broadcasting."""
        self._check("vecdot", x1, x2)
        if x1.shape[axis] != x2.shape[axis]:
            raise ValueError(f"vecdot: axis {axis} of {x1.shape} and {x2.shape} differ")
        prod = self.multiply(x1, x2)
        # dtype=: the standard's result dtype is the promoted one; sum would widen small ints.
        return self.sum(
            prod,
            axis=axis if axis < 0 else axis - len(x1.shape) + len(prod.shape),
            dtype=prod.dtype,
        )

    # -- manipulation -----------------------------------------------------------------------------
