"""``xp.inplace.fuse`` on the NumPy backend: update chains as one numba loop, to the bit."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import arraycore
from arraycore.backends import _numba, _numba_fuse

pytestmark = pytest.mark.skipif(
    _numba.kernels() is None, reason=f"numba kernels unavailable: {_numba.status()}"
)

XP = arraycore.namespace("numpy")
IP = XP.inplace
N = _numba_fuse.MIN_ITEMS + 37  # fused, with a remainder past any split of the items


def adam(value: Any, grad: Any, m: Any, v: Any, tmp: Any, *s: float) -> None:
    b1, omb1, b2, omb2, inv_sqrt_c2, eps, step = s
    IP.multiply(m, b1, out=m)
    IP.multiply(grad, omb1, out=tmp)
    IP.add(m, tmp, out=m)
    IP.multiply(grad, grad, out=tmp)
    IP.multiply(tmp, omb2, out=tmp)
    IP.multiply(v, b2, out=v)
    IP.add(v, tmp, out=v)
    IP.sqrt(v, out=tmp)
    IP.multiply(tmp, inv_sqrt_c2, out=tmp)
    IP.add(tmp, eps, out=tmp)
    IP.divide(m, tmp, out=tmp)
    IP.multiply(tmp, step, out=tmp)
    IP.subtract(value, tmp, out=value)


def with_constant(x: Any, y: Any, s: float) -> None:
    IP.multiply(x, 0.1, out=x)  # a constant of the chain, rounded to the arrays' dtype
    IP.subtract(x, y, out=y)
    IP.divide(y, s, out=y)


ADAM_SCALARS = (0.9, 0.1, 0.999, 0.001, 1.0 / 0.0547, 1e-8, 3e-4)


def _arrays(count: int, n: int, dtype: str, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [np.abs(rng.standard_normal(n)).astype(dtype) + 0.5 for _ in range(count)]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_fused_chains_give_the_plain_calls_bits(dtype: str) -> None:
    """Adam's chain and one with a literal constant, fused (one compiled loop, taken: the
    signature's kernel is there) and plain, over several steps: the same bits everywhere."""
    for fn, count, scalars in ((adam, 5, ADAM_SCALARS), (with_constant, 2, (3.0,))):
        fused: Any = IP.fuse(fn, scalar_operands=True)
        assert fused is not fn and fused.__wrapped__ is fn
        a, b = _arrays(count, N, dtype), _arrays(count, N, dtype)
        for _ in range(3):
            fused(*a, *scalars)
            fn(*b, *scalars)
        assert fused.kernels and all(k is not False for k in fused.kernels.values())
        for got, want in zip(a, b, strict=True):
            np.testing.assert_array_equal(got, want)


def test_what_is_not_fused_runs_the_chain_as_it_is() -> None:
    """Small arrays, NumPy scalars (which NumPy does not round to the arrays' dtype), strided,
    overlapping or mixed arguments, keyword arguments and chains the fuser cannot express run
    the plain calls: the same results, and no loop compiled for them."""
    fused: Any = IP.fuse(with_constant, scalar_operands=True)
    cases = [
        lambda a, b: (a[:100], b[:100], 3.0),  # small
        lambda a, b: (a, b, np.float64(3.0)),  # a NumPy scalar
        lambda a, b: (a[::2], b[::2], 3.0),  # strided
        lambda a, b: (a[: N - 8], a[8:], 3.0),  # overlapping
        lambda a, b: (a, b.astype(np.float64), 3.0),  # mixed dtypes
    ]
    for make in cases:
        a, b = _arrays(2, N, "float32", seed=1)
        c, d = (x.copy() for x in (a, b))
        fused(*make(a, b))
        with_constant(*make(c, d))
        np.testing.assert_array_equal(a, c)
        np.testing.assert_array_equal(b, d)
    assert not fused.kernels
    a, b = _arrays(2, N, "float32")
    fused(a, b, s=3.0)  # keywords: as it is
    assert not fused.kernels

    def other(x: Any, y: Any) -> None:
        IP.maximum(x, y, out=x)  # no fused expression for maximum

    untraceable: Any = IP.fuse(other, scalar_operands=True)
    x, y = _arrays(2, N, "float32")
    want = np.maximum(x, y)
    untraceable(x, y)
    np.testing.assert_array_equal(x, want)
    assert list(untraceable.kernels.values()) == [False]


def test_fuse_without_the_promise_is_the_function() -> None:
    """Without ``scalar_operands=True`` nothing is traced: the function comes back as it is;
    the argument checks are the namespace's."""
    assert IP.fuse(adam) is adam
    with pytest.raises(TypeError, match=r"inplace\.fuse: expected a function"):
        IP.fuse(3, scalar_operands=True)
