"""Conformance of ``xp.random``: reproducible seeded generators and the distributions' statistics.

Backends may draw different streams for the same seed, so values are never compared with NumPy's;
instead the kit checks reproducibility on the backend itself and the sample statistics of large
draws against bounds of six standard errors (seeds are fixed, so the checks are deterministic
on a given backend, and a correct generator fails them with probability below 1e-8).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from arraycore.testing import assert_close, to_host

N = 20_000
SIGMAS = 6.0


def _float_dtypes(xp: Any) -> list[np.dtype]:
    available = xp.__array_namespace_info__().dtypes(kind="real floating")
    return [np.dtype(n) for n in ("float32", "float64") if n in available]


def _draws(rng: Any) -> list[Any]:
    return [
        rng.uniform(shape=(7,)),
        rng.normal(shape=(2, 3)),
        rng.bernoulli(0.5, shape=(9,)),
        rng.permutation(10),
        rng.uniform(-1.0, 1.0, shape=(3,), dtype=np.float32),
    ]


def test_same_seed_same_numbers(xp: Any) -> None:
    first = [to_host(a) for a in _draws(xp.random.default_rng(1234))]
    second = [to_host(a) for a in _draws(xp.random.default_rng(1234))]
    for a, b in zip(first, second, strict=True):
        np.testing.assert_array_equal(a, b)


def test_different_seeds_and_successive_draws_differ(xp: Any) -> None:
    a = to_host(xp.random.default_rng(1).uniform(shape=(64,)))
    b = to_host(xp.random.default_rng(2).uniform(shape=(64,)))
    assert not np.array_equal(a, b), "seeds 1 and 2 drew the same numbers"
    rng = xp.random.default_rng(3)
    c, d = to_host(rng.uniform(shape=(64,))), to_host(rng.uniform(shape=(64,)))
    assert not np.array_equal(c, d), "two successive draws of one generator are equal"
    p = to_host(xp.random.default_rng(4).permutation(50))
    q = to_host(xp.random.default_rng(5).permutation(50))
    assert not np.array_equal(p, q)


@pytest.mark.parametrize("bounds", [(0.0, 1.0), (-3.0, 5.0), (2.0, 2.5)])
def test_uniform_range_and_mean(xp: Any, bounds: tuple[float, float]) -> None:
    low, high = bounds
    for dtype in _float_dtypes(xp):
        x = xp.random.default_rng(11).uniform(low, high, shape=(N,), dtype=dtype)
        assert x.dtype == dtype and tuple(x.shape) == (N,)
        host = to_host(x).astype(np.float64)
        assert host.min() >= low and host.max() <= high, (host.min(), host.max())
        if (low, high) == (0.0, 1.0):
            assert host.max() < 1.0, "uniform(0, 1) must exclude 1"
        mean, spread = (low + high) / 2, (high - low) / math.sqrt(12)
        assert abs(host.mean() - mean) < SIGMAS * spread / math.sqrt(N), host.mean()
        assert abs(host.std() - spread) < SIGMAS * spread / math.sqrt(N), host.std()


@pytest.mark.parametrize("params", [(0.0, 1.0), (3.0, 0.5), (-1.0, 4.0)])
def test_normal_mean_and_std(xp: Any, params: tuple[float, float]) -> None:
    mean, std = params
    for dtype in _float_dtypes(xp):
        x = xp.random.default_rng(21).normal(mean, std, shape=(N,), dtype=dtype)
        assert x.dtype == dtype
        host = to_host(x).astype(np.float64)
        assert np.isfinite(host).all()
        assert abs(host.mean() - mean) < SIGMAS * std / math.sqrt(N), host.mean()
        # The standard error of the sample std of a normal sample is std / sqrt(2 N).
        assert abs(host.std() - std) < SIGMAS * std / math.sqrt(2 * N), host.std()
        fourth = np.mean(((host - mean) / std) ** 4)
        assert abs(fourth - 3.0) < SIGMAS * math.sqrt(96 / N), f"kurtosis {fourth}: not normal"


@pytest.mark.parametrize("shape", [(), (0,), (1,), (5,), (3, 1, 3), (2, 0, 4)])
def test_shapes_and_default_dtype(xp: Any, shape: tuple[int, ...]) -> None:
    default = np.dtype(xp.__array_namespace_info__().default_dtypes()["real floating"])
    rng = xp.random.default_rng(0)
    for draw in (rng.uniform(shape=shape), rng.normal(shape=shape), rng.bernoulli(shape=shape)):
        assert tuple(draw.shape) == shape and draw.dtype == default
    assert tuple(rng.uniform(shape=4).shape) == (4,)


@pytest.mark.parametrize("p", [0.0, 0.05, 0.5, 0.9, 1.0])
def test_bernoulli_frequency(xp: Any, p: float) -> None:
    x = xp.random.default_rng(31).bernoulli(p, shape=(N,))
    host = to_host(x)
    assert set(np.unique(host)) <= {0.0, 1.0}
    assert abs(host.mean() - p) <= SIGMAS * math.sqrt(p * (1 - p) / N), host.mean()
    flags = xp.random.default_rng(32).bernoulli(p, shape=(3, 4), dtype=xp.bool)
    assert flags.dtype == np.bool_ and tuple(flags.shape) == (3, 4)


@pytest.mark.parametrize("n", [0, 1, 2, 17, 1000])
def test_permutation_is_a_permutation(xp: Any, n: int) -> None:
    perm = xp.random.default_rng(41).permutation(n)
    assert perm.dtype == np.int64 and tuple(perm.shape) == (n,)
    assert_close(np.sort(to_host(perm)), np.arange(n, dtype=np.int64))


def test_argument_errors(xp: Any) -> None:
    with pytest.raises(ValueError):
        xp.random.default_rng(-1)
    rng = xp.random.default_rng(0)
    with pytest.raises(ValueError):
        rng.bernoulli(1.5)
    with pytest.raises(ValueError):
        rng.permutation(-2)
    with pytest.raises(TypeError):
        rng.uniform(shape=(2,), dtype=xp.int32)
    with pytest.raises(TypeError):
        rng.normal(shape=(2,), dtype=xp.int64)


# -- NumPy's Generator signatures -------------------------------------------------------------
def test_numpys_signatures_draw_what_numpy_draws_in_shape_and_meaning(xp: Any) -> None:
    """``normal(loc, scale, size)``, ``uniform(low, high, size)``, ``random(size)`` and
    ``standard_normal(size)`` as ``numpy.random.Generator`` has them: the same shapes, and
    array parameters broadcast as NumPy broadcasts them."""
    g, ref = xp.random.default_rng(5), np.random.default_rng(5)
    pairs: list[tuple[Any, Any]] = [
        (g.normal(size=(2, 3)), ref.normal(size=(2, 3))),
        (g.normal(0.0, 2.0, (4,)), ref.normal(0.0, 2.0, (4,))),
        (g.normal((2.0, 3.0)), ref.normal((2.0, 3.0))),
        (g.uniform(-1.0, 1.0, size=5), ref.uniform(-1.0, 1.0, size=5)),
        (g.uniform(size=(2, 2)), ref.uniform(size=(2, 2))),
        (g.random((3,)), ref.random((3,))),
        (g.random(), ref.random()),
        (g.standard_normal(4), ref.standard_normal(4)),
        (g.normal(), ref.normal()),
    ]
    for draw, want in pairs:
        assert tuple(draw.shape) == np.shape(want)
    means = to_host(g.normal(xp.asarray([0.0, 100.0]), 0.5, size=(N // 10, 2)))
    assert abs(means[:, 0].mean()) < 0.1 and abs(means[:, 1].mean() - 100.0) < 0.1
    lows = to_host(g.uniform((0.0, 10.0), (1.0, 11.0), size=(N // 10, 2)))
    assert (lows[:, 0] >= 0).all() and (lows[:, 0] < 1).all() and (lows[:, 1] >= 10).all()
    with pytest.raises(ValueError, match="do not broadcast"):
        g.normal(xp.zeros(3), 1.0, size=(2,))
    with pytest.raises(TypeError, match="size= or shape="):
        g.normal(size=(2,), shape=(2,))


def test_the_older_keywords_still_draw_the_same_numbers(xp: Any) -> None:
    """``shape=``, ``mean=``/``std=`` (arraycore's names before NumPy's) draw what ``size=``,
    ``loc``/``scale`` draw, number for number."""
    a = to_host(xp.random.default_rng(9).normal(mean=1.0, std=2.0, shape=(5,)))
    b = to_host(xp.random.default_rng(9).normal(1.0, 2.0, size=(5,)))
    np.testing.assert_array_equal(a, b)
    c = to_host(xp.random.default_rng(9).uniform(shape=(4,)))
    d = to_host(xp.random.default_rng(9).uniform(size=(4,)))
    np.testing.assert_array_equal(c, d)


def test_integers_permutation_and_choice(xp: Any) -> None:
    g = xp.random.default_rng(6)
    k = to_host(g.integers(3, 7, size=(N // 10,)))
    assert k.dtype == np.int64 and set(np.unique(k)) == {3, 4, 5, 6}
    assert set(np.unique(to_host(g.integers(2, size=(200,))))) == {0, 1}
    assert set(np.unique(to_host(g.integers(1, 3, size=(200,), endpoint=True)))) == {1, 2, 3}
    assert to_host(g.integers(0, 5, size=(3,), dtype=xp.int32)).dtype == np.int32
    assert tuple(g.integers(10).shape) == ()
    with pytest.raises(TypeError):
        g.integers(0, 5, dtype=xp.float32)
    rows = xp.asarray(np.arange(12, dtype=np.float32).reshape(6, 2))
    shuffled = to_host(g.permutation(rows))
    assert sorted(shuffled[:, 0].tolist()) == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
    np.testing.assert_array_equal(shuffled[:, 1], shuffled[:, 0] + 1)  # rows kept whole
    picked = to_host(g.choice(10, size=(10,), replace=False))
    assert sorted(picked.tolist()) == list(range(10))
    weighted = to_host(g.choice(3, size=(N // 10,), p=[0.0, 0.0, 1.0]))
    assert (weighted == 2).all()
    from_rows = g.choice(rows, size=(4,))
    assert tuple(from_rows.shape) == (4, 2)
    with pytest.raises(ValueError, match=r"random\.choice"):
        g.choice(3, size=(5,), replace=False)
