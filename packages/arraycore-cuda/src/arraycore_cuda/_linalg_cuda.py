"""``xp.linalg`` on CUDA: CuPy's cuSOLVER-backed ``cupy.linalg`` for the functions arraycore's
derived version runs on the host (decompositions, solvers) or from primitives (``cholesky``),
so nothing leaves the GPU.

arraycore checks the arguments before these adapters run (:mod:`arraycore._linalg_host`): ``x``
is a float32 or float64 CuPy array of the right shape, ``rtol`` a float or an array of ``x``'s
dtype, the options are Python values. The adapters add what CuPy lacks of the standard:
``cholesky(upper=)``, batch broadcasting in ``solve``, ``rtol`` in ``pinv`` and
``matrix_rank``, empty matrices in ``pinv`` and ``matrix_rank``, the standard's namedtuples.

A singular matrix (``inv``, ``solve``) or one that is not positive definite (``cholesky``) is a
``LinAlgError``, as on NumPy: the adapters run under ``cupyx.errstate(linalg="raise")``, which
reads cuSOLVER's status back (a wait for the device). Inside ``arraycore.checks(False)`` they do
not, and such a result holds NaN or inf (CuPy's default).

Built from the ``cupy`` module alone (no device is touched), like the other override tables.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import numpy as np

from arraycore._checks import enabled as checks_enabled
from arraycore._linalg import EighResult, QRResult, SlogdetResult, SVDResult

#: The ``linalg.<name>`` overrides of :func:`linalg_table`.
LINALG_NAMES = (
    "cholesky", "det", "eigh", "eigvalsh", "inv", "pinv", "qr", "slogdet", "solve", "svd",
    "svdvals", "matrix_rank",
)  # fmt: skip


def _errstate() -> Callable[[], contextlib.AbstractContextManager[Any]]:
    """A context that makes cuSOLVER failures raise while arraycore's checks are on."""
    try:
        import cupyx
    except ImportError:  # the stand-in of the adapter tests: no cuSOLVER status to read
        return contextlib.nullcontext
    errstate = cupyx.errstate

    def checked() -> contextlib.AbstractContextManager[Any]:
        if checks_enabled():
            return errstate(linalg="raise")  # type: ignore[no-any-return]
        return contextlib.nullcontext()

    return checked


def linalg_table(cp: Any) -> dict[str, Callable[..., Any]]:
    """``{"linalg.<name>": function}`` for every name of :data:`LINALG_NAMES`, on CuPy arrays."""
    la = cp.linalg
    raising = _errstate()

    def cholesky(x: Any, /, *, upper: bool = False) -> Any:
        with raising():
            if upper:  # from the upper triangle, as NumPy's (LAPACK's "U")
                return cp.swapaxes(la.cholesky(cp.swapaxes(x, -1, -2)), -1, -2)
            return la.cholesky(x)

    def det(x: Any, /) -> Any:
        return la.det(x)

    def eigh(x: Any, /) -> EighResult:
        return EighResult(*la.eigh(x))

    def eigvalsh(x: Any, /) -> Any:
        return la.eigvalsh(x)

    def inv(x: Any, /) -> Any:
        with raising():
            return la.inv(x)

    def qr(x: Any, /, *, mode: str = "reduced") -> QRResult:
        return QRResult(*la.qr(x, mode=mode))

    def slogdet(x: Any, /) -> SlogdetResult:
        return SlogdetResult(*la.slogdet(x))

    def svd(x: Any, /, *, full_matrices: bool = True) -> SVDResult:
        return SVDResult(*la.svd(x, full_matrices=full_matrices))

    def svdvals(x: Any, /) -> Any:
        return la.svd(x, compute_uv=False)

    def pinv(x: Any, /, *, rtol: Any = None) -> Any:
        if x.shape[-2] == 0 or x.shape[-1] == 0:  # CuPy's largest singular value of none fails
            return cp.zeros((*x.shape[:-2], x.shape[-1], x.shape[-2]), dtype=x.dtype)
        # CuPy's rcond is the standard's rtol (relative to the largest singular value)
        return la.pinv(x, rcond=rtol)

    def matrix_rank(x: Any, /, *, rtol: Any = None) -> Any:
        if x.shape[-2] == 0 or x.shape[-1] == 0:
            return cp.zeros(x.shape[:-2], dtype=cp.int64)
        s = la.svd(x, compute_uv=False)
        tol = cp.max(s, axis=-1, keepdims=True) * cp.asarray(rtol, dtype=s.dtype)[..., None]
        return cp.count_nonzero(s > tol, axis=-1).astype(cp.int64)

    def solve(x1: Any, x2: Any, /) -> Any:
        # CuPy follows NumPy 1: a (..., M) x2 would be a stack of vectors and batch axes must
        # match. The standard: a 1-D x2 is one vector, anything else (..., M, K) matrices whose
        # batch axes broadcast. So: one column for a vector, batch axes broadcast here.
        b = x2[:, None] if x2.ndim == 1 else x2
        batch = np.broadcast_shapes(x1.shape[:-2], b.shape[:-2])  # shapes only
        a = cp.broadcast_to(x1, (*batch, *x1.shape[-2:]))
        b = cp.broadcast_to(b, (*batch, *b.shape[-2:]))
        with raising():
            solved = la.solve(a, b)
        return solved[..., 0] if x2.ndim == 1 else solved

    local: dict[str, Callable[..., Any]] = {
        "cholesky": cholesky, "det": det, "eigh": eigh, "eigvalsh": eigvalsh, "inv": inv,
        "qr": qr, "slogdet": slogdet, "svd": svd, "svdvals": svdvals, "pinv": pinv,
        "matrix_rank": matrix_rank, "solve": solve,
    }  # fmt: skip
    return {f"linalg.{name}": local[name] for name in LINALG_NAMES}
