"""The ``linalg`` extension of the Array API standard (``xp.linalg``).

What is built from the primitives runs on every backend's device: ``matmul``, ``tensordot``,
``vecdot``, ``matrix_transpose`` (the main namespace's), ``outer``, ``trace``, ``diagonal``,
``cross``, ``vector_norm``, ``matrix_norm`` (but ``"nuc"``, 2 and -2, which need singular
values) and ``matrix_power`` (repeated squaring; negative powers need ``inv``). The
decompositions and solvers (``cholesky``, ``det``, ``eigh``, ``eigvalsh``, ``inv``, ``pinv``,
``qr``, ``slogdet``, ``solve``, ``svd``, ``svdvals``, ``matrix_rank``) run on the host path in
arraycore's derived version (two copies and a wait; listed by ``arraycore info``): the NumPy
backend binds ``numpy.linalg`` and the CUDA backend CuPy's cuSOLVER-backed ``cupy.linalg``.

Integer and bool input computes in the default floating dtype (as NumPy's ``linalg`` does);
float16 is refused by the host-path functions (NumPy's ``linalg`` has no float16 routines).
"""

from __future__ import annotations

import builtins
import math
import operator
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from . import _host
from .backend import Array, normalize_axes

if TYPE_CHECKING:
    from ._namespace import Namespace

_INF = math.inf


class EighResult(NamedTuple):
    eigenvalues: Any
    eigenvectors: Any


class QRResult(NamedTuple):
    Q: Any
    R: Any


class SlogdetResult(NamedTuple):
    sign: Any
    logabsdet: Any


class SVDResult(NamedTuple):
    U: Any
    S: Any
    Vh: Any


def _square(op: str, x: Array) -> None:
    if len(x.shape) < 2 or x.shape[-1] != x.shape[-2]:
        raise ValueError(f"{op}: x must be a stack of square matrices, got shape {x.shape}")


def _matrices(op: str, x: Array) -> None:
    if len(x.shape) < 2:
        raise ValueError(f"{op}: x must have at least 2 dimensions, got shape {x.shape}")


def _host_eigh(a: np.ndarray) -> EighResult:
    return EighResult(*np.linalg.eigh(a))


def _host_qr(a: np.ndarray, mode: str) -> QRResult:
    q, r = np.linalg.qr(a, mode=mode)  # type: ignore[call-overload]
    return QRResult(q, r)


def _host_slogdet(a: np.ndarray) -> SlogdetResult:
    return SlogdetResult(*np.linalg.slogdet(a))


def _host_svd(a: np.ndarray, full_matrices: bool) -> SVDResult:
    return SVDResult(*np.linalg.svd(a, full_matrices=full_matrices))


def _default_rtol(x: Array) -> float:
    return float(max(x.shape[-2:]) * float(np.finfo(x.dtype).eps))


def _host_pinv(a: np.ndarray, rtol: Any) -> np.ndarray:
    result: np.ndarray = np.linalg.pinv(a, rtol=rtol)
    return result


def _host_rank(a: np.ndarray, rtol: Any) -> np.ndarray:
    if a.shape[-2] == 0 or a.shape[-1] == 0:
        return np.zeros(a.shape[:-2], dtype=np.int64)
    s = np.linalg.svd(a, compute_uv=False)
    tol = np.max(s, axis=-1, keepdims=True) * np.asarray(rtol)[..., None]
    rank: np.ndarray = np.count_nonzero(s > tol, axis=-1).astype(np.int64)
    return rank


class LinalgNamespace:
    """The standard's ``linalg`` extension (``xp.linalg``): see the module docstring."""

    def __init__(self, xp: Namespace) -> None:
        self._xp = xp

    def __repr__(self) -> str:
        return f"<LinalgNamespace of {self._xp!r}>"

    # -- helpers -------------------------------------------------------------------------------
    def _float(self, op: str, x: Array, *, host: builtins.bool = False) -> Array:
        """``x`` checked, in a floating dtype (integers and bools: the default float)."""
        xp = self._xp
        xp._check(op, x)
        if x.dtype.kind != "f":
            return xp._backend.astype(x, xp._default_float())
        if host and x.dtype == np.float16:
            raise TypeError(f"{op}: float16 is not supported (NumPy's linalg has no float16)")
        return x

    def _pair(self, op: str, x1: Array, x2: Array) -> tuple[Array, Array]:
        """Two arrays in their promoted dtype (one the device has)."""
        xp = self._xp
        xp._check(op, x1, x2)
        dt = xp._dtype(np.result_type(x1.dtype, x2.dtype), op)
        return xp._cast(x1, dt), xp._cast(x2, dt)

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
        """The outer product of two 1-D arrays: ``x1[i] * x2[j]``."""
        xp = self._xp
        xp._check("linalg.outer", x1, x2)
        if len(x1.shape) != 1 or len(x2.shape) != 1:
            raise ValueError(
                f"linalg.outer: x1 and x2 must be 1-D, got shapes {x1.shape} and {x2.shape}"
            )
        column = xp._backend.reshape(x1, (x1.shape[0], 1))
        return xp.multiply(column, x2)

    def diagonal(self, x: Array, /, *, offset: int = 0) -> Array:
        """The ``offset`` diagonal of each matrix in the last two axes."""
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
        """The cross product of 3-element vectors along ``axis`` (broadcast together)."""
        xp = self._xp
        a, b = self._pair("linalg.cross", x1, x2)
        if len(a.shape) == 0 or len(b.shape) == 0:
            raise ValueError("linalg.cross: x1 and x2 must have at least one dimension")
        shape = np.broadcast_shapes(tuple(a.shape), tuple(b.shape))
        (ax,) = normalize_axes(axis, len(shape), "linalg.cross")
        if shape[ax] != 3 or a.shape[ax - len(shape)] != 3 or b.shape[ax - len(shape)] != 3:
            raise ValueError(
                f"linalg.cross: axis {axis} must have size 3 in x1 {a.shape} and x2 {b.shape}"
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
        p, ``inf`` (largest magnitude), ``-inf`` (smallest) or 0 (number of non-zeros)."""
        xp = self._xp
        x = self._float("linalg.vector_norm", x)
        axes = normalize_axes(axis, len(x.shape), "linalg.vector_norm")
        if axis is not None and not isinstance(axis, int | np.integer) and len(axes) == 0:
            return xp.abs(x)
        magnitude = xp.abs(x)
        reduce: dict[str, Any] = {"axis": axes, "keepdims": keepdims}
        if ord == _INF:
            return xp.max(magnitude, **reduce)
        if ord == -_INF:
            return xp.min(magnitude, **reduce)
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
        2, -2, ``inf``, ``-inf`` (NumPy's meanings)."""
        xp = self._xp
        x = self._float("linalg.matrix_norm", x)
        _matrices("linalg.matrix_norm", x)
        if ord == "fro":
            return xp.sqrt(xp.sum(xp.multiply(x, x), axis=(-2, -1), keepdims=keepdims))
        if ord in ("nuc", 2, -2):
            s = self.svdvals(x)
            found = {"nuc": xp.sum, 2: xp.max, -2: xp.min}[ord](s, axis=-1)
        elif ord in (1, -1, _INF, -_INF):
            along = -2 if ord in (1, -1) else -1  # column sums for 1, row sums for inf
            sums = xp.sum(xp.abs(x), axis=along)
            found = (xp.max if ord in (1, _INF) else xp.min)(sums, axis=-1)
        else:
            raise ValueError(
                f"linalg.matrix_norm: ord must be 'fro', 'nuc', 1, -1, 2, -2, inf or -inf, "
                f"got {ord!r}"
            )
        if keepdims:
            found = xp._backend.reshape(found, (*found.shape, 1, 1))
        return found

    def matrix_power(self, x: Array, n: int, /) -> Array:
        """``x`` multiplied by itself ``n`` times (``n < 0``: the inverse's power; 0: identity)."""
        xp = self._xp
        xp._check("linalg.matrix_power", x)
        _square("linalg.matrix_power", x)
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

    # -- on the host path ------------------------------------------------------------------------
    @_host.host_function("linalg.cholesky")
    def cholesky(self, x: Array, /, *, upper: builtins.bool = False) -> Array:
        """The Cholesky factor of each symmetric positive-definite matrix (lower, or upper)."""
        x = self._float("linalg.cholesky", x, host=True)
        _square("linalg.cholesky", x)
        return _host.run(self._xp, np.linalg.cholesky, x, upper=bool(upper))

    @_host.host_function("linalg.det")
    def det(self, x: Array, /) -> Array:
        """The determinant of each square matrix."""
        x = self._float("linalg.det", x, host=True)
        _square("linalg.det", x)
        return _host.run(self._xp, np.linalg.det, x)

    @_host.host_function("linalg.eigh")
    def eigh(self, x: Array, /) -> EighResult:
        """``(eigenvalues, eigenvectors)`` of each symmetric matrix, eigenvalues ascending."""
        x = self._float("linalg.eigh", x, host=True)
        _square("linalg.eigh", x)
        result: EighResult = _host.run(self._xp, _host_eigh, x)
        return result

    @_host.host_function("linalg.eigvalsh")
    def eigvalsh(self, x: Array, /) -> Array:
        """The eigenvalues of each symmetric matrix, ascending."""
        x = self._float("linalg.eigvalsh", x, host=True)
        _square("linalg.eigvalsh", x)
        return _host.run(self._xp, np.linalg.eigvalsh, x)

    @_host.host_function("linalg.inv")
    def inv(self, x: Array, /) -> Array:
        """The inverse of each square matrix."""
        x = self._float("linalg.inv", x, host=True)
        _square("linalg.inv", x)
        return _host.run(self._xp, np.linalg.inv, x)

    @_host.host_function("linalg.pinv")
    def pinv(self, x: Array, /, *, rtol: Any = None) -> Array:
        """The Moore-Penrose pseudo-inverse; singular values below ``rtol`` times the largest
        count as zero (default: ``max(M, N) * eps``)."""
        x = self._float("linalg.pinv", x, host=True)
        _matrices("linalg.pinv", x)
        tol = _default_rtol(x) if rtol is None else rtol
        return _host.run(self._xp, _host_pinv, x, self._host_rtol(tol))

    @_host.host_function("linalg.matrix_rank")
    def matrix_rank(self, x: Array, /, *, rtol: Any = None) -> Array:
        """The rank (int64) of each matrix: singular values above ``rtol`` times the largest
        (default: ``max(M, N) * eps``)."""
        x = self._float("linalg.matrix_rank", x, host=True)
        _matrices("linalg.matrix_rank", x)
        tol = _default_rtol(x) if rtol is None else rtol
        return _host.run(self._xp, _host_rank, x, self._host_rtol(tol))

    def _host_rtol(self, rtol: Any) -> Any:
        return self._xp.to_numpy(rtol) if self._xp._is_array(rtol) else rtol

    @_host.host_function("linalg.qr")
    def qr(self, x: Array, /, *, mode: str = "reduced") -> QRResult:
        """``(Q, R)`` of each matrix (``mode="reduced"`` or ``"complete"``)."""
        x = self._float("linalg.qr", x, host=True)
        _matrices("linalg.qr", x)
        if mode not in ("reduced", "complete"):
            raise ValueError(f"linalg.qr: mode must be 'reduced' or 'complete', got {mode!r}")
        result: QRResult = _host.run(self._xp, _host_qr, x, mode=mode)
        return result

    @_host.host_function("linalg.slogdet")
    def slogdet(self, x: Array, /) -> SlogdetResult:
        """``(sign, logabsdet)`` of the determinant of each square matrix."""
        x = self._float("linalg.slogdet", x, host=True)
        _square("linalg.slogdet", x)
        result: SlogdetResult = _host.run(self._xp, _host_slogdet, x)
        return result

    @_host.host_function("linalg.solve")
    def solve(self, x1: Array, x2: Array, /) -> Array:
        """The solution ``X`` of ``x1 @ X = x2`` (``x2`` 1-D: one vector; else stacks of
        matrices, batch axes broadcast)."""
        xp = self._xp
        a, b = self._pair("linalg.solve", x1, x2)
        a, b = self._float("linalg.solve", a, host=True), self._float("linalg.solve", b, host=True)
        _square("linalg.solve", a)
        rows = b.shape[0] if len(b.shape) == 1 else b.shape[-2] if len(b.shape) >= 2 else -1
        if rows != a.shape[-1]:
            raise ValueError(
                f"linalg.solve: x2 of shape {b.shape} does not match x1 of shape {a.shape}"
            )
        return _host.run(xp, np.linalg.solve, a, b)

    @_host.host_function("linalg.svd")
    def svd(self, x: Array, /, *, full_matrices: builtins.bool = True) -> SVDResult:
        """``(U, S, Vh)`` of each matrix, singular values descending."""
        x = self._float("linalg.svd", x, host=True)
        _matrices("linalg.svd", x)
        result: SVDResult = _host.run(self._xp, _host_svd, x, full_matrices=bool(full_matrices))
        return result

    @_host.host_function("linalg.svdvals")
    def svdvals(self, x: Array, /) -> Array:
        """The singular values of each matrix, descending."""
        x = self._float("linalg.svdvals", x, host=True)
        _matrices("linalg.svdvals", x)
        return _host.run(self._xp, np.linalg.svdvals, x)
