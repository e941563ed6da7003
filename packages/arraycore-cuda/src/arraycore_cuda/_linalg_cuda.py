"""``xp.linalg`` on CUDA: CuPy's cuSOLVER-backed ``cupy.linalg`` for the functions arraycore's
derived version runs on the host (decompositions, solvers), so nothing leaves the GPU.

Built from the ``cupy`` module alone (no device is touched), like the other override tables.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from arraycore._linalg import EighResult, QRResult, SlogdetResult, SVDResult

#: The ``linalg.<name>`` overrides of :func:`linalg_table`.
LINALG_NAMES = (
    "cholesky", "det", "eigh", "eigvalsh", "inv", "pinv", "qr", "slogdet", "solve", "svd",
    "svdvals", "matrix_rank",
)  # fmt: skip


def linalg_table(cp: Any) -> dict[str, Callable[..., Any]]:
    """``{"linalg.<name>": function}`` for every name of :data:`LINALG_NAMES`, on CuPy arrays."""
    la = cp.linalg

    def cholesky(x: Any, /, *, upper: bool = False) -> Any:
        lower = la.cholesky(x)
        return cp.conj(cp.swapaxes(lower, -1, -2)) if upper else lower

    def eigh(x: Any, /) -> EighResult:
        return EighResult(*la.eigh(x))

    def qr(x: Any, /, *, mode: str = "reduced") -> QRResult:
        return QRResult(*la.qr(x, mode=mode))

    def slogdet(x: Any, /) -> SlogdetResult:
        return SlogdetResult(*la.slogdet(x))

    def svd(x: Any, /, *, full_matrices: bool = True) -> SVDResult:
        return SVDResult(*la.svd(x, full_matrices=full_matrices))

    def svdvals(x: Any, /) -> Any:
        return la.svd(x, compute_uv=False)

    def _rtol(x: Any, rtol: Any) -> Any:
        if rtol is None:
            return max(x.shape[-2:]) * cp.finfo(x.dtype).eps
        return rtol

    def pinv(x: Any, /, *, rtol: Any = None) -> Any:
        return la.pinv(x, rcond=_rtol(x, rtol))

    def matrix_rank(x: Any, /, *, rtol: Any = None) -> Any:
        s = la.svd(x, compute_uv=False)
        tol = cp.max(s, axis=-1, keepdims=True) * cp.asarray(_rtol(x, rtol))[..., None]
        return cp.count_nonzero(s > tol, axis=-1).astype(cp.int64)

    def solve(x1: Any, x2: Any, /) -> Any:
        if x2.ndim == 1:  # a vector (the standard's rule; CuPy follows NumPy 1's otherwise)
            return la.solve(x1, x2[..., None])[..., 0]
        return la.solve(x1, x2)

    local: dict[str, Callable[..., Any]] = {
        "cholesky": cholesky, "eigh": eigh, "qr": qr, "slogdet": slogdet, "svd": svd,
        "svdvals": svdvals, "pinv": pinv, "matrix_rank": matrix_rank, "solve": solve,
    }  # fmt: skip
    return {f"linalg.{name}": local.get(name) or getattr(la, name) for name in LINALG_NAMES}
