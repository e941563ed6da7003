"""Conformance of the decompositions and solvers of ``xp.linalg`` (``det``, ``inv``, ``solve``,
``slogdet``, ``eigh``, ``eigvalsh``, ``qr``, ``svd``, ``svdvals``, ``pinv``, ``matrix_rank``)
against ``numpy.linalg``: batches, empty matrices, modes, namedtuple fields, ``rtol``, dtypes,
errors that name the function and the shapes, and the host-path listing.

Factors that are unique only up to signs (``Q``, ``U``, ``Vh``, eigenvectors) are checked by
what defines them: orthonormality, triangularity, and the product that rebuilds the input.
Matrices are well conditioned, so the kit's tolerance scaled by :data:`SCALE` holds.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import arraycore
from arraycore.testing import assert_close
from arraycore.testing import strategies as acst

RNG = np.random.default_rng(11)
SCALE = 50.0
#: The functions of this file: arraycore runs them on the host path unless a backend overrides.
HOST_PATH = (
    "det", "eigh", "eigvalsh", "inv", "matrix_rank", "pinv", "qr", "slogdet", "solve", "svd",
    "svdvals",
)  # fmt: skip
SQUARE = ("det", "eigh", "eigvalsh", "inv", "slogdet")
SHAPES = [(3, 3), (2, 4, 4), (2, 1, 3, 3), (1, 1), (0, 0), (0, 2, 2)]


def _floats(xp: Any) -> list[np.dtype]:
    return [d for d in acst.supported_dtypes(xp, "real floating") if d != np.float16]


def _default(xp: Any) -> np.dtype:
    default: np.dtype = np.dtype(xp.__array_namespace_info__().default_dtypes()["real floating"])
    return default


def _close(got: Any, want: Any, dtype: Any, msg: str = "") -> None:
    assert_close(got, np.asarray(want).astype(dtype), err_msg=msg, scale=SCALE)


def _well(shape: tuple[int, ...]) -> np.ndarray:
    """Random matrices with a strong diagonal: far from singular."""
    a = RNG.normal(size=shape)
    if shape[-1] == shape[-2]:
        a = a + 3 * np.eye(shape[-1])
    return a


def _sym(shape: tuple[int, ...]) -> np.ndarray:
    a = RNG.normal(size=shape)
    result: np.ndarray = a + np.swapaxes(a, -1, -2)
    return result


def _orthonormal_columns(q: Any, dt: np.dtype, msg: str) -> None:
    h = np.asarray(arraycore.testing.to_host(q), dtype=np.float64)
    k = h.shape[-1]
    eye = np.broadcast_to(np.eye(k), (*h.shape[:-2], k, k))
    got = np.swapaxes(h, -1, -2) @ h  # in float64, with the tolerance of dt
    assert_close(got, eye, dtype=dt, scale=SCALE, err_msg=f"{msg}: columns not orthonormal")


# -- determinants and inverses ---------------------------------------------------------------------
@pytest.mark.parametrize("shape", SHAPES)
def test_det_inv_slogdet(xp: Any, shape: tuple[int, ...]) -> None:
    la = xp.linalg
    a = _well(shape)
    for dt in _floats(xp):
        h = a.astype(dt)
        for layout in ("contiguous", "strided", "transposed"):
            x = acst.on_device(xp, h, layout)
            _close(la.det(x), np.linalg.det(h), dt, f"det {shape} {layout}")
            _close(la.inv(x), np.linalg.inv(h), dt, f"inv {shape} {layout}")
            result = la.slogdet(x)
            assert result._fields == ("sign", "logabsdet")
            want = np.linalg.slogdet(h)
            _close(result.sign, want.sign, dt, "slogdet sign")
            _close(result.logabsdet, want.logabsdet, dt, "slogdet logabsdet")
            assert tuple(result.sign.shape) == shape[:-2]


def test_singular_matrices(xp: Any) -> None:
    la = xp.linalg
    dt = _floats(xp)[-1]
    singular = np.stack([np.eye(3), np.ones((3, 3))]).astype(dt)
    x = xp.asarray(singular)
    sign, logabsdet = la.slogdet(x)
    _close(sign, [1.0, 0.0], dt, "slogdet sign of a singular matrix")
    assert np.isneginf(arraycore.testing.to_host(logabsdet)[1])
    _close(la.det(x), [1.0, 0.0], dt, "det of a singular matrix")
    for call in (lambda: la.inv(x), lambda: la.solve(x, xp.ones(3, dtype=dt))):
        try:
            result = arraycore.testing.to_host(call())
        except np.linalg.LinAlgError as exc:
            assert "linalg." in str(exc)
        else:  # a backend may not check (inside checks(False) CUDA does not): never finite
            assert not np.isfinite(result[1]).all()


# -- solve ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("s1", "s2"),
    [
        ((3, 3), (3,)),
        ((2, 3, 3), (3,)),  # one vector for every matrix: (2, 3)
        ((3, 3), (3, 2)),
        ((2, 3, 3), (2, 3, 4)),
        ((2, 1, 3, 3), (4, 3, 2)),  # batch axes broadcast: (2, 4, 3, 2)
        ((3, 3), (2, 3, 1)),
        ((4, 4), (4, 4)),  # x2 (M, M) is a matrix, never a stack of vectors
        ((2, 2, 2), (2, 2)),
        ((0, 3, 3), (3,)),
        ((0, 0), (0, 2)),
    ],
)
def test_solve(xp: Any, s1: tuple[int, ...], s2: tuple[int, ...]) -> None:
    a, b = _well(s1), RNG.normal(size=s2)
    for dt in _floats(xp):
        h1, h2 = a.astype(dt), b.astype(dt)
        for layout in ("contiguous", "reversed"):
            got = xp.linalg.solve(acst.on_device(xp, h1, layout), acst.on_device(xp, h2, layout))
            want = np.linalg.solve(h1, h2)
            _close(got, want, dt, f"solve {s1} {s2} {layout}")


def test_solve_dtypes_and_errors(xp: Any) -> None:
    solve = xp.linalg.solve
    floats = _floats(xp)
    a = xp.asarray(_well((3, 3)).astype(floats[0]))
    b = xp.asarray(np.arange(3, dtype=floats[-1]))
    assert solve(a, b).dtype == np.result_type(*floats)
    got = solve(xp.asarray(np.array([[2, 0], [0, 4]])), xp.asarray(np.array([2, 2])))
    _close(got, [1.0, 0.5], _default(xp), "integer input: the default float")
    with pytest.raises(
        ValueError, match=r"linalg.solve: x2 of shape \(4,\) .*x1 of shape \(3, 3\)"
    ):
        solve(a, xp.ones(4, dtype=a.dtype))
    with pytest.raises(ValueError, match=r"linalg.solve: x2 of shape \(3, 3, 2\).*\(2, 3, 3\)"):
        solve(xp.asarray(_well((2, 3, 3)).astype(a.dtype)), xp.ones((3, 3, 2)))
    with pytest.raises(ValueError, match=r"linalg.solve: x2 of shape \(\)"):
        solve(a, xp.asarray(1.0, dtype=a.dtype))
    with pytest.raises(ValueError, match=r"linalg.solve: .*square.*\(3, 4\)"):
        solve(xp.ones((3, 4)), xp.ones(3))


# -- eigenvalues ------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", SHAPES)
def test_eigh_and_eigvalsh(xp: Any, shape: tuple[int, ...]) -> None:
    a = _sym(shape)
    for dt in _floats(xp):
        h = a.astype(dt)
        for layout in ("contiguous", "transposed"):
            x = acst.on_device(xp, h, layout)
            want = np.linalg.eigvalsh(h)
            _close(xp.linalg.eigvalsh(x), want, dt, f"eigvalsh {shape}")
            result = xp.linalg.eigh(x)
            assert result._fields == ("eigenvalues", "eigenvectors")
            values, vectors = result
            _close(values, want, dt, f"eigh eigenvalues {shape}")
            assert vectors.dtype == dt and tuple(vectors.shape) == shape
            _orthonormal_columns(vectors, dt, "eigh")
            rebuilt = xp.matmul(vectors * values[..., None, :], xp.matrix_transpose(vectors))
            _close(rebuilt, h, dt, f"eigh V diag(w) V^T {shape}")


def test_eigh_reads_the_lower_triangle(xp: Any) -> None:
    a = _sym((2, 4, 4)) + np.triu(np.full((4, 4), 3.0), 1)
    for dt in _floats(xp):
        h = a.astype(dt)
        _close(xp.linalg.eigvalsh(xp.asarray(h)), np.linalg.eigvalsh(h), dt, "eigvalsh")
        _close(xp.linalg.eigh(xp.asarray(h)).eigenvalues, np.linalg.eigvalsh(h), dt, "eigh")


# -- qr and svd ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4), (2, 4, 3), (2, 1, 3, 4), (1, 1), (0, 3)])
@pytest.mark.parametrize("mode", ["reduced", "complete"])
def test_qr(xp: Any, shape: tuple[int, ...], mode: str) -> None:
    m, n = shape[-2:]
    k = min(m, n)
    want_q = (*shape[:-2], m, k if mode == "reduced" else m)
    want_r = (*shape[:-2], k if mode == "reduced" else m, n)
    a = _well(shape)
    for dt in _floats(xp):
        h = a.astype(dt)
        result = xp.linalg.qr(acst.on_device(xp, h, "strided"), mode=mode)
        assert result._fields == ("Q", "R")
        q, r = result
        assert (tuple(q.shape), tuple(r.shape)) == (want_q, want_r)
        assert q.dtype == dt and r.dtype == dt
        _orthonormal_columns(q, dt, "qr Q")
        r_host = arraycore.testing.to_host(r)
        assert np.array_equal(r_host, np.triu(r_host)), "R is not upper triangular"
        _close(xp.matmul(q, r), h, dt, f"Q R {shape} {mode}")


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4), (2, 4, 3), (2, 1, 3, 4), (1, 1), (0, 3)])
def test_svd_and_svdvals(xp: Any, shape: tuple[int, ...]) -> None:
    m, n = shape[-2:]
    k = min(m, n)
    a = RNG.normal(size=shape)
    for dt in _floats(xp):
        h = a.astype(dt)
        x = acst.on_device(xp, h, "transposed")
        want = np.linalg.svdvals(h)
        _close(xp.linalg.svdvals(x), want, dt, f"svdvals {shape}")
        for full in (True, False):
            result = xp.linalg.svd(x, full_matrices=full)
            assert result._fields == ("U", "S", "Vh")
            u, s, vh = result
            shapes = tuple(tuple(v.shape) for v in result)
            batch = shape[:-2]
            kk = (m, n) if full else (k, k)
            assert shapes == ((*batch, m, kk[0]), (*batch, k), (*batch, kk[1], n)), shapes
            _close(s, want, dt, "svd S")
            _orthonormal_columns(u, dt, "svd U")
            _orthonormal_columns(xp.matrix_transpose(vh), dt, "svd Vh")
            uk = u[..., :k] if full else u
            vhk = vh[..., :k, :] if full else vh
            _close(xp.matmul(uk * s[..., None, :], vhk), h, dt, f"U S Vh {shape} full={full}")


# -- pinv and matrix_rank ---------------------------------------------------------------------------------
def _rank_deficient() -> np.ndarray:
    """Three 4 x 5 matrices of ranks 4, 2 and 1."""
    full = RNG.normal(size=(4, 5))
    two = RNG.normal(size=(4, 2)) @ RNG.normal(size=(2, 5))
    one = np.outer(RNG.normal(size=4), RNG.normal(size=5))
    return np.stack([full, two, one])


def test_pinv_and_matrix_rank(xp: Any) -> None:
    la = xp.linalg
    a = _rank_deficient()
    for dt in _floats(xp):
        h = a.astype(dt)
        x = xp.asarray(h)
        default = max(h.shape[-2:]) * np.finfo(dt).eps * 10  # NumPy's LAPACK vs the device's
        rank = la.matrix_rank(x)
        assert rank.dtype == np.int64 and tuple(rank.shape) == (3,)
        assert_close(rank, np.array([4, 2, 1]), err_msg="matrix_rank")
        got = la.pinv(x)
        assert tuple(got.shape) == (3, 5, 4) and got.dtype == dt
        rebuilt = np.asarray(arraycore.testing.to_host(xp.matmul(xp.matmul(x, got), x)), "f8")
        assert_close(rebuilt, h.astype("f8"), dtype=dt, scale=SCALE, err_msg="x pinv(x) x")
        _close(got, np.linalg.pinv(h, rtol=default), dt, "pinv")
        for rtol in (0.5, xp.asarray(np.array([1e-3, 0.5, 0.9], dtype=dt))):
            host_rtol = rtol if isinstance(rtol, float) else np.array([1e-3, 0.5, 0.9])
            want_rank = np.linalg.matrix_rank(h.astype(np.float64), rtol=host_rtol)
            assert_close(la.matrix_rank(x, rtol=rtol), want_rank.astype(np.int64))
            want = np.linalg.pinv(h.astype(np.float64), rtol=host_rtol)
            _close(la.pinv(x, rtol=rtol), want, dt, f"pinv rtol={rtol}")


def test_pinv_and_matrix_rank_edges(xp: Any) -> None:
    la = xp.linalg
    dt = _floats(xp)[-1]
    for shape in ((0, 3), (2, 3, 0), (0, 2, 2)):
        h = np.zeros(shape, dtype=dt)
        assert_close(la.matrix_rank(xp.asarray(h)), np.zeros(shape[:-2], dtype=np.int64))
        _close(la.pinv(xp.asarray(h)), np.linalg.pinv(h), dt, f"pinv {shape}")
    x = xp.asarray(_rank_deficient().astype(dt))
    with pytest.raises(ValueError, match=r"linalg.pinv: rtol of shape \(2,\).*\(3,\)"):
        la.pinv(x, rtol=xp.ones(2, dtype=dt))
    with pytest.raises(ValueError, match=r"linalg.matrix_rank: .*2 dimensions.*\(5,\)"):
        la.matrix_rank(xp.ones(5))


# -- dtypes, errors, the host path ---------------------------------------------------------------------
def _call(la: Any, name: str, x: Any) -> Any:
    return la.solve(x, x) if name == "solve" else getattr(la, name)(x)


@pytest.mark.parametrize("name", [*HOST_PATH, "cholesky"])
def test_integer_input_computes_in_the_default_float(xp: Any, name: str) -> None:
    default = _default(xp)
    m = np.array([[4, 1], [1, 3]])
    got = _call(xp.linalg, name, xp.asarray(m))
    want = _call(np.linalg, name, m.astype(default))
    for g, w in zip(*((got, want) if isinstance(got, tuple) else ((got,), (want,))), strict=True):
        if np.asarray(w).dtype.kind == "f":
            assert g.dtype == default, name
    if name in ("det", "inv", "solve", "eigvalsh", "svdvals", "cholesky", "matrix_rank"):
        assert_close(got, np.asarray(want).astype(got.dtype), scale=SCALE, err_msg=name)


@pytest.mark.parametrize("name", [*HOST_PATH, "cholesky"])
def test_errors_name_the_function_and_the_shape(xp: Any, name: str) -> None:
    la = xp.linalg
    dt = _floats(xp)[-1]
    if name in (*SQUARE, "cholesky", "solve"):
        with pytest.raises(ValueError, match=rf"linalg.{name}: .*square.*\(2, 3, 4\)"):
            _call(la, name, xp.ones((2, 3, 4), dtype=dt))
    with pytest.raises(ValueError, match=rf"linalg.{name}: .*\(4,\)"):
        _call(la, name, xp.ones(4, dtype=dt))
    if np.dtype("float16") in acst.device_dtypes(xp).values():
        with pytest.raises(TypeError, match=rf"linalg.{name}: float16"):
            _call(la, name, xp.ones((2, 2), dtype=xp.float16))
    if name == "qr":
        with pytest.raises(ValueError, match=r"linalg.qr: mode .*'r'"):
            la.qr(xp.ones((2, 2), dtype=dt), mode="r")


def test_the_host_path_listing(xp: Any) -> None:
    """What ``host_functions()`` lists is exactly the linalg functions the backend does not
    override (``cholesky`` among them: arraycore's runs on the device only up to 16 x 16); the
    results live on the backend's device."""
    listed = {n for n in xp.__array_namespace_info__().host_functions() if "linalg." in n}
    own = type(xp.linalg)
    derived = {
        f"linalg.{name}"
        for name in (*HOST_PATH, "cholesky")
        if getattr(getattr(xp.linalg, name), "__func__", None) is getattr(own, name)
    }
    assert listed == derived
    x = xp.asarray(_well((2, 3, 3)).astype(_floats(xp)[-1]))
    for name in HOST_PATH:
        result = _call(xp.linalg, name, x)
        for r in result if isinstance(result, tuple) else (result,):
            assert arraycore.namespace_of(r).name == xp.name, name
