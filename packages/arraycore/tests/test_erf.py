"""arraycore's erf and erfc (:mod:`arraycore._erf`): accuracy against glibc's (``math.erf``,
``math.erfc``) and SciPy's where installed, both tails, special values, the two evaluations
(any namespace, NumPy blocks) bit for bit alike, and exact GELU through them."""

from __future__ import annotations

import math
import struct

import numpy as np
import pytest

from arraycore import _erf, _nn
from arraycore.backends import _numpy_nn


def _bits(v: float) -> int:
    return int(struct.unpack("<Q", struct.pack("<d", v))[0])


def test_coefficients_are_fdlibms() -> None:
    """The decimal constants round to fdlibm's bit patterns (s_erf.c's hex comments), one per
    table end: a mistyped digit would show here before it shows as an ulp."""
    want = {
        _erf.ERX: 0x3FEB0AC160000000,
        _erf.PP[0]: 0x3FC06EBA8214DB68,
        _erf.PP[4]: 0xBEF8EAD6120016AC,
        _erf.QQ[5]: 0xBED09C4342A26120,
        _erf.PA[0]: 0xBF6359B8BEF77538,
        _erf.QA[6]: 0x3F888B545735151D,
        _erf.RA[0]: 0xBF843412600D6435,
        _erf.SA[8]: 0xBFAEEFF2EE749A62,
        _erf.RB[6]: 0xC07E384E9BDC383F,
        _erf.SB[7]: 0xC03670E242712D62,
    }
    for value, pattern in want.items():
        assert _bits(value) == pattern, value


def _grid() -> np.ndarray:
    """Both tails and every interval bound: -7 to past float64's underflow, and tiny values."""
    bounds = np.array([_erf.SMALL, _erf.NEAR_ONE, _erf.MIDDLE, 0.25, 0.5, 6.0, 26.5, 27.0])
    edges = np.concatenate([np.nextafter(bounds, 0.0), bounds, np.nextafter(bounds, 30.0)])
    return np.concatenate(
        [
            np.linspace(-7.0, 27.5, 200_001),
            np.geomspace(1e-300, 27.0, 20_001),
            -np.geomspace(1e-300, 7.0, 2_001),
            edges,
            -edges,
        ]
    )


def _ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """``|got - want|`` in ulps of ``want`` in ``got``'s dtype (normal numbers only)."""
    return np.abs(got.astype(np.float64) - want) / np.spacing(np.abs(want).astype(got.dtype))


#: The largest errors measured on the grid (float64 4 ulp in erfc near 1.17, where
#: ``(1 - erx) - P/Q`` loses two bits; float32 4.6 ulp near 2.05), with a margin of one ulp.
MAX_ULPS = {"float64": {"erfc": 5.0, "erf": 2.0}, "float32": {"erfc": 6.0, "erf": 2.0}}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", ["erfc", "erf"])
def test_accuracy_against_glibc(dtype: str, name: str) -> None:
    x = _grid().astype(dtype)
    exact = getattr(math, name)
    want = np.array([exact(float(v)) for v in x])
    with np.errstate(all="ignore"):
        got_numpy = getattr(_erf, f"{name}_numpy")(x)
        got_generic = getattr(_erf, name)(np, x)
    assert got_numpy.dtype == x.dtype and got_generic.dtype == x.dtype
    np.testing.assert_array_equal(got_numpy, got_generic)  # one set of formulas, same bits
    normal = np.abs(want) >= np.finfo(dtype).tiny
    ulps = _ulps(got_numpy[normal], want[normal])
    assert ulps.max() <= MAX_ULPS[dtype][name], (x[normal][ulps.argmax()], ulps.max())
    # where erfc underflows to subnormals: within one subnormal step of glibc's
    sub = ~normal & (want != 0.0)
    step = np.finfo(dtype).smallest_subnormal
    assert np.all(np.abs(got_numpy[sub].astype(np.float64) - want[sub]) <= 2 * float(step))


def test_erfc_down_to_its_underflow_for_log_probabilities() -> None:
    """``log(erfc(x))`` to 1e-15 relative up to ``x = 26`` (``erfc(26) = 5.7e-296``), where
    ``log(1 - Phi)`` of a normal's far tail comes from."""
    x = np.linspace(5.0, 26.0, 2_001)
    got = np.log(_erf.erfc_numpy(x))
    want = np.array([math.log(math.erfc(v)) for v in x])
    np.testing.assert_allclose(got, want, rtol=1e-15)


def test_agrees_with_scipy() -> None:
    special = pytest.importorskip("scipy.special")
    x = np.linspace(-6.0, 26.0, 100_001)
    # SciPy's (Cephes') erfc is within 12 ulp to 2.86 and 511 ulp on the far tail
    np.testing.assert_allclose(_erf.erfc_numpy(x), special.erfc(x), rtol=1e-13, atol=0)
    np.testing.assert_allclose(_erf.erf_numpy(x), special.erf(x), rtol=1e-15, atol=1e-300)
    x32 = x.astype(np.float32)
    np.testing.assert_allclose(_erf.erfc_numpy(x32), special.erfc(x32), rtol=2e-6, atol=1e-44)


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16"])
def test_special_values(dtype: str) -> None:
    x = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 40.0, -40.0], dtype=dtype)
    for evaluate in (_erf.erfc_numpy, lambda v: _erf.erfc(np, v)):
        got = evaluate(x)
        assert got.dtype == x.dtype
        np.testing.assert_array_equal(got, np.array([0, 2, np.nan, 1, 1, 0, 2], dtype=dtype))
    for evaluate in (_erf.erf_numpy, lambda v: _erf.erf(np, v)):
        got = evaluate(x)
        np.testing.assert_array_equal(got, np.array([1, -1, np.nan, 0, 0, 1, -1], dtype=dtype))
        assert np.signbit(got[4]) and not np.signbit(got[3])  # erf(-0) = -0


def test_float16_is_float32_rounded() -> None:
    x = np.linspace(-5.0, 5.0, 4_001).astype(np.float16)
    want = _erf.erfc_numpy(x.astype(np.float32)).astype(np.float16)
    np.testing.assert_array_equal(_erf.erfc_numpy(x), want)


@pytest.mark.parametrize("shape", [(), (0,), (3, 0), (7,), (5, 7000, 3)])
def test_shapes_blocks_and_strides(shape: tuple[int, ...]) -> None:
    """Any shape (0-d, empty, several blocks with a partial last one), non-contiguous input."""
    x = np.random.default_rng(1).normal(0.0, 4.0, shape)
    got = _erf.erfc_numpy(x)
    assert got.shape == x.shape
    np.testing.assert_array_equal(got, _erf.erfc(np, x))
    if x.ndim == 3:
        view = x.transpose(2, 0, 1)
        np.testing.assert_array_equal(_erf.erfc_numpy(view), _erf.erfc(np, view))


def test_nn_erfc_is_this() -> None:
    x = np.linspace(-8.0, 8.0, 1_001)
    np.testing.assert_array_equal(_nn.erfc(np, x), _erf.erfc_numpy(x))


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_numpy_backend_exact_gelu_is_the_reference(dtype: str) -> None:
    """The NumPy backend's exact GELU (without oneDNN: contiguous float32 would go there) gives
    the namespace reference's bits, and is ``x Phi(x)`` to the rounding of its argument: the
    ulp of ``-x / sqrt 2`` becomes ``x**2`` ulps of ``Phi`` in the lower tail, as in PyTorch."""
    x = np.linspace(-12.0, 12.0, 2_001).astype(dtype)[::-1]  # negative strides: no oneDNN
    dy = np.ones_like(x)
    exact = {"approximate": "none"}
    np.testing.assert_array_equal(_numpy_nn.gelu(x, **exact), _nn.gelu(np, x, **exact))
    np.testing.assert_array_equal(
        _numpy_nn.gelu_backward(dy, x, **exact), _nn.gelu_backward(np, dy, x, **exact)
    )
    want = np.array([0.5 * v * math.erfc(-v / math.sqrt(2.0)) for v in x.astype(np.float64)])
    eps = float(np.finfo(dtype).eps)
    bound = 4.0 * eps * (1.0 + x.astype(np.float64) ** 2) * np.abs(want)
    err = np.abs(_numpy_nn.gelu(x, **exact).astype(np.float64) - want)
    assert np.all(err <= bound + 2 * float(np.finfo(dtype).smallest_subnormal))
