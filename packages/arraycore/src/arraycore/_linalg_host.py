"""The decompositions and solvers of ``xp.linalg``: their argument checks, shared by arraycore's
own versions and by every backend's overrides, and their NumPy kernels.

Each function of :data:`PREPARE` takes the user's arguments (the standard's signature) and
returns them checked and normalised, ``(args, kwargs)``; what a kernel then receives:

- ``x`` (``x1``, ``x2`` of ``solve``): arrays of the namespace's backend and device, float32 or
  float64. Integer and bool input is converted to the default floating dtype (float64, float32
  on a device without it), as NumPy's ``linalg`` does; float16 is a ``TypeError`` (NumPy's and
  CuPy's ``linalg`` have no float16 routines). Shapes are checked: ``(..., M, M)`` for
  ``cholesky``, ``det``, ``eigh``, ``eigvalsh``, ``inv``, ``slogdet``, ``solve``'s ``x1``;
  at least 2-D for the others. A bad one is a ``ValueError`` naming the function and the shape;
- ``solve``: ``x1`` and ``x2`` in one dtype; ``x2`` 1-D of length ``M`` (one vector) or
  ``(..., M, K)`` with batch axes that broadcast with ``x1``'s;
- ``pinv``, ``matrix_rank``: ``rtol=`` a Python float (the standard's default
  ``max(M, N) * eps`` filled in) or an array of the backend in ``x``'s dtype whose shape
  broadcasts to ``x.shape[:-2]``;
- ``cholesky``'s ``upper=``, ``svd``'s ``full_matrices=``: Python bools; ``qr``'s ``mode=``:
  ``"reduced"`` or ``"complete"``.

arraycore's derived functions (:class:`arraycore._linalg.LinalgNamespace`) run the kernels of
:data:`HOST` on the host path (:mod:`arraycore._host`); the NumPy backend binds those same
kernels as its overrides (its arrays are host arrays: no copies). :data:`GUARDS` puts the
checks in front of every backend's ``linalg.<name>`` override (it is part of
:data:`arraycore._checks.GUARDS`), and a ``numpy.linalg.LinAlgError`` (a singular matrix, one
that is not positive definite) is raised again with the function's name in front.
"""

from __future__ import annotations

import builtins
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from .backend import Array

if TYPE_CHECKING:
    from ._base import NamespaceBase

_F16 = np.dtype("float16")
Prepared = tuple[tuple[Any, ...], dict[str, Any]]


class EighResult(NamedTuple):
    """``linalg.eigh``: eigenvalues (ascending) and eigenvectors (the columns)."""

    eigenvalues: Any
    eigenvectors: Any


class QRResult(NamedTuple):
    """``linalg.qr``: ``Q`` (orthonormal columns) and ``R`` (upper triangular)."""

    Q: Any
    R: Any


class SlogdetResult(NamedTuple):
    """``linalg.slogdet``: the sign of the determinant and the log of its absolute value."""

    sign: Any
    logabsdet: Any


class SVDResult(NamedTuple):
    """``linalg.svd``: ``U``, the singular values ``S`` (descending) and ``Vh``."""

    U: Any
    S: Any
    Vh: Any


# -- checks -------------------------------------------------------------------------------------
def floating(xp: NamespaceBase, op: str, x: Any) -> Array:
    """``x``, an array of ``xp``, in float32 or float64 (integers, bools: the default float)."""
    xp._check(op, x)
    if x.dtype.kind != "f":
        return xp._backend.astype(x, xp._default_float())
    if x.dtype == _F16:
        raise TypeError(
            f"{op}: float16 is not supported (NumPy's and CuPy's linalg have no float16 "
            f"routines); convert with astype(x, float32)"
        )
    return x


def matrices(xp: NamespaceBase, op: str, x: Any) -> Array:
    """``x`` as :func:`floating`, and at least 2-D."""
    x = floating(xp, op, x)
    if len(x.shape) < 2:
        raise ValueError(f"{op}: x must have at least 2 dimensions, got shape {tuple(x.shape)}")
    return x


def check_square(op: str, x: Array) -> None:
    """A ``ValueError`` naming ``op`` unless ``x`` is a stack of square matrices."""
    if len(x.shape) < 2 or x.shape[-1] != x.shape[-2]:
        raise ValueError(f"{op}: x must be a stack of square matrices, got shape {tuple(x.shape)}")


def square(xp: NamespaceBase, op: str, x: Any) -> Array:
    """``x`` as :func:`floating`, and a stack of square matrices."""
    x = floating(xp, op, x)
    check_square(op, x)
    return x


def rtol_for(xp: NamespaceBase, op: str, x: Array, rtol: Any) -> Any:
    """``rtol`` of ``pinv``/``matrix_rank`` for ``x``: the default ``max(M, N) * eps``, a Python
    float, or an array of ``xp`` in ``x``'s dtype that broadcasts to ``x.shape[:-2]``."""
    if rtol is None:
        return float(max(x.shape[-2:]) * np.finfo(x.dtype).eps)
    if isinstance(rtol, builtins.bool):
        raise TypeError(f"{op}: rtol must be a float or an array, got {rtol!r}")
    if isinstance(rtol, int | float | np.integer | np.floating) and not xp._is_array(rtol):
        return float(rtol)
    xp._check(op, rtol)
    if rtol.dtype.kind not in "iuf":
        raise TypeError(f"{op}: rtol must be a real floating array, got {rtol.dtype}")
    batch = tuple(x.shape[:-2])
    try:
        fits = np.broadcast_shapes(tuple(rtol.shape), batch) == batch
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(
            f"{op}: rtol of shape {tuple(rtol.shape)} does not broadcast to the batch shape "
            f"{batch} of x {tuple(x.shape)}"
        )
    return xp._cast(rtol, x.dtype)


# -- argument preparation, one function per name (the standard's signatures after xp) -----------
def _one_square(name: str) -> Callable[..., Prepared]:
    op = f"linalg.{name}"

    def prepare(xp: NamespaceBase, x: Any, /) -> Prepared:
        return (square(xp, op, x),), {}

    return prepare


def _one_matrix(name: str) -> Callable[..., Prepared]:
    op = f"linalg.{name}"

    def prepare(xp: NamespaceBase, x: Any, /) -> Prepared:
        return (matrices(xp, op, x),), {}

    return prepare


def _with_rtol(name: str) -> Callable[..., Prepared]:
    op = f"linalg.{name}"

    def prepare(xp: NamespaceBase, x: Any, /, *, rtol: Any = None) -> Prepared:
        x = matrices(xp, op, x)
        return (x,), {"rtol": rtol_for(xp, op, x, rtol)}

    return prepare


def prepare_cholesky(xp: NamespaceBase, x: Any, /, *, upper: builtins.bool = False) -> Prepared:
    return (square(xp, "linalg.cholesky", x),), {"upper": builtins.bool(upper)}


def prepare_qr(xp: NamespaceBase, x: Any, /, *, mode: str = "reduced") -> Prepared:
    x = matrices(xp, "linalg.qr", x)
    if mode not in ("reduced", "complete"):
        raise ValueError(f"linalg.qr: mode must be 'reduced' or 'complete', got {mode!r}")
    return (x,), {"mode": mode}


def prepare_svd(xp: NamespaceBase, x: Any, /, *, full_matrices: builtins.bool = True) -> Prepared:
    return (matrices(xp, "linalg.svd", x),), {"full_matrices": builtins.bool(full_matrices)}


def prepare_solve(xp: NamespaceBase, x1: Any, x2: Any, /) -> Prepared:
    op = "linalg.solve"
    a, b = floating(xp, op, x1), floating(xp, op, x2)
    dt = np.result_type(a.dtype, b.dtype)
    a, b = xp._cast(a, dt), xp._cast(b, dt)
    check_square(op, a)
    a_shape, b_shape = tuple(a.shape), tuple(b.shape)
    if len(b_shape) == 1:
        fits = b_shape[0] == a_shape[-1]
    elif len(b_shape) >= 2 and b_shape[-2] == a_shape[-1]:
        try:
            np.broadcast_shapes(a_shape[:-2], b_shape[:-2])
            fits = True
        except ValueError:
            fits = False
    else:
        fits = False
    if not fits:
        raise ValueError(
            f"{op}: x2 of shape {b_shape} does not fit x1 of shape {a_shape} (x2 must be "
            f"({a_shape[-1]},) or (..., {a_shape[-1]}, K) with batch axes that broadcast)"
        )
    return (a, b), {}


#: ``{name: prepare}`` for the decompositions and solvers (see the module docstring).
PREPARE: dict[str, Callable[..., Prepared]] = {
    "cholesky": prepare_cholesky,
    "det": _one_square("det"),
    "eigh": _one_square("eigh"),
    "eigvalsh": _one_square("eigvalsh"),
    "inv": _one_square("inv"),
    "matrix_rank": _with_rtol("matrix_rank"),
    "pinv": _with_rtol("pinv"),
    "qr": prepare_qr,
    "slogdet": _one_square("slogdet"),
    "solve": prepare_solve,
    "svd": prepare_svd,
    "svdvals": _one_matrix("svdvals"),
}


def call(op: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``; a ``LinAlgError`` is raised again with ``op`` in front."""
    try:
        return fn(*args, **kwargs)
    except np.linalg.LinAlgError as exc:
        if str(exc).startswith(op):
            raise
        raise np.linalg.LinAlgError(f"{op}: {exc}") from exc


# -- the NumPy kernels (host path; the NumPy backend's overrides) --------------------------------
def host_cholesky(a: np.ndarray, /, *, upper: builtins.bool = False) -> np.ndarray:
    """The lower (or upper) Cholesky factor of each matrix (``numpy.linalg.cholesky``)."""
    result: np.ndarray = np.linalg.cholesky(a, upper=upper)
    return result


def host_eigh(a: np.ndarray, /) -> EighResult:
    """``EighResult(eigenvalues, eigenvectors)`` (``numpy.linalg.eigh``, lower triangle)."""
    return EighResult(*np.linalg.eigh(a))


def host_matrix_rank(a: np.ndarray, /, rtol: Any = None) -> np.ndarray:
    """The rank (int64): singular values above ``rtol`` times the largest (0 if empty)."""
    if a.shape[-2] == 0 or a.shape[-1] == 0:
        return np.zeros(a.shape[:-2], dtype=np.int64)
    s = np.linalg.svd(a, compute_uv=False)
    tol = np.max(s, axis=-1, keepdims=True) * np.asarray(rtol, dtype=s.dtype)[..., None]
    rank: np.ndarray = np.count_nonzero(s > tol, axis=-1).astype(np.int64)
    return rank


def host_pinv(a: np.ndarray, /, rtol: Any = None) -> np.ndarray:
    """The pseudo-inverse (``numpy.linalg.pinv`` with the standard's ``rtol``)."""
    result: np.ndarray = np.linalg.pinv(a, rtol=rtol)
    return result


def host_qr(a: np.ndarray, /, *, mode: str = "reduced") -> QRResult:
    """``QRResult(Q, R)`` (``numpy.linalg.qr``, ``mode`` "reduced" or "complete")."""
    q, r = np.linalg.qr(a, mode=mode)  # type: ignore[call-overload]
    return QRResult(q, r)


def host_slogdet(a: np.ndarray, /) -> SlogdetResult:
    """``SlogdetResult(sign, logabsdet)`` (``numpy.linalg.slogdet``)."""
    return SlogdetResult(*np.linalg.slogdet(a))


def host_solve(a: np.ndarray, b: np.ndarray, /) -> np.ndarray:
    """``X`` of ``a @ X = b``: a 1-D ``b`` is one vector, else stacks of matrices."""
    # A 1-D b is one vector for every matrix of a (NumPy 2's rule and the standard's); the
    # explicit column keeps that true whatever NumPy decides for (..., M) right-hand sides.
    if b.ndim == 1:
        return np.linalg.solve(a, b[:, None])[..., 0]
    result: np.ndarray = np.linalg.solve(a, b)
    return result


def host_svd(a: np.ndarray, /, *, full_matrices: builtins.bool = True) -> SVDResult:
    """``SVDResult(U, S, Vh)`` (``numpy.linalg.svd``)."""
    return SVDResult(*np.linalg.svd(a, full_matrices=full_matrices))


#: ``{name: NumPy kernel}``: what arraycore's derived functions run on the host path, and the
#: NumPy backend's overrides (called with :data:`PREPARE`'s arguments).
HOST: dict[str, Callable[..., Any]] = {
    "cholesky": host_cholesky,
    "det": np.linalg.det,
    "eigh": host_eigh,
    "eigvalsh": np.linalg.eigvalsh,
    "inv": np.linalg.inv,
    "matrix_rank": host_matrix_rank,
    "pinv": host_pinv,
    "qr": host_qr,
    "slogdet": host_slogdet,
    "solve": host_solve,
    "svd": host_svd,
    "svdvals": np.linalg.svdvals,
}


# -- guards in front of a backend's overrides ------------------------------------------------------
def _guard(name: str) -> Callable[[NamespaceBase, Callable[..., Any]], Callable[..., Any]]:
    prepare = PREPARE[name]
    op = f"linalg.{name}"
    sig = inspect.signature(prepare)
    signature = sig.replace(parameters=list(sig.parameters.values())[1:])

    def make(xp: NamespaceBase, fn: Callable[..., Any]) -> Callable[..., Any]:
        def checked(*args: Any, **kwargs: Any) -> Any:
            a, k = prepare(xp, *args, **kwargs)
            return call(op, fn, *a, **k)

        checked.__signature__ = signature  # type: ignore[attr-defined]
        return checked

    return make


#: ``{"linalg.<name>": guard}``: part of :data:`arraycore._checks.GUARDS`.
GUARDS = {f"linalg.{name}": _guard(name) for name in PREPARE}
