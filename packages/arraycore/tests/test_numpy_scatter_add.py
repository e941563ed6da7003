"""The NumPy backend's ``scatter_add``: ``numpy.add.at``'s sums, computed in rounds of distinct
indices (and one reduction per heavily repeated index) wherever the rows are wide enough.

The conformance kit checks the semantics on small generated cases; these cases are large enough
to take the fast path, with every axis, dtype, index distribution and aliasing.
"""

from __future__ import annotations

import numpy as np
import pytest

import arraycore
from arraycore.backends import numpy as numpy_backend


def _distributions(rng: np.random.Generator, n: int, size: int) -> dict[str, np.ndarray]:
    return {
        "uniform": rng.integers(0, size, n),
        "zipf": np.minimum(rng.zipf(1.2, n), size) - 1,  # a few indices repeated many times
        "one": np.full(n, size - 1),  # one index n times
        "distinct": rng.permutation(max(size, n))[:n] % size,
        "sorted": np.sort(rng.integers(0, size, n)),
    }


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "complex64", "int32", "uint8"])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_scatter_add_equals_add_at(dtype: str, axis: int) -> None:
    rng = np.random.default_rng(0)
    shape = [7, 24, 3]
    ax = axis % 3
    for name, indices in _distributions(rng, 300, shape[ax]).items():
        values_shape = list(shape)
        values_shape[ax] = len(indices)
        values = (rng.normal(size=values_shape) * 4).astype(dtype)
        out = (rng.normal(size=shape) * 4).astype(dtype)
        want = out.copy()
        np.add.at(want, (slice(None),) * ax + (indices,), values)
        got = numpy_backend._scatter_add(out, indices.astype(np.int64), values, axis)
        assert got is out
        if np.dtype(dtype).kind in "iu":
            np.testing.assert_array_equal(got, want, err_msg=name)
        else:
            rtol = {"float16": 1e-2, "float32": 1e-5, "complex64": 1e-5}.get(dtype, 1e-12)
            scale = np.abs(want).max()
            np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * scale, err_msg=name)


def test_scatter_add_fast_path_is_taken_and_matches_add_at_in_order(monkeypatch) -> None:
    """Rounds add each index's occurrences in their order, as add.at does: with at most
    ``_SCATTER_ROUNDS`` repeats the float32 result is add.at's bit for bit."""
    calls = []

    class _Add:
        def __getattr__(self, name):
            return getattr(np.add, name)

        def at(self, *args):
            calls.append(args[1])
            return np.add.at(*args)

    class _NumPy:  # the backend module's numpy, with add.at logged
        add = _Add()

        def __getattr__(self, name):
            return getattr(np, name)

    rng = np.random.default_rng(1)
    indices = rng.integers(0, 50, 400)  # at most ~20 repeats of an index
    values = rng.normal(size=(400, 32)).astype(np.float32)
    want = np.zeros((50, 32), np.float32)
    np.add.at(want, indices, values)
    monkeypatch.setattr(numpy_backend, "np", _NumPy())
    numpy_backend._scatter_add(np.zeros((50, 4), np.float32), indices, values[:, :4], 0)
    assert len(calls) == 1  # narrow rows: add.at
    calls.clear()
    got = numpy_backend._scatter_add(np.zeros((50, 32), np.float32), indices, values, 0)
    assert not calls
    np.testing.assert_array_equal(got, want)


def test_scatter_add_small_or_narrow_cases_use_add_at() -> None:
    rng = np.random.default_rng(2)
    for shape, n in (((10,), 5000), ((10, 4), 5000), ((10, 64), 8)):
        indices = rng.integers(0, 10, n)
        values = rng.normal(size=(n, *shape[1:]))
        want = np.zeros(shape)
        np.add.at(want, indices, values)
        got = numpy_backend._scatter_add(np.zeros(shape), indices, values, 0)
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_scatter_add_with_values_aliasing_out() -> None:
    base = np.arange(64 * 20, dtype=np.float64).reshape(64, 20)
    indices = np.arange(64)[::-1].copy()
    want = base.copy()
    np.add.at(want, indices, base.copy())
    got = numpy_backend._scatter_add(base, indices, base, 0)
    np.testing.assert_array_equal(got, want)


def test_namespace_scatter_add_through_the_fast_path(clean_env) -> None:
    xp = arraycore.namespace("numpy")
    rng = np.random.default_rng(3)
    indices = rng.integers(0, 30, 500)
    values = rng.normal(size=(500, 40))
    out = xp.zeros((30, 40), dtype=xp.float64)
    xp.inplace.scatter_add(out, xp.asarray(indices), xp.asarray(values))
    want = np.zeros((30, 40))
    np.add.at(want, indices, values)
    np.testing.assert_allclose(xp.to_numpy(out), want, rtol=1e-12)
    copied = xp.nn.scatter_add(xp.zeros((30, 40), dtype=xp.float64), xp.asarray(indices), values)
    np.testing.assert_allclose(xp.to_numpy(copied), want, rtol=1e-12)
