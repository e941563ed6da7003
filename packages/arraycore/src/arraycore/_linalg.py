"""The ``linalg`` extension of the Array API standard (``xp.linalg``).

What is built from the primitives runs on every backend's device: ``matmul``, ``tensordot``,
``vecdot``, ``matrix_transpose`` (the main namespace's), ``outer``, ``trace``, ``diagonal``,
``cross``, ``vector_norm``, ``matrix_norm`` (``"nuc"``, 2 and -2 through ``svdvals``),
``matrix_power`` (repeated squaring; negative powers start from ``inv``) and ``cholesky`` of
matrices up to :data:`CHOLESKY_ON_DEVICE` wide (a loop over the columns, then one check that
every pivot was positive). The decompositions and solvers (``cholesky`` of larger matrices,
``det``, ``eigh``, ``eigvalsh``, ``inv``, ``pinv``, ``qr``, ``slogdet``, ``solve``, ``svd``,
``svdvals``, ``matrix_rank``) run on the host path in arraycore's derived version (two copies
and a wait; listed by ``arraycore info``): the NumPy backend binds ``numpy.linalg`` and
the CUDA backend CuPy's cuSOLVER-backed ``cupy.linalg``. :mod:`arraycore._linalg_host` checks
their arguments, for arraycore's versions and every backend's overrides alike.

Integer and bool input computes in the default floating dtype (as NumPy's ``linalg`` does) in
the norms and the decompositions; ``outer``, ``cross``, ``diagonal``, ``trace`` and
``matrix_power`` with ``n >= 0`` keep integers (NumPy's rules). float16 is refused by the
decompositions and solvers (NumPy's ``linalg`` has no float16 routines) and taken by the rest.
"""

from __future__ import annotations

import builtins
import math
import operator
from typing import TYPE_CHECKING, Any

import numpy as np

from . import _checks, _host
from ._linalg_host import (
    HOST,
    PREPARE,
    EighResult,
    QRResult,
    SlogdetResult,
    SVDResult,
    call,
    check_square,
)
from .backend import Array, normalize_axes

if TYPE_CHECKING:
    from ._namespace import Namespace

__all__ = ["EighResult", "LinalgNamespace", "QRResult", "SVDResult", "SlogdetResult"]

_INF = math.inf

#: ``cholesky`` factors matrices up to this size on the device: a loop of about ten kernels per
#: column, independent of the batch, which wins for batches of small matrices (PoCL: 100000
#: matrices 4 x 4 in 31 ms against 66 ms on the host path). Larger ones go to the host path,
#: where LAPACK's blocked algorithm beats a loop bound by kernel launches (PoCL: one 64 x 64
#: matrix 12 ms against 1.2 ms).
CHOLESKY_ON_DEVICE = 16


def _matrices(op: str, x: Array) -> None:
    if len(x.shape) < 2:
        raise ValueError(f"{op}: x must have at least 2 dimensions, got shape {tuple(x.shape)}")


def device_cholesky(xp: Namespace, x: Array, upper: builtins.bool) -> Array:
    """The Cholesky factor of each matrix of ``x`` (checked: float32/64, square) on the device.

    Right-looking, one column at a time: the column's pivot is the square root of its diagonal
    element, the column below it is divided by the pivot, and the trailing matrix loses the
    column's outer product. Reads the lower triangle (the upper for ``upper=True``), as LAPACK's
    ``potrf`` does for NumPy. About ten kernels per column; the work is ``n^3 / 3`` per matrix.
    A matrix that is not positive definite (a pivot that is not positive, or NaN) is a
    ``LinAlgError``, found by one reduction whose boolean result is read on the host (a wait);
    inside ``arraycore.checks(False)`` that check is skipped and such a factor holds NaN.
    """
    bk = xp._backend
    n = x.shape[-1]
    batch = tuple(x.shape[:-2])
    lead = (slice(None),) * len(batch)
    a = xp.matrix_transpose(x) if upper else x
    lower = bk.full((*batch, n, n), 0, x.dtype)
    zero, nan = bk.full((), 0, x.dtype), bk.full((), math.nan, x.dtype)
    for j in range(n):
        column = bk.getitem(a, (*lead, slice(None), 0))  # (..., n - j)
        diagonal = bk.getitem(column, (*lead, slice(0, 1)))
        # a pivot that is not positive becomes NaN (not sqrt of a negative, 1/0: no FP traps)
        diagonal = bk.where(bk.binary("greater", diagonal, zero), diagonal, nan)
        column = bk.binary("divide", column, bk.unary("sqrt", diagonal))
        bk.setitem(lower, (*lead, slice(j, None), j), column)
        if j + 1 < n:
            rest = bk.getitem(column, (*lead, slice(1, None)))
            update = bk.binary(
                "multiply",
                bk.reshape(rest, (*batch, n - j - 1, 1)),
                bk.reshape(rest, (*batch, 1, n - j - 1)),
            )
            trailing = bk.getitem(a, (*lead, slice(1, None), slice(1, None)))
            a = bk.binary("subtract", trailing, update)
    if n and _checks.enabled() and math.prod(batch):
        pivots = xp.linalg.diagonal(lower)
        if not builtins.bool(xp.to_numpy(xp.all(xp.greater(pivots, 0)))):
            raise np.linalg.LinAlgError(
                f"linalg.cholesky: a matrix of x (shape {tuple(x.shape)}) is not positive definite"
            )
    return xp.matrix_transpose(lower) if upper else lower


class LinalgNamespace:
    """The standard's ``linalg`` extension (``xp.linalg``): see the module docstring."""

    def __init__(self, xp: Namespace) -> None:
        self._xp = xp

    def __repr__(self) -> str:
        return f"<LinalgNamespace of {self._xp!r}>"

    # -- helpers -------------------------------------------------------------------------------
    def _float(self, op: str, x: Array) -> Array:
        """``x`` checked, in a floating dtype (integers and bools: the default float)."""
        xp = self._xp
        xp._check(op, x)
        return x if x.dtype.kind == "f" else xp._backend.astype(x, xp._default_float())

    def _pair(self, op: str, x1: Array, x2: Array) -> tuple[Array, Array]:
        """Two arrays in their promoted dtype (one the device has)."""
        xp = self._xp
        xp._check(op, x1, x2)
        dt = xp._dtype(np.result_type(x1.dtype, x2.dtype), op)
        return xp._cast(x1, dt), xp._cast(x2, dt)

    def _on_host(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """arraycore's ``linalg.<name>``: checked arguments, then NumPy on the host path."""
        xp = self._xp
        a, k = PREPARE[name](xp, *args, **kwargs)
        # an rtol array is a keyword argument: copied here (run copies the positional ones)
        k = {key: _host.to_host(xp, v) if xp._is_array(v) else v for key, v in k.items()}
        return call(f"linalg.{name}", _host.run, xp, HOST[name], *a, **k)

    def _largest(self, op: str, a: Array, axis: Any, keepdims: builtins.bool) -> Array:
        """The maximum of the non-negative ``a`` along ``axis``: 0 over an empty axis."""
        axes = normalize_axes(axis, len(a.shape), op)
        if any(a.shape[ax] == 0 for ax in axes):
            return self._xp.sum(a, axis=axes, keepdims=keepdims)
        return self._xp.max(a, axis=axes, keepdims=keepdims)

    def _smallest(self, op: str, a: Array, axis: Any, keepdims: builtins.bool, order: Any) -> Array:
        """The minimum of ``a`` along ``axis``; over an empty axis a ValueError (as NumPy)."""
        axes = normalize_axes(axis, len(a.shape), op)
        if any(a.shape[ax] == 0 for ax in axes):
            raise ValueError(
                f"{op}: ord={order!r} is a minimum, which an empty axis does not have "
                f"(a reduction over shape {tuple(a.shape)})"
            )
        return self._xp.min(a, axis=axes, keepdims=keepdims)

    # -- the main namespace's functions ----------------------------------------------------------
    def matmul(self, x1: Array, x2: Array, /) -> Array:
        """Matrix product (the main namespace's ``matmul``)."""
        return self._xp.matmul(x1, x2)

    def tensordot(self, x1: Array, x2: Array, /, *, axes: Any = 2) -> Array:
        """Tensor contraction (the main namespace's ``tensordot``)."""
        return self._xp.tensordot(x1, x2, axes=axes)

    def vecdot(self, x1: Array, x2: Array, /, *, axis: int = -1) -> Array:
        """Dot product along ``axis`` (the main namespace's ``vecdot``)."""
        return self._xp.vecdot(x1, x2, axis=axis)

    def matrix_transpose(self, x: Array, /) -> Array:
        """The last two axes swapped (the main namespace's ``matrix_transpose``)."""
        return self._xp.matrix_transpose(x)

    # -- on the device ---------------------------------------------------------------------------
    def outer(self, x1: Array, x2: Array, /) -> Array:
        """The outer product of two 1-D arrays: ``x1[i] * x2[j]`` (promoted dtype)."""
        xp = self._xp
        xp._check("linalg.outer", x1, x2)
        if len(x1.shape) != 1 or len(x2.shape) != 1:
            raise ValueError(
                f"linalg.outer: x1 and x2 must be 1-D, got shapes {tuple(x1.shape)} and "
                f"{tuple(x2.shape)}"
            )
        column = xp._backend.reshape(x1, (x1.shape[0], 1))
        return xp.multiply(column, x2)

    def diagonal(self, x: Array, /, *, offset: int = 0) -> Array:
        """The ``offset`` diagonal of each matrix in the last two axes (a new array)."""
        xp = self._xp
        xp._check("linalg.diagonal", x)
        _matrices("linalg.diagonal", x)
        offset = operator.index(offset)
        rows, cols = x.shape[-2:]
        start_row, start_col = max(-offset, 0), max(offset, 0)
        length = max(0, min(rows - start_row, cols - start_col))
        batch = tuple(x.shape[:-2])
        flat = xp._backend.reshape(x, (*batch, rows * cols))
        first = start_row * cols + start_col
        positions = xp.arange(first, first + length * (cols + 1), cols + 1, dtype=np.int64)
        return xp._backend.take(flat, positions, len(batch))

    def trace(self, x: Array, /, *, offset: int = 0, dtype: Any = None) -> Array:
        """The sum of the ``offset`` diagonal of each matrix (the dtype rule of ``sum``)."""
        return self._xp.sum(self.diagonal(x, offset=offset), axis=-1, dtype=dtype)

    def cross(self, x1: Array, x2: Array, /, *, axis: int = -1) -> Array:
        """The cross product of 3-element vectors along ``axis`` (the other axes broadcast)."""
        xp = self._xp
        a, b = self._pair("linalg.cross", x1, x2)
        if len(a.shape) == 0 or len(b.shape) == 0:
            raise ValueError("linalg.cross: x1 and x2 must have at least one dimension")
        shape = np.broadcast_shapes(tuple(a.shape), tuple(b.shape))
        (ax,) = normalize_axes(axis, len(shape), "linalg.cross")
        back = ax - len(shape)  # the standard counts the axis from the end
        if -back > min(len(a.shape), len(b.shape)) or a.shape[back] != 3 or b.shape[back] != 3:
            raise ValueError(
                f"linalg.cross: axis {axis} must have size 3 in x1 {tuple(a.shape)} and x2 "
                f"{tuple(b.shape)}"
            )
        a, b = xp._backend.broadcast_to(a, shape), xp._backend.broadcast_to(b, shape)

        def part(v: Array, i: int) -> Array:
            key = (*([slice(None)] * ax), slice(i, i + 1), *([slice(None)] * (len(shape) - ax - 1)))
            return xp._backend.getitem(v, key)

        (a0, a1, a2), (b0, b1, b2) = ([part(v, i) for i in range(3)] for v in (a, b))
        parts = [
            xp.subtract(xp.multiply(a1, b2), xp.multiply(a2, b1)),
            xp.subtract(xp.multiply(a2, b0), xp.multiply(a0, b2)),
            xp.subtract(xp.multiply(a0, b1), xp.multiply(a1, b0)),
        ]
        return xp.concat(parts, axis=ax)

    def vector_norm(
        self,
        x: Array,
        /,
        *,
        axis: Any = None,
        keepdims: builtins.bool = False,
        ord: Any = 2,  # noqa: A002 - the standard's name
    ) -> Array:
        """The ``ord``-norm of the vectors along ``axis`` (all elements by default): 2, 1, any
        p (negative too), ``inf`` (largest magnitude; 0 for no elements), ``-inf`` (smallest)
        or 0 (number of non-zeros)."""
        op = "linalg.vector_norm"
        xp = self._xp
        x = self._float(op, x)
        axes = normalize_axes(axis, len(x.shape), op)
        if isinstance(ord, str) or not isinstance(ord, int | float | np.integer | np.floating):
            raise ValueError(f"{op}: ord must be a number (inf and -inf included), got {ord!r}")
        if axis is not None and not isinstance(axis, int | np.integer) and len(axes) == 0:
            # no axis reduced: the norm of each element alone (NumPy's answer)
            return xp.astype(xp.not_equal(x, 0), x.dtype) if ord == 0 else xp.abs(x)
        magnitude = xp.abs(x)
        reduce: dict[str, Any] = {"axis": axes, "keepdims": keepdims}
        if ord == _INF:
            return self._largest(op, magnitude, axes, keepdims)
        if ord == -_INF:
            return self._smallest(op, magnitude, axes, keepdims, ord)
        if ord == 0:
            return xp.astype(xp.count_nonzero(x, **reduce), x.dtype)
        if ord == 1:
            return xp.sum(magnitude, **reduce)
        if ord == 2:
            return xp.sqrt(xp.sum(xp.multiply(x, x), **reduce))
        p = float(ord)
        return xp.pow(xp.sum(xp.pow(magnitude, p), **reduce), 1.0 / p)

    def matrix_norm(
        self,
        x: Array,
        /,
        *,
        keepdims: builtins.bool = False,
        ord: Any = "fro",  # noqa: A002
    ) -> Array:
        """The ``ord``-norm of each matrix in the last two axes: ``"fro"``, ``"nuc"``, 1, -1,
        2, -2, ``inf``, ``-inf`` (NumPy's meanings; the maxima are 0 for empty matrices)."""
        op = "linalg.matrix_norm"
        xp = self._xp
        x = self._float(op, x)
        _matrices(op, x)
        if ord == "fro":
            return xp.sqrt(xp.sum(xp.multiply(x, x), axis=(-2, -1), keepdims=keepdims))
        if ord in ("nuc", 2, -2) and not isinstance(ord, builtins.bool):
            if x.dtype == np.float16:
                raise TypeError(f"{op}: ord={ord!r} needs svdvals, which has no float16")
            s = self.svdvals(x)
            if ord == "nuc":
                found = xp.sum(s, axis=-1)
            elif ord == 2:
                found = self._largest(op, s, -1, False)
            else:
                found = self._smallest(op, s, -1, False, ord)
        elif ord in (1, -1, _INF, -_INF) and not isinstance(ord, builtins.bool):
            along = -2 if ord in (1, -1) else -1  # column sums for 1, row sums for inf
            sums = xp.sum(xp.abs(x), axis=along)
            if ord > 0:
                found = self._largest(op, sums, -1, False)
            else:
                found = self._smallest(op, sums, -1, False, ord)
        else:
            raise ValueError(
                f"{op}: ord must be 'fro', 'nuc', 1, -1, 2, -2, inf or -inf, got {ord!r}"
            )
        if keepdims:
            found = xp._backend.reshape(found, (*found.shape, 1, 1))
        return found

    def matrix_power(self, x: Array, n: int, /) -> Array:
        """``x`` multiplied by itself ``n`` times (``n < 0``: the inverse's power; 0: identity).

        Repeated squaring: about ``2 log2(n)`` matrix products on the device."""
        xp = self._xp
        xp._check("linalg.matrix_power", x)
        check_square("linalg.matrix_power", x)
        n = operator.index(n)
        if n == 0:
            eye = xp.eye(x.shape[-1], dtype=x.dtype)
            return xp._backend.astype(xp._backend.broadcast_to(eye, tuple(x.shape)), x.dtype)
        base = self.inv(x) if n < 0 else x
        result = None
        n = abs(n)
        while n:
            if n & 1:
                result = base if result is None else xp.matmul(result, base)
            n >>= 1
            if n:
                base = xp.matmul(base, base)
        assert result is not None
        return result if result is not x else xp._backend.astype(x, x.dtype)

    @_host.host_function("linalg.cholesky")
    def cholesky(self, x: Array, /, *, upper: builtins.bool = False) -> Array:
        """The Cholesky factor of each symmetric positive-definite matrix: lower (``x = L L^T``,
        from the lower triangle) or upper (``x = U^T U``, from the upper triangle).

        Matrices up to :data:`CHOLESKY_ON_DEVICE` wide on the device (:func:`device_cholesky`),
        larger ones on the host path. A matrix that is not positive definite is a
        ``numpy.linalg.LinAlgError``."""
        xp = self._xp
        (a,), kwargs = PREPARE["cholesky"](xp, x, upper=upper)
        if a.shape[-1] <= CHOLESKY_ON_DEVICE:
            return device_cholesky(xp, a, kwargs["upper"])
        return call("linalg.cholesky", _host.run, xp, HOST["cholesky"], a, **kwargs)

    # -- on the host path ------------------------------------------------------------------------
    @_host.host_function("linalg.det")
    def det(self, x: Array, /) -> Array:
        """The determinant of each square matrix (runs on the host path)."""
        return self._on_host("det", x)

    @_host.host_function("linalg.eigh")
    def eigh(self, x: Array, /) -> EighResult:
        """``(eigenvalues, eigenvectors)`` of each symmetric matrix (from its lower triangle),
        eigenvalues ascending (runs on the host path)."""
        result: EighResult = self._on_host("eigh", x)
        return result

    @_host.host_function("linalg.eigvalsh")
    def eigvalsh(self, x: Array, /) -> Array:
        """The eigenvalues of each symmetric matrix, ascending (runs on the host path)."""
        return self._on_host("eigvalsh", x)

    @_host.host_function("linalg.inv")
    def inv(self, x: Array, /) -> Array:
        """The inverse of each square matrix (runs on the host path)."""
        return self._on_host("inv", x)

    @_host.host_function("linalg.pinv")
    def pinv(self, x: Array, /, *, rtol: Any = None) -> Array:
        """The Moore-Penrose pseudo-inverse; singular values up to ``rtol`` times the largest
        count as zero (default: ``max(M, N) * eps``). Runs on the host path."""
        return self._on_host("pinv", x, rtol=rtol)

    @_host.host_function("linalg.matrix_rank")
    def matrix_rank(self, x: Array, /, *, rtol: Any = None) -> Array:
        """The rank (int64) of each matrix: singular values above ``rtol`` times the largest
        (default: ``max(M, N) * eps``). Runs on the host path."""
        return self._on_host("matrix_rank", x, rtol=rtol)

    @_host.host_function("linalg.qr")
    def qr(self, x: Array, /, *, mode: str = "reduced") -> QRResult:
        """``(Q, R)`` of each matrix (``mode="reduced"`` or ``"complete"``); runs on the host
        path."""
        result: QRResult = self._on_host("qr", x, mode=mode)
        return result

    @_host.host_function("linalg.slogdet")
    def slogdet(self, x: Array, /) -> SlogdetResult:
        """``(sign, logabsdet)`` of the determinant of each square matrix (runs on the host
        path)."""
        result: SlogdetResult = self._on_host("slogdet", x)
        return result

    @_host.host_function("linalg.solve")
    def solve(self, x1: Array, x2: Array, /) -> Array:
        """The solution ``X`` of ``x1 @ X = x2`` (``x2`` 1-D: one vector; else stacks of
        matrices, batch axes broadcast). Runs on the host path."""
        return self._on_host("solve", x1, x2)

    @_host.host_function("linalg.svd")
    def svd(self, x: Array, /, *, full_matrices: builtins.bool = True) -> SVDResult:
        """``(U, S, Vh)`` of each matrix, singular values descending (runs on the host path)."""
        result: SVDResult = self._on_host("svd", x, full_matrices=full_matrices)
        return result

    @_host.host_function("linalg.svdvals")
    def svdvals(self, x: Array, /) -> Array:
        """The singular values of each matrix, descending (runs on the host path)."""
        return self._on_host("svdvals", x)
