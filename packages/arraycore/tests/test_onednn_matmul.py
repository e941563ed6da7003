"""The NumPy backend's ``matmul`` and ``tensordot`` with oneDNN taking large float32 products
(``arraycore[onednn]``): the same values, shapes, dtypes and errors as NumPy's, every layout
(transposed and sliced views, broadcast batches), one plan per shape and thread count."""

from __future__ import annotations

import numpy as np
import pytest

import arraycore
from arraycore.backends import _onednn

xp = arraycore.namespace("numpy")


@pytest.fixture
def onednn():
    if _onednn.library() is None:
        pytest.skip(f"oneDNN accelerator: {_onednn.status()}")
    return _onednn


def _f32(rng, *shape):
    return rng.normal(size=shape).astype(np.float32)


def _check(a, b):
    got = xp.matmul(a, b)
    want = np.matmul(a.astype(np.float64), b.astype(np.float64))
    assert got.shape == want.shape
    assert got.dtype == np.float32
    assert got.flags.c_contiguous
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.sqrt(a.shape[-1]))
    return got


LAYOUTS = {
    "contiguous": lambda a: a,
    "transposed": lambda a: np.ascontiguousarray(np.swapaxes(a, -1, -2)).swapaxes(-1, -2),
    "row slice": lambda a: np.repeat(a, 2, axis=-2)[..., ::2, :],
    "column block": lambda a: np.concatenate([a, a], axis=-1)[..., : a.shape[-1]],
    "reversed rows": lambda a: np.ascontiguousarray(a[..., ::-1, :])[..., ::-1, :],
}


@pytest.mark.parametrize("left", LAYOUTS)
@pytest.mark.parametrize("right", LAYOUTS)
def test_two_dimensional_products_in_every_layout(onednn, left, right) -> None:
    rng = np.random.default_rng(0)
    a, b = _f32(rng, 96, 80), _f32(rng, 80, 72)
    got = _check(LAYOUTS[left](a), LAYOUTS[right](b))
    np.testing.assert_allclose(got, a @ b, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize(
    ("ashape", "bshape"),
    [
        ((4, 64, 96), (4, 96, 80)),
        ((4, 64, 96), (96, 80)),  # a matrix against a stack
        ((64, 96), (3, 96, 80)),
        ((2, 1, 64, 96), (3, 96, 80)),  # batch dimensions broadcast both ways
        ((2, 3, 64, 96), (1, 3, 96, 80)),
        ((1, 64, 96), (5, 96, 80)),
    ],
)
def test_batched_products_broadcast_like_numpy(onednn, ashape, bshape) -> None:
    rng = np.random.default_rng(1)
    _check(_f32(rng, *ashape), _f32(rng, *bshape))


def test_large_float32_products_run_on_onednn_one_plan_per_thread_count(onednn) -> None:
    rng = np.random.default_rng(2)
    a, b = _f32(rng, 128, 96), _f32(rng, 96, 64)

    def plans():
        return [k for k, p in onednn._PLANS.items() if isinstance(p, onednn.MatmulPlan)]

    with arraycore.threads(1):
        before = len(plans())
        _check(a, b)
        assert len(plans()) == before + 1  # made once, then reused
        _check(a, b)
        assert len(plans()) == before + 1
    with arraycore.threads(2):
        _check(a, b)
    assert {k[0] for k in plans() if k[1] == (128, 96)} >= {1, 2}


def test_what_onednn_does_not_take_stays_with_numpy(onednn, monkeypatch) -> None:
    calls = []
    real = onednn.MatmulPlan.__call__

    def counted(self, a, b, bias=None):
        calls.append(a.shape)
        return real(self, a, b, bias)

    monkeypatch.setattr(onednn.MatmulPlan, "__call__", counted)
    rng = np.random.default_rng(3)
    small = _f32(rng, 8, 8)
    _check(small, small)  # below MATMUL_MIN_WORK: OpenBLAS on the calling thread
    a64, b64 = rng.normal(size=(128, 96)), rng.normal(size=(96, 64))
    np.testing.assert_array_equal(xp.matmul(a64, b64), a64 @ b64)  # float64
    assert xp.matmul(a64, b64).dtype == np.float64
    a, b = _f32(rng, 128, 96), _f32(rng, 96, 64)
    mixed = xp.matmul(a, b.astype(np.float64))
    assert mixed.dtype == np.float64
    stride0 = np.broadcast_to(_f32(rng, 1, 96), (128, 96))  # a zero stride
    _check(stride0, b)
    assert calls == []
    _check(a, b)
    assert calls == [(128, 96)]
    # many small products count together: 64 of 32 x 16 x 32 (2^15 each, 2^21 in all)
    heads, keys = _f32(rng, 64, 32, 16), _f32(rng, 1, 16, 32)
    _check(heads, keys)
    assert calls[-1] == (64, 32, 16)


@pytest.mark.parametrize(
    ("ashape", "bshape"), [((0, 96), (96, 64)), ((128, 0), (0, 64)), ((0, 128, 96), (96, 64))]
)
def test_empty_products(ashape, bshape) -> None:
    rng = np.random.default_rng(4)
    a, b = _f32(rng, *ashape), _f32(rng, *bshape)
    got = xp.matmul(a, b)
    np.testing.assert_array_equal(got, np.matmul(a, b))
    assert got.shape == np.matmul(a, b).shape


@pytest.mark.parametrize(
    ("ashape", "bshape"), [((128, 96), (64, 96)), ((2, 128, 96), (3, 96, 64)), ((96,), (96, 4))]
)
def test_errors_and_vectors_are_numpys(ashape, bshape) -> None:
    rng = np.random.default_rng(5)
    a, b = _f32(rng, *ashape), _f32(rng, *bshape)
    try:
        want = np.matmul(a, b)
    except ValueError as error:
        with pytest.raises(ValueError) as got:
            xp.matmul(a, b)
        assert str(got.value) == str(error)
    else:
        np.testing.assert_allclose(xp.matmul(a, b), want, rtol=1e-5)


@pytest.mark.parametrize(
    ("ashape", "bshape", "axes"),
    [
        ((16, 32, 64), (16, 32, 96), ([0, 1], [0, 1])),  # a recurrent layer's weight gradient
        ((40, 50, 60), (50, 60, 30), 2),
        ((4, 5, 6), (6, 5, 3), ([1, 2], [1, 0])),
        ((30, 40), (40, 50), 1),
        ((3, 4), (5, 6), 0),  # outer product
        ((3, 4), (3, 4), ([-1, 0], [1, 0])),  # a full contraction: a 0-d result
        ((0, 4), (4, 5), 1),
    ],
)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_tensordot_matches_numpy(ashape, bshape, axes, dtype) -> None:
    rng = np.random.default_rng(6)
    a, b = rng.normal(size=ashape).astype(dtype), rng.normal(size=bshape).astype(dtype)
    got = xp.tensordot(a, b, axes=axes)
    want = np.tensordot(a, b, axes=axes)
    assert got.shape == want.shape
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_tensordot_errors_are_numpys() -> None:
    a, b = np.ones((3, 4), np.float32), np.ones((5, 6), np.float32)
    with pytest.raises(ValueError, match="shape-mismatch"):
        xp.tensordot(a, b, axes=1)
    with pytest.raises(ValueError):
        xp.tensordot(a, b, axes=([0, 0], [0, 1]))


@pytest.mark.parametrize(
    ("ashape", "bshape"),
    [
        ((64, 64), (64, 63)),  # just under MATMUL_MIN_WORK (2**18 multiply-adds)
        ((64, 64), (64, 64)),  # at it
        ((4, 32, 64), (64, 32)),  # batch on the left
        ((32, 64), (4, 64, 32)),  # batch on the right only
        ((3, 1, 16, 64), (1, 5, 64, 16)),  # both broadcast: 15 products
        ((3, 1, 32, 64), (1, 5, 64, 32)),
        ((2, 8, 64), (2, 64, 8)),
    ],
)
def test_products_reach_onednn_by_their_multiply_adds(monkeypatch, ashape, bshape) -> None:
    """The NumPy backend's matmul offers oneDNN exactly the products of at least
    MATMUL_MIN_WORK multiply-adds (batch dimensions broadcast), as matmul_work counts them."""
    offered = []

    def refuse(a, b):
        offered.append((a.shape, b.shape))
        return None  # NumPy computes it

    monkeypatch.setattr(_onednn, "matmul", refuse)
    rng = np.random.default_rng(0)
    a, b = _f32(rng, *ashape), _f32(rng, *bshape)
    np.testing.assert_allclose(xp.matmul(a, b), np.matmul(a, b), rtol=1e-6)
    large = _onednn.matmul_work(ashape, bshape) >= _onednn.MATMUL_MIN_WORK
    assert offered == ([(ashape, bshape)] if large else [])


@pytest.mark.parametrize("left", LAYOUTS)
def test_affine_adds_its_bias_inside_onednn_product(onednn, monkeypatch, left) -> None:
    """``nn.affine`` of large float32 operands is one oneDNN product with its bias (any layout
    of ``x`` oneDNN can describe; reversed rows stay with NumPy), equal to ``x @ w + bias``; a
    bias that is not contiguous takes the product and an add instead, with the same values."""
    calls = []
    real = onednn.MatmulPlan.__call__

    def counted(self, a, b, bias=None):
        calls.append(bias is not None)
        return real(self, a, b, bias)

    monkeypatch.setattr(onednn.MatmulPlan, "__call__", counted)
    rng = np.random.default_rng(4)
    x, w, bias = LAYOUTS[left](_f32(rng, 96, 80)), _f32(rng, 80, 72), _f32(rng, 72)
    want = x.astype(np.float64) @ w.astype(np.float64) + bias
    got = xp.nn.affine(x, w, bias)
    onednn_takes = left != "reversed rows"  # a negative stride
    assert got.dtype == np.float32 and got.shape == (96, 72)
    assert calls == ([True] if onednn_takes else [])
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.sqrt(80))
    strided = np.repeat(bias, 2)[::2]
    calls.clear()
    got = xp.nn.affine(x, w, strided)
    assert calls == ([False] if onednn_takes else [])  # the product alone, then NumPy's add
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.sqrt(80))
    rows = _f32(rng, 4, 24, 80)  # a stack of rows: one 2-D product
    got = xp.nn.affine(rows, w, bias)
    assert got.shape == (4, 24, 72) and calls[-1] is True
    np.testing.assert_allclose(got, rows.astype(np.float64) @ w + bias, rtol=1e-4, atol=1e-3)
