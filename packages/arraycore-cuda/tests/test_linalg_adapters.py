"""The logic of the CuPy adapters of :mod:`arraycore_cuda._linalg_cuda` (``cholesky(upper=)``,
``solve``'s vectors and batch broadcasting, ``rtol``, empty matrices, namedtuples), with NumPy
functions that behave as CuPy's in CuPy's place.

This checks what the adapters add around ``cupy.linalg``, not CuPy or a GPU. The stand-in keeps
CuPy's differences from the standard that the adapters exist for: ``cholesky`` has no
``upper``, ``pinv`` takes ``rcond``, and ``solve`` follows NumPy 1 (a ``(..., M)`` right-hand
side of ``ndim - 1`` dimensions is a stack of vectors; batch axes must be equal, not
broadcast). CuPy's kernels themselves are checked by the conformance kit on a GPU
(``nox -s "conformance(cuda)"``).
"""

from __future__ import annotations

import types
from typing import Any

import numpy as np
import pytest

import arraycore
from arraycore_cuda._linalg_cuda import LINALG_NAMES, linalg_table

RNG = np.random.default_rng(3)
REF = arraycore.namespace("numpy").linalg


def _solve(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if b.ndim == a.ndim - 1:  # NumPy 1 / CuPy: a stack of vectors
        assert b.shape[:-1] == a.shape[:-2], "CuPy does not broadcast batch axes"
        return np.linalg.solve(a, b[..., None])[..., 0]
    assert b.ndim == a.ndim and b.shape[:-2] == a.shape[:-2], "CuPy needs equal batch axes"
    return np.linalg.solve(a, b)


def _pinv(a: np.ndarray, rcond: Any = 1e-15) -> np.ndarray:
    assert a.size, "CuPy's pinv takes the largest singular value: of none, an error"
    u, s, vt = np.linalg.svd(a, full_matrices=False)
    cutoff = np.asarray(rcond) * np.max(s, axis=-1, initial=0.0)
    s = np.where(s <= cutoff[..., None], 0.0, 1.0 / np.where(s == 0, 1.0, s))
    result: np.ndarray = np.swapaxes(vt, -1, -2) @ (s[..., None] * np.swapaxes(u, -1, -2))
    return result


def _stand_in() -> Any:
    la = types.SimpleNamespace(
        cholesky=lambda a: np.linalg.cholesky(a),
        det=np.linalg.det,
        eigh=lambda a: tuple(np.linalg.eigh(a)),
        eigvalsh=np.linalg.eigvalsh,
        inv=np.linalg.inv,
        qr=lambda a, mode: tuple(np.linalg.qr(a, mode=mode)),
        slogdet=lambda a: tuple(np.linalg.slogdet(a)),
        svd=lambda a, full_matrices=True, compute_uv=True: (
            tuple(np.linalg.svd(a, full_matrices=full_matrices))
            if compute_uv
            else np.linalg.svd(a, compute_uv=False)
        ),
        pinv=_pinv,
        solve=_solve,
    )
    return types.SimpleNamespace(
        linalg=la,
        swapaxes=np.swapaxes,
        broadcast_to=np.broadcast_to,
        zeros=np.zeros,
        max=np.max,
        asarray=np.asarray,
        count_nonzero=np.count_nonzero,
        int64=np.int64,
    )


TABLE = {name.removeprefix("linalg."): fn for name, fn in linalg_table(_stand_in()).items()}


def _same(got: Any, want: Any) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_the_table_has_every_name() -> None:
    assert set(TABLE) == set(LINALG_NAMES)


def test_cholesky_upper_reads_the_upper_triangle() -> None:
    b = RNG.normal(size=(2, 4, 4))
    spd = b @ np.swapaxes(b, -1, -2) + 4 * np.eye(4)
    skewed = spd + np.tril(np.full((4, 4), 3.0), -1)  # the lower triangle is not spd's
    _same(TABLE["cholesky"](skewed, upper=True), REF.cholesky(skewed, upper=True))
    _same(TABLE["cholesky"](spd), REF.cholesky(spd))


@pytest.mark.parametrize(
    ("s1", "s2"),
    [((3, 3), (3,)), ((2, 3, 3), (3,)), ((3, 3, 3), (3, 3)), ((2, 1, 3, 3), (4, 3, 2)),
     ((3, 3), (2, 3, 1)), ((2, 2, 2), (2, 2))],
)  # fmt: skip
def test_solve_follows_the_standard(s1: tuple[int, ...], s2: tuple[int, ...]) -> None:
    a = RNG.normal(size=s1) + 3 * np.eye(s1[-1])
    b = RNG.normal(size=s2)
    _same(TABLE["solve"](a, b), REF.solve(a, b))


def test_rtol_and_empty_matrices() -> None:
    x = np.stack([RNG.normal(size=(4, 5)), np.outer(RNG.normal(size=4), RNG.normal(size=5))])
    for rtol in (1e-12, 0.5, np.array([1e-3, 0.9])):
        _same(TABLE["pinv"](x, rtol=rtol), REF.pinv(x, rtol=rtol))
        _same(TABLE["matrix_rank"](x, rtol=rtol), REF.matrix_rank(x, rtol=rtol))
    empty = np.zeros((2, 3, 0))
    _same(TABLE["matrix_rank"](empty, rtol=1e-6), np.zeros(2, dtype=np.int64))
    _same(TABLE["pinv"](empty, rtol=1e-6), np.zeros((2, 0, 3)))


def test_results_are_the_standards_namedtuples() -> None:
    x = RNG.normal(size=(2, 4, 3))
    sym = x @ np.swapaxes(x, -1, -2)
    assert TABLE["eigh"](sym)._fields == ("eigenvalues", "eigenvectors")
    assert TABLE["qr"](x, mode="complete")._fields == ("Q", "R")
    assert TABLE["slogdet"](sym[:, :3, :3])._fields == ("sign", "logabsdet")
    u, s, vh = TABLE["svd"](x, full_matrices=False)
    assert TABLE["svd"](x)._fields == ("U", "S", "Vh")
    _same(s, REF.svdvals(x))
    _same(TABLE["svdvals"](x), REF.svdvals(x))
    _same((u * s[..., None, :]) @ vh, x)
    for name in ("det", "inv", "eigvalsh"):
        _same(
            TABLE[name](sym[:, :3, :3] + 3 * np.eye(3)),
            getattr(REF, name)(sym[:, :3, :3] + 3 * np.eye(3)),
        )
