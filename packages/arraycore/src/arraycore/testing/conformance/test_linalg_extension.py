"""Conformance of the standard's ``linalg`` extension (``xp.linalg``, ``arraycore.linalg``):
signatures, module-level dispatch, and the functions arraycore builds from the primitives
(``outer``, ``diagonal``, ``trace``, ``cross``, ``vector_norm``, ``matrix_norm``,
``matrix_power``, ``cholesky`` of small matrices; larger ones too) against ``numpy.linalg``, on every real floating dtype the
device has (float16 where it has it), batches, empty and size-1 axes and strided layouts.
The decompositions and solvers are in ``test_linalg_decompositions.py``.

Results of a chain of floating operations are compared with the kit's tolerance scaled by
:data:`SCALE` (Cholesky, norms of a few dozen elements); exact functions exactly.
"""

from __future__ import annotations

import inspect
import math
from typing import Any

import numpy as np
import pytest

import arraycore
from arraycore.testing import assert_close
from arraycore.testing import strategies as acst

RNG = np.random.default_rng(7)
BATCH = RNG.normal(size=(2, 3, 3))
WIDE = RNG.normal(size=(2, 3, 4))
SPD = BATCH @ np.swapaxes(BATCH, -1, -2) + 3 * np.eye(3)
INF = math.inf

#: Tolerance scale for results of a chain of operations (the kit's default is for one op).
SCALE = 50.0

#: The standard's signatures (2024.12): ``(name, kind, default)`` of each parameter.
P, K = inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.KEYWORD_ONLY
_E = inspect.Parameter.empty
SIGNATURES: dict[str, list[tuple[str, Any, Any]]] = {
    "cholesky": [("x", P, _E), ("upper", K, False)],
    "cross": [("x1", P, _E), ("x2", P, _E), ("axis", K, -1)],
    "det": [("x", P, _E)],
    "diagonal": [("x", P, _E), ("offset", K, 0)],
    "eigh": [("x", P, _E)],
    "eigvalsh": [("x", P, _E)],
    "inv": [("x", P, _E)],
    "matmul": [("x1", P, _E), ("x2", P, _E)],
    "matrix_norm": [("x", P, _E), ("keepdims", K, False), ("ord", K, "fro")],
    "matrix_power": [("x", P, _E), ("n", P, _E)],
    "matrix_rank": [("x", P, _E), ("rtol", K, None)],
    "matrix_transpose": [("x", P, _E)],
    "outer": [("x1", P, _E), ("x2", P, _E)],
    "pinv": [("x", P, _E), ("rtol", K, None)],
    "qr": [("x", P, _E), ("mode", K, "reduced")],
    "slogdet": [("x", P, _E)],
    "solve": [("x1", P, _E), ("x2", P, _E)],
    "svd": [("x", P, _E), ("full_matrices", K, True)],
    "svdvals": [("x", P, _E)],
    "tensordot": [("x1", P, _E), ("x2", P, _E), ("axes", K, 2)],
    "trace": [("x", P, _E), ("offset", K, 0), ("dtype", K, None)],
    "vecdot": [("x1", P, _E), ("x2", P, _E), ("axis", K, -1)],
    "vector_norm": [("x", P, _E), ("axis", K, None), ("keepdims", K, False), ("ord", K, 2)],
}


def _floats(xp: Any) -> list[np.dtype]:
    return [d for d in acst.supported_dtypes(xp, "real floating") if d != np.float16]


def _all_floats(xp: Any) -> list[np.dtype]:
    return acst.supported_dtypes(xp, "real floating", names=("float16", "float32", "float64"))


def _close(got: Any, want: Any, dtype: Any, msg: str, scale: float = SCALE) -> None:
    assert_close(got, np.asarray(want).astype(dtype), err_msg=msg, scale=scale)


def _params(fn: Any) -> list[tuple[str, Any, Any]]:
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]


# -- the namespace and the module ------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(SIGNATURES))
def test_signatures_are_the_standards(xp: Any, name: str) -> None:
    assert _params(getattr(xp.linalg, name)) == SIGNATURES[name], f"xp.linalg.{name}"
    assert _params(getattr(arraycore.linalg, name)) == SIGNATURES[name], f"arraycore.linalg.{name}"


def test_module_level_functions_dispatch_on_the_arrays_backend(xp: Any) -> None:
    dt = _floats(xp)[-1]
    a, b = xp.asarray(BATCH.astype(dt)), xp.asarray(WIDE.astype(dt))
    with arraycore.use("numpy"):  # the arrays decide, not the active backend
        got = arraycore.linalg.solve(a, b)
        norm = arraycore.linalg.vector_norm(b, axis=-1)
        q, r = arraycore.linalg.qr(b)
    for result in (got, norm, q, r):
        assert arraycore.namespace_of(result).name == xp.name
    _close(got, np.linalg.solve(BATCH, WIDE), dt, "arraycore.linalg.solve")
    _close(norm, np.linalg.vector_norm(WIDE, axis=-1), dt, "arraycore.linalg.vector_norm")
    assert "linalg" in repr(arraycore.linalg)


def test_the_main_namespace_functions_are_the_same(xp: Any) -> None:
    la = xp.linalg
    for dt in _floats(xp):
        h, w = BATCH.astype(dt), WIDE.astype(dt)
        x, y = xp.asarray(h), xp.asarray(w)
        _close(la.matmul(x, y), h @ w, dt, "matmul")
        _close(la.matrix_transpose(y), np.swapaxes(w, -1, -2), dt, "matrix_transpose")
        _close(la.vecdot(x, x), np.sum(h * h, axis=-1), dt, "vecdot")
        _close(la.vecdot(y, y, axis=1), np.sum(w * w, axis=1), dt, "vecdot axis=1")
        _close(la.tensordot(x, y[0], axes=1), np.tensordot(h, w[0], axes=1), dt, "tensordot")
        want = np.tensordot(h, w, axes=([0, 1], [0, 1]))
        _close(la.tensordot(x, y, axes=([0, 1], [0, 1])), want, dt, "tensordot pairs")


# -- outer, diagonal, trace, cross ---------------------------------------------------------------
@pytest.mark.parametrize("layout", acst.LAYOUTS)
def test_outer(xp: Any, layout: str) -> None:
    for dt in [*_all_floats(xp), np.dtype("int32")]:
        for n, m in ((4, 3), (1, 5), (0, 2)):
            a = RNG.integers(-5, 5, size=n).astype(dt)
            b = RNG.integers(-5, 5, size=m).astype(dt)
            got = xp.linalg.outer(acst.on_device(xp, a, layout), acst.on_device(xp, b, layout))
            assert_close(got, np.linalg.outer(a, b), err_msg=f"outer {dt} {n}x{m}")
    mixed = xp.linalg.outer(xp.asarray(np.arange(3, dtype=np.int16)), xp.asarray(np.ones(2, "f4")))
    assert mixed.dtype == np.result_type(np.int16, np.float32)
    with pytest.raises(ValueError, match=r"linalg.outer: .*1-D.*\(2, 2\) and \(3,\)"):
        xp.linalg.outer(xp.ones((2, 2)), xp.ones(3))


@pytest.mark.parametrize("shape", [(3, 4), (4, 3), (2, 3, 4), (2, 1, 3, 3), (0, 3), (2, 0, 0)])
@pytest.mark.parametrize("layout", acst.LAYOUTS)
def test_diagonal_and_trace(xp: Any, shape: tuple[int, ...], layout: str) -> None:
    la = xp.linalg
    for dt in [*_all_floats(xp), np.dtype("int64"), np.dtype("int8"), np.dtype("uint8")]:
        h = RNG.integers(-4, 5, size=shape).astype(dt)
        x = acst.on_device(xp, h, layout)
        for offset in (-5, -2, -1, 0, 1, 3, 6):
            assert_close(la.diagonal(x, offset=offset), np.linalg.diagonal(h, offset=offset))
            got, want = la.trace(x, offset=offset), np.linalg.trace(h, offset=offset)
            assert_close(got, want, err_msg=f"trace {dt} offset={offset}")
    h = RNG.integers(0, 100, size=shape).astype(np.int8)
    got = la.trace(xp.asarray(h), dtype=xp.int64)
    assert_close(got, np.linalg.trace(h, dtype=np.int64), err_msg="trace dtype=int64")
    floats = _floats(xp)[-1]
    assert la.trace(xp.asarray(h), dtype=floats).dtype == floats


def test_diagonal_is_a_new_array_and_needs_a_matrix(xp: Any) -> None:
    x = xp.asarray(np.arange(9.0, dtype=_floats(xp)[0]).reshape(3, 3))
    d = xp.linalg.diagonal(x)
    x[0, 0] = 100.0
    assert_close(d, np.array([0.0, 4.0, 8.0], dtype=x.dtype))
    for fn in (xp.linalg.diagonal, xp.linalg.trace):
        with pytest.raises(ValueError, match=r"linalg.diagonal: .*2 dimensions.*\(3,\)"):
            fn(xp.ones(3))


@pytest.mark.parametrize(
    ("s1", "s2", "axis"),
    [
        ((3,), (3,), -1),
        ((4, 3), (4, 3), -1),
        ((2, 1, 3), (4, 3), -1),
        ((3, 5), (3, 1), -2),
        ((2, 3, 4), (3, 4), -2),
        ((3, 2, 2), (3, 2, 2), 0),
        ((0, 3), (1, 3), -1),
    ],
)
def test_cross(xp: Any, s1: tuple[int, ...], s2: tuple[int, ...], axis: int) -> None:
    for dt in [*_all_floats(xp), np.dtype("int64"), np.dtype("int16")]:
        a = RNG.integers(-4, 5, size=s1).astype(dt)
        b = RNG.integers(-4, 5, size=s2).astype(dt)
        for layout in ("contiguous", "strided"):
            x1, x2 = acst.on_device(xp, a, layout), acst.on_device(xp, b, layout)
            got = xp.linalg.cross(x1, x2, axis=axis)
            assert_close(got, np.linalg.cross(a, b, axis=axis), err_msg=f"cross {dt} {s1} {s2}")


def test_cross_errors_name_the_shapes(xp: Any) -> None:
    cross = xp.linalg.cross
    with pytest.raises(ValueError, match=r"linalg.cross: axis -1 .*size 3.*\(2, 4\).*\(2, 4\)"):
        cross(xp.ones((2, 4)), xp.ones((2, 4)))
    with pytest.raises(ValueError, match=r"linalg.cross: .*size 3"):  # never broadcast along axis
        cross(xp.ones((2, 3)), xp.ones((2, 1)))
    with pytest.raises(ValueError, match=r"linalg.cross:"):
        cross(xp.ones((3, 3)), xp.ones((3, 3)), axis=2)
    with pytest.raises(ValueError, match=r"linalg.cross:"):
        cross(xp.asarray(1.0), xp.ones(3))


# -- norms ---------------------------------------------------------------------------------------
VECTOR_ORDS = [2, 1, 0, 3, 0.5, -1, -2, -0.5, INF, -INF]


@pytest.mark.parametrize("ord", VECTOR_ORDS)
@pytest.mark.parametrize("axis", [None, -1, 1, (0, 2), (-1, -3), ()])
def test_vector_norm(xp: Any, ord: float, axis: Any) -> None:
    for dt in _all_floats(xp):
        h = (WIDE + np.sign(WIDE)).astype(dt)  # |x| >= 1: negative orders stay finite
        if ord >= 0:
            h[0, 0, 0] = 0  # counted by ord=0
        for keepdims in (False, True):
            got = xp.linalg.vector_norm(xp.asarray(h), axis=axis, keepdims=keepdims, ord=ord)
            want = np.linalg.vector_norm(h, axis=axis, keepdims=keepdims, ord=ord)
            scale = SCALE if dt != np.float16 else 4.0
            _close(got, want, dt, f"vector_norm {dt} ord={ord} axis={axis}", scale)


def test_vector_norm_layouts_integers_and_empty_axes(xp: Any) -> None:
    norm = xp.linalg.vector_norm
    dt = _floats(xp)[-1]
    for layout in acst.LAYOUTS:
        got = norm(acst.on_device(xp, WIDE.astype(dt), layout), axis=(0, 1))
        _close(got, np.linalg.vector_norm(WIDE.astype(dt), axis=(0, 1)), dt, layout)
    default = xp.__array_namespace_info__().default_dtypes()["real floating"]
    ints = np.array([[3, 4], [-6, 8]], dtype=np.int32)
    _close(norm(xp.asarray(ints), axis=1), [5.0, 10.0], default, "int32 input")
    empty = np.zeros((2, 0), dtype=dt)
    for ord in (2, 1, 0, 3, INF):
        got = norm(xp.asarray(empty), axis=1, ord=ord)
        _close(got, np.linalg.vector_norm(empty, axis=1, ord=ord), dt, f"empty ord={ord}")
    with pytest.raises(ValueError, match=r"linalg.vector_norm:"):
        norm(xp.asarray(empty), axis=1, ord=-INF)
    with pytest.raises(ValueError, match=r"linalg.vector_norm:"):
        norm(xp.asarray(WIDE.astype(dt)), ord="fro")


MATRIX_ORDS = ["fro", "nuc", 1, -1, 2, -2, INF, -INF]


@pytest.mark.parametrize("ord", MATRIX_ORDS)
@pytest.mark.parametrize("shape", [(3, 4), (2, 3, 4), (2, 1, 4, 3), (1, 1)])
def test_matrix_norm(xp: Any, ord: Any, shape: tuple[int, ...]) -> None:
    h0 = RNG.normal(size=shape)
    for dt in _floats(xp):
        h = h0.astype(dt)
        for keepdims in (False, True):
            for layout in ("contiguous", "transposed"):
                x = acst.on_device(xp, h, layout)
                got = xp.linalg.matrix_norm(x, keepdims=keepdims, ord=ord)
                want = np.linalg.matrix_norm(h, keepdims=keepdims, ord=ord)
                _close(got, want, dt, f"matrix_norm {shape} ord={ord} keepdims={keepdims}")


@pytest.mark.parametrize("shape", [(0, 0), (2, 3, 0), (2, 0, 3), (0, 3, 3)])
@pytest.mark.parametrize("ord", MATRIX_ORDS)
def test_matrix_norm_of_empty_matrices(xp: Any, shape: tuple[int, ...], ord: Any) -> None:
    """Maxima over nothing are 0 (NumPy's answer), minima over nothing are a ValueError."""
    dt = _floats(xp)[-1]
    h = np.zeros(shape, dtype=dt)
    try:
        want = np.linalg.matrix_norm(h, ord=ord)
    except ValueError:
        with pytest.raises(ValueError, match=r"linalg.matrix_norm:"):
            xp.linalg.matrix_norm(xp.asarray(h), ord=ord)
        return
    _close(xp.linalg.matrix_norm(xp.asarray(h), ord=ord), want, dt, f"{shape} ord={ord}")


def test_norms_of_integers_and_float16(xp: Any) -> None:
    default = xp.__array_namespace_info__().default_dtypes()["real floating"]
    m = np.array([[1, -2], [3, 4]], dtype=np.int64)
    for ord in ("fro", 1, INF, 2):
        got = xp.linalg.matrix_norm(xp.asarray(m), ord=ord)
        _close(got, np.linalg.matrix_norm(m.astype(default), ord=ord), default, f"int {ord}")
    if np.dtype("float16") in _all_floats(xp):
        h = WIDE.astype(np.float16)
        orders: list[Any] = ["fro", 1, -INF]
        for ord in orders:
            got = xp.linalg.matrix_norm(xp.asarray(h), ord=ord)
            _close(got, np.linalg.matrix_norm(h, ord=ord), np.float16, f"float16 {ord}", 4.0)
    with pytest.raises(ValueError, match=r"linalg.matrix_norm: ord must be .* got 3"):
        xp.linalg.matrix_norm(xp.asarray(WIDE.astype(default)), ord=3)
    with pytest.raises(ValueError, match=r"linalg.matrix_norm: .*2 dimensions.*\(4,\)"):
        xp.linalg.matrix_norm(xp.ones(4))


# -- matrix_power ---------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [0, 1, 2, 3, 5, 8, -1, -2, -3])
def test_matrix_power(xp: Any, n: int) -> None:
    well = BATCH / 2 + np.eye(3)  # powers stay moderate, inverses well conditioned
    for dt in _floats(xp):
        h = well.astype(dt)
        for layout in ("contiguous", "reversed"):
            got = xp.linalg.matrix_power(acst.on_device(xp, h, layout), n)
            _close(got, np.linalg.matrix_power(h, n), dt, f"matrix_power {dt} n={n}", 500.0)
    ints = np.array([[1, 2], [3, 4]], dtype=np.int64)
    if n >= 0:  # integers stay integers (NumPy's rule); negative powers need inv: floats
        assert_close(xp.linalg.matrix_power(xp.asarray(ints), n), np.linalg.matrix_power(ints, n))


def test_matrix_power_shapes_and_errors(xp: Any) -> None:
    dt = _floats(xp)[-1]
    for shape in ((0, 0), (2, 0, 0), (0, 2, 2), (1, 1)):
        h = np.full(shape, 2.0, dtype=dt)
        for n in (0, 1, 3):
            _close(xp.linalg.matrix_power(xp.asarray(h), n), np.linalg.matrix_power(h, n), dt, "")
    x = xp.asarray(BATCH.astype(dt))
    y = xp.linalg.matrix_power(x, 1)
    y[0, 0, 0] = 100.0  # a new array, not x itself
    assert float(xp.to_numpy(x)[0, 0, 0]) == float(BATCH.astype(dt)[0, 0, 0])
    with pytest.raises(ValueError, match=r"linalg.matrix_power: .*square.*\(2, 3, 4\)"):
        xp.linalg.matrix_power(xp.asarray(WIDE.astype(dt)), 2)
    with pytest.raises(TypeError):
        xp.linalg.matrix_power(x, 1.5)


# -- cholesky ---------------------------------------------------------------------------------------
def _spd(shape: tuple[int, ...]) -> np.ndarray:
    n = shape[-1]
    b = RNG.normal(size=shape)
    result: np.ndarray = b @ np.swapaxes(b, -1, -2) + n * np.eye(n)
    return result


# up to 16 x 16 arraycore factors on the device, larger matrices on the host path: both here
@pytest.mark.parametrize(
    "shape", [(1, 1), (3, 3), (2, 4, 4), (2, 1, 5, 5), (16, 16), (2, 20, 20), (0, 0), (0, 3, 3)]
)
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky(xp: Any, shape: tuple[int, ...], upper: bool) -> None:
    spd = _spd(shape)
    for dt in _floats(xp):
        h = spd.astype(dt)
        for layout in ("contiguous", "strided", "transposed"):
            got = xp.linalg.cholesky(acst.on_device(xp, h, layout), upper=upper)
            want = np.linalg.cholesky(h, upper=upper)
            _close(got, want, dt, f"cholesky {shape} {dt} upper={upper} {layout}")


def test_cholesky_reads_one_triangle_as_numpy(xp: Any) -> None:
    """Lower: the lower triangle only; upper: the upper one (LAPACK's potrf, so NumPy)."""
    for n in (4, 20):
        _one_triangle(xp, n)


def _one_triangle(xp: Any, n: int) -> None:
    spd = _spd((2, n, n))
    skewed = spd + np.triu(np.full((n, n), 5.0), 1)  # the upper triangle is not spd's
    for dt in _floats(xp):
        h = skewed.astype(dt)
        _close(xp.linalg.cholesky(xp.asarray(h)), np.linalg.cholesky(h), dt, "lower")
        h = np.swapaxes(skewed, -1, -2).astype(dt)
        got = xp.linalg.cholesky(xp.asarray(h), upper=True)
        _close(got, np.linalg.cholesky(h, upper=True), dt, "upper")


def test_cholesky_of_integers_and_of_matrices_not_positive_definite(xp: Any) -> None:
    default = xp.__array_namespace_info__().default_dtypes()["real floating"]
    m = np.array([[4, 2], [2, 3]])
    _close(xp.linalg.cholesky(xp.asarray(m)), np.linalg.cholesky(m.astype(default)), default, "")
    for n in (3, 20):  # on the device, on the host path
        bad = np.stack([np.eye(n), np.diag([1.0, -1.0, *[1.0] * (n - 2)])]).astype(default)
        with pytest.raises(np.linalg.LinAlgError, match=r"linalg.cholesky:"):
            xp.linalg.cholesky(xp.asarray(bad))
    with pytest.raises(ValueError, match=r"linalg.cholesky: .*square.*\(2, 3, 4\)"):
        xp.linalg.cholesky(xp.asarray(WIDE.astype(default)))
    bad = np.stack([np.eye(3), np.diag([1.0, -1.0, 1.0])]).astype(default)
    with arraycore.checks(False):  # a backend may then skip the check: NaN, never a wrong L
        try:
            factor = xp.to_numpy(xp.linalg.cholesky(xp.asarray(bad)))
        except np.linalg.LinAlgError:
            return
    assert np.isnan(factor[1]).any()
    np.testing.assert_allclose(factor[0], np.eye(3), atol=1e-6)
