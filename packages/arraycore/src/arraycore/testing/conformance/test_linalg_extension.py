"""Conformance of the standard's ``linalg`` extension (``xp.linalg``) against ``numpy.linalg``, on
every real floating dtype the device has (and integer input, computed in the default float)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from arraycore.testing import assert_close
from arraycore.testing import strategies as acst

RNG = np.random.default_rng(7)
BATCH = RNG.normal(size=(2, 3, 3))
WIDE = RNG.normal(size=(2, 3, 4))
SPD = BATCH @ np.swapaxes(BATCH, -1, -2) + 3 * np.eye(3)


def _floats(xp: Any) -> list[np.dtype]:
    return [d for d in acst.supported_dtypes(xp, "real floating") if d != np.float16]


#: Tolerance scale for results of factorisations and solvers (the kit's default is for one op).
SCALE = 50.0


def _close(got: Any, want: Any, dtype: np.dtype, msg: str) -> None:
    assert got.dtype == dtype, f"{msg}: dtype {got.dtype}, expected {dtype}"
    assert_close(got, np.asarray(want).astype(dtype), err_msg=msg, scale=SCALE)


def test_device_functions(xp: Any) -> None:
    la = xp.linalg
    for dt in _floats(xp):
        h, w = BATCH.astype(dt), WIDE.astype(dt)
        x, y = xp.asarray(h), xp.asarray(w)
        _close(la.outer(x[0, 0], y[0, 1]), np.outer(h[0, 0], w[0, 1]), dt, "outer")
        for offset in (-3, -1, 0, 1, 2, 5):
            _close(la.diagonal(y, offset=offset), np.diagonal(w, offset, -2, -1), dt, "diagonal")
            _close(la.trace(y, offset=offset), np.trace(w, offset, -2, -1), dt, "trace")
        _close(la.cross(x, x[::-1]), np.cross(h, h[::-1]), dt, "cross")
        _close(la.cross(x, x[:, ::-1], axis=1), np.cross(h, h[:, ::-1], axis=1), dt, "cross 1")
        _close(la.matmul(x, y), h @ w, dt, "matmul")
        _close(la.matrix_transpose(y), np.swapaxes(w, -1, -2), dt, "matrix_transpose")
        _close(la.vecdot(x, x), np.sum(h * h, axis=-1), dt, "vecdot")
        _close(la.tensordot(x, y[0], axes=1), np.tensordot(h, w[0], axes=1), dt, "tensordot")
        for n in (0, 1, 2, 5, -1, -3):
            _close(la.matrix_power(x, n), np.linalg.matrix_power(h, n), dt, f"matrix_power {n}")


@pytest.mark.parametrize("ord", [2, 1, 0, 3, 0.5, math.inf, -math.inf])
@pytest.mark.parametrize("axis", [None, -1, (0, 2), 1])
def test_vector_norm(xp: Any, ord: float, axis: Any) -> None:
    for dt in _floats(xp):
        h = WIDE.astype(dt)
        h[0, 0, 0] = 0
        for keepdims in (False, True):
            got = xp.linalg.vector_norm(xp.asarray(h), axis=axis, keepdims=keepdims, ord=ord)
            want = np.linalg.vector_norm(h, axis=axis, keepdims=keepdims, ord=ord)
            _close(got, want, dt, f"vector_norm ord={ord} axis={axis}")


@pytest.mark.parametrize("ord", ["fro", "nuc", 1, -1, 2, -2, math.inf, -math.inf])
def test_matrix_norm(xp: Any, ord: Any) -> None:
    for dt in _floats(xp):
        h = WIDE.astype(dt)
        for keepdims in (False, True):
            got = xp.linalg.matrix_norm(xp.asarray(h), keepdims=keepdims, ord=ord)
            want = np.linalg.matrix_norm(h, keepdims=keepdims, ord=ord)
            _close(got, want, dt, f"matrix_norm ord={ord}")


def test_decompositions_and_solvers(xp: Any) -> None:
    la = xp.linalg
    for dt in _floats(xp):
        h, w, spd = BATCH.astype(dt), WIDE.astype(dt), SPD.astype(dt)
        x, y, s = xp.asarray(h), xp.asarray(w), xp.asarray(spd)
        _close(la.det(x), np.linalg.det(h), dt, "det")
        _close(la.inv(x), np.linalg.inv(h), dt, "inv")
        _close(la.cholesky(s), np.linalg.cholesky(spd), dt, "cholesky")
        _close(la.cholesky(s, upper=True), np.linalg.cholesky(spd, upper=True), dt, "upper")
        _close(la.solve(x, x[0, :, 0]), np.linalg.solve(h, h[0, :, 0]), dt, "solve vector")
        _close(la.solve(x, y), np.linalg.solve(h, w), dt, "solve matrices")
        _close(la.svdvals(y), np.linalg.svdvals(w), dt, "svdvals")
        _close(la.pinv(y), np.linalg.pinv(w, rtol=4 * np.finfo(dt).eps), dt, "pinv")
        _close(la.eigvalsh(s), np.linalg.eigvalsh(spd), dt, "eigvalsh")
        sign, logabs = la.slogdet(x)
        want = np.linalg.slogdet(h)
        _close(sign, want.sign, dt, "slogdet sign")
        _close(logabs, want.logabsdet, dt, "slogdet logabsdet")
        rank = la.matrix_rank(xp.asarray(np.stack([h[0], np.ones((3, 3), dt)])))
        assert rank.dtype == xp.int64
        assert_close(rank, np.array([3, 1]))


def test_factorisations_reconstruct_their_input(xp: Any) -> None:
    """Q, R, U, S, Vh and eigenvectors are unique only up to signs: check what defines them."""
    la = xp.linalg
    for dt in _floats(xp):
        w, spd = WIDE.astype(dt), SPD.astype(dt)
        y, s = xp.asarray(w), xp.asarray(spd)
        for mode, shapes in (("reduced", ((2, 3, 3), (2, 3, 4))), ("complete", None)):
            q, r = la.qr(y, mode=mode)
            assert shapes is None or (tuple(q.shape), tuple(r.shape)) == shapes
            assert_close(xp.matmul(q, r), w, scale=SCALE)
        result = la.svd(y, full_matrices=False)
        assert result._fields == ("U", "S", "Vh")
        u, sv, vh = result
        assert_close(xp.matmul(u * sv[..., None, :], vh), w, scale=SCALE)
        assert tuple(la.svd(y).U.shape) == (2, 3, 3) and tuple(la.svd(y).Vh.shape) == (2, 4, 4)
        values, vectors = la.eigh(s)
        assert la.eigh(s)._fields == ("eigenvalues", "eigenvectors")
        assert_close(values, np.linalg.eigvalsh(spd), scale=SCALE)
        rebuilt = xp.matmul(vectors * values[..., None, :], xp.matrix_transpose(vectors))
        assert_close(rebuilt, spd, scale=SCALE)


def test_integer_input_computes_in_the_default_float(xp: Any) -> None:
    default = xp.__array_namespace_info__().default_dtypes()["real floating"]
    m = xp.asarray(np.array([[2, 1], [1, 3]]))
    assert xp.linalg.det(m).dtype == default
    assert xp.linalg.vector_norm(m).dtype == default
    want = np.linalg.inv(np.array([[2.0, 1], [1, 3]])).astype(default)
    assert_close(xp.linalg.inv(m), want, scale=SCALE)


def test_errors_name_the_function_and_shapes(xp: Any) -> None:
    la = xp.linalg
    y = xp.asarray(WIDE)
    for fn in (la.det, la.inv, la.cholesky, la.eigh, la.eigvalsh, la.slogdet):
        with pytest.raises(ValueError, match=r"square matrices.*\(2, 3, 4\)"):
            fn(y)
    with pytest.raises(ValueError, match=r"linalg.outer: .*1-D"):
        la.outer(y, y)
    with pytest.raises(ValueError, match="size 3"):
        la.cross(y, y)
    with pytest.raises(ValueError, match="ord"):
        la.matrix_norm(y, ord=3)
    with pytest.raises(ValueError, match="mode"):
        la.qr(y, mode="r")
