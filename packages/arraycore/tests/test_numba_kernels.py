"""The NumPy backend's numba kernels (``arraycore[numba]``): float32 batch normalisation forward
and backward against a float64 reference, NaN kept to its channel, scatter-add to the bit of
numpy.add.at, max-pool backward by the reference's rules, layer normalisation, the NumPy code for what the kernels do not take, and the OpenMP thread count
followed."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import arraycore
from arraycore.backends import _numba
from arraycore.testing import nn_reference

xp = arraycore.namespace("numpy")

SHAPES = [(32, 16, 8, 8), (7, 5, 3, 9), (64, 12), (1, 4, 1, 1), (3, 2, 1, 17)]


@pytest.fixture
def kernels():
    if _numba.kernels() is None:
        pytest.skip(f"numba accelerator: {_numba.status()}")
    return _numba


def _data(shape, seed=0):
    rng = np.random.default_rng(seed)
    c = shape[1]
    x = (rng.normal(size=shape) * 3 + 2).astype(np.float32)
    dy = rng.normal(size=shape).astype(np.float32)
    gamma = rng.normal(size=c).astype(np.float32)
    beta = rng.normal(size=c).astype(np.float32)
    return x, dy, gamma, beta


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_batch_norm_matches_the_float64_reference(kernels, shape) -> None:
    x, dy, gamma, beta = _data(shape)
    got = kernels.batch_norm(x, gamma, beta, 1e-3)
    assert got is not None  # the kernel took it
    y, mean, inv_std = got
    want_y, want_mean, want_inv = nn_reference.batch_norm(x, gamma, beta, 1e-3)
    assert (y.shape, y.dtype, mean.dtype, inv_std.dtype) == (
        x.shape,
        np.float32,
        np.float32,
        np.float32,
    )
    np.testing.assert_allclose(y, want_y, rtol=1e-5, atol=2e-5)
    np.testing.assert_allclose(mean, want_mean, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(inv_std, want_inv, rtol=1e-5)
    # the namespace's op is the kernel's result
    for a, b in zip(xp.nn.batch_norm(x, gamma, beta, eps=1e-3), got, strict=True):
        np.testing.assert_array_equal(a, b)

    grads = kernels.batch_norm_backward(dy, x, gamma, mean, inv_std)
    assert grads is not None
    want = nn_reference.batch_norm_backward(dy, x, gamma, 1e-3)
    for g, w in zip(grads, want, strict=True):
        assert g.dtype == np.float32 and g.shape == w.shape
        scale = float(np.abs(w).max()) or 1.0
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5 * scale)
    for a, b in zip(xp.nn.batch_norm_backward(dy, x, gamma, mean, inv_std), grads, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_batch_norm_relu_is_the_pair_in_one_pass(kernels, shape) -> None:
    """The fused kernels give the ReLU of the plain kernel's output to the bit (same statistics,
    no -0.0), and the gradients of the plain kernel given ``relu_backward``'s ``dy`` to
    rounding (the compiler may contract the gated product differently); the namespace's ops
    are the kernels' results."""
    x, dy, gamma, beta = _data(shape)
    x.reshape(-1)[:3] = [np.nan, -0.0, 0.0]
    y, mean, inv_std = kernels.batch_norm(x, gamma, beta, 1e-3)
    fused = kernels.batch_norm(x, gamma, beta, 1e-3, relu=True)
    assert fused is not None
    np.testing.assert_array_equal(fused[0], np.maximum(y, 0.0))
    assert not np.signbit(fused[0]).any()
    np.testing.assert_array_equal(fused[1], mean)
    np.testing.assert_array_equal(fused[2], inv_std)
    for a, b in zip(xp.nn.batch_norm_relu(x, gamma, beta, eps=1e-3), fused, strict=True):
        np.testing.assert_array_equal(a, b)

    x = _data(shape)[0]
    y, mean, inv_std = kernels.batch_norm(x, gamma, beta, 1e-3, relu=True)
    if x.shape[0] > 1:  # both sides of the ReLU are exercised
        assert (y == 0).any() and (y > 0).any()
    want = kernels.batch_norm_backward(xp.nn.relu_backward(dy, y), x, gamma, mean, inv_std)
    grads = kernels.batch_norm_backward(dy, x, gamma, mean, inv_std, y)
    assert grads is not None
    for g, w in zip(grads, want, strict=True):
        assert g.dtype == np.float32 and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6 * float(np.abs(w).max()))
    namespace = xp.nn.batch_norm_relu_backward(dy, x, gamma, mean, inv_std, y)
    for a, b in zip(namespace, grads, strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_nan_stays_in_its_channel(kernels) -> None:
    x, dy, gamma, beta = _data((4, 3, 5, 5))
    x[2, 1, 3, 3] = np.nan
    y, mean, inv_std = kernels.batch_norm(x, gamma, beta, 1e-5)
    assert np.isnan(y[:, 1]).all() and np.isnan(mean[1])
    assert np.isfinite(y[:, [0, 2]]).all() and np.isfinite(mean[[0, 2]]).all()
    dx, dgamma, dbeta = kernels.batch_norm_backward(dy, x, gamma, mean, inv_std)
    assert np.isnan(dx[:, 1]).all() and np.isfinite(dx[:, [0, 2]]).all()
    assert np.isnan(dgamma[1]) and np.isfinite(dbeta).all()


@pytest.mark.parametrize(
    "case",
    ["float64", "strided", "empty batch"],
)
def test_what_the_kernels_do_not_take_runs_the_numpy_code(kernels, case) -> None:
    x, _, gamma, beta = _data((6, 4, 5, 5))
    if case == "float64":
        x, gamma, beta = x.astype(np.float64), gamma.astype(np.float64), beta.astype(np.float64)
    elif case == "strided":
        x = np.repeat(x, 2, axis=3)[..., ::2]
    else:
        x = x[:0]
    assert kernels.batch_norm(x, gamma, beta, 1e-5) is None
    y, mean, inv_std = xp.nn.batch_norm(x, gamma, beta)
    if x.size:
        np.testing.assert_allclose(
            y, nn_reference.batch_norm(x, gamma, beta, 1e-5)[0], rtol=1e-4, atol=1e-4
        )
    assert y.shape == x.shape and y.dtype == x.dtype
    assert mean.shape == inv_std.shape == (4,)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    ("out_shape", "n"), [((64, 64), 1024), ((100, 3, 5), 700), ((7,), 50), ((5, 2), 1)], ids=str
)
def test_scatter_add_rows_is_add_at_to_the_bit(kernels, dtype, out_shape, n) -> None:
    """Rows added in numpy.add.at's order: the same sums exactly, negative indices from the end,
    into an ``out`` that already holds values; ``inplace.scatter_add`` runs the kernel."""
    rng = np.random.default_rng(3)
    m = out_shape[0]
    indices = rng.integers(-m, m, n)
    values = rng.normal(size=(n, *out_shape[1:])).astype(dtype)
    start = rng.normal(size=out_shape).astype(dtype)
    want = start.copy()
    np.add.at(want, indices, values)
    got = start.copy()
    assert kernels.scatter_add(got, indices, values, 0)
    np.testing.assert_array_equal(got, want)
    got = start.copy()
    xp.inplace.scatter_add(got, indices, values, axis=0)
    np.testing.assert_array_equal(got, want)


def test_scatter_add_leaves_what_it_does_not_take_to_numpy(kernels) -> None:
    """Another axis, an integer or mixed dtype, overlapping memory or a non-contiguous ``out``
    are not taken; an index out of range is not taken and leaves ``out`` untouched (the namespace's
    checks report it before any kernel runs)."""
    out = np.zeros((4, 3), np.float32)
    vals = np.ones((2, 3), np.float32)
    idx = np.array([0, 1])
    assert not kernels.scatter_add(out, idx, np.ones((4, 2), np.float32), 1)
    assert not kernels.scatter_add(np.zeros((4, 3), np.int32), idx, vals.astype(np.int32), 0)
    assert not kernels.scatter_add(out, idx, vals.astype(np.float64), 0)
    assert not kernels.scatter_add(out, idx, out[:2], 0)
    assert not kernels.scatter_add(np.zeros((3, 4), np.float32).T, idx, vals, 0)
    assert not kernels.scatter_add(out, np.array([0, 4]), vals, 0)
    assert not kernels.scatter_add(out, np.array([-5, 0]), vals, 0)
    assert not out.any()
    with pytest.raises(IndexError, match="scatter_add"):
        xp.inplace.scatter_add(out, np.array([0, 4]), vals, axis=0)
    assert not out.any()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    ("shape", "axis"), [((8, 16, 24, 24), 1), ((300, 200), 1), ((64, 10, 80), 2)], ids=str
)
def test_bias_relu_kernels_match_numpy(kernels, dtype, shape, axis):
    """The kernels take large arrays (images by channel, rows of a dense layer in blocks): the
    forward and ``dx`` to the bit of NumPy's ``maximum(x + b, 0)`` and ``dy * (y > 0)``, in
    place too; ``dbias`` to rounding (float64 sums per channel, per block of rows)."""
    rng = np.random.default_rng(9)
    x = rng.normal(size=shape).astype(dtype)
    b = rng.normal(size=shape[axis]).astype(dtype)
    along = [1] * len(shape)
    along[axis] = shape[axis]
    want = np.maximum(x + b.reshape(along), 0.0)
    y = kernels.bias_relu(x, b, axis, np.empty_like(x))
    assert y is not None  # the kernel took it
    np.testing.assert_array_equal(y, want)
    inplace = x.copy()
    assert kernels.bias_relu(inplace, b, axis, inplace) is inplace
    np.testing.assert_array_equal(inplace, want)
    dy = rng.normal(size=shape).astype(dtype)
    got = kernels.bias_relu_backward(dy, y, axis)
    assert got is not None
    dx, db = got
    np.testing.assert_array_equal(dx, dy * (want > 0))
    others = tuple(a for a in range(len(shape)) if a != axis)
    np.testing.assert_allclose(db, dx.astype(np.float64).sum(axis=others), rtol=1e-4, atol=1e-3)
    assert kernels.bias_relu(x[:2, :2], b[:2], 1, np.empty((2, 2), dtype)) is None  # small
    base = np.zeros(x.size + 16, dtype)  # an out overlapping x, shifted: NumPy's (buffered)
    assert (
        kernels.bias_relu(base[: x.size].reshape(shape), b, axis, base[16:].reshape(shape)) is None
    )


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    ("shape", "kernel", "stride", "pads"),
    [
        ((4, 3, 8, 8), (2, 2), (2, 2), ((0, 0), (0, 0))),  # 2x2 tiles: the dedicated kernel
        ((2, 3, 7, 9), (2, 2), (2, 2), ((0, 0), (0, 0))),  # ... and the row, column left out
        ((2, 3, 6, 75), (2, 2), (2, 2), ((0, 0), (0, 0))),  # ... rows longer than a vector
        ((2, 2, 9, 7), (3, 3), (2, 2), ((1, 1), (1, 1))),  # overlapping, padded
        ((2, 3, 6, 5), (3, 2), (1, 2), ((1, 0), (0, 1))),  # asymmetric
        ((1, 2, 5, 5), (5, 5), (1, 1), ((2, 2), (2, 2))),
    ],
    ids=str,
)
def test_max_pool_backward_matches_the_reference(kernels, dtype, shape, kernel, stride, pads):
    """Each window's gradient goes to its first maximum; NaN wins (the first NaN), infinities
    and all -inf windows, ties and padding follow the reference loop."""
    from arraycore.nn_shapes import pool_window

    rng = np.random.default_rng(5)
    x = rng.integers(-3, 3, size=shape).astype(dtype)  # many ties
    flat = x.reshape(-1)
    flat[rng.choice(flat.size, 4, replace=False)] = [np.nan, np.inf, -np.inf, np.nan]
    x[0, 0, :3, :3] = -np.inf
    win = pool_window("max_pool2d_backward", shape, kernel, stride, pads)
    dy = rng.normal(size=(win.n, win.c, win.out_h, win.out_w)).astype(dtype)
    got = kernels.max_pool2d_backward(dy, x, win)
    assert got is not None and got.dtype == dtype
    want = nn_reference.max_pool2d_backward(dy, x, kernel, stride, pads)
    np.testing.assert_allclose(got, want.astype(dtype), rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(xp.nn.max_pool2d_backward(dy, x, kernel, stride, pads), got)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(4, 3, 8, 8), (2, 3, 7, 9), (2, 3, 6, 75)], ids=str)
def test_max_pool_2x2_matches_the_reference(kernels, dtype, shape):
    """The 2x2 forward kernel: each window's first maximum to the bit (-0.0 before 0.0), NaN
    wins, infinities of either sign, the odd row and column left out; other geometries are not
    its business."""
    from arraycore.nn_shapes import pool_window

    rng = np.random.default_rng(6)
    x = rng.integers(-3, 3, size=shape).astype(dtype)  # many ties
    x[x == 0] = rng.choice([0.0, -0.0], size=int((x == 0).sum()))
    flat = x.reshape(-1)
    flat[rng.choice(flat.size, 5, replace=False)] = [np.nan, np.inf, -np.inf, np.nan, np.inf]
    x[0, 0, :2, :2] = -np.inf
    win = pool_window("max_pool2d", shape, 2, None, 0)
    got = kernels.max_pool2d(x, win)
    assert got is not None and got.dtype == dtype
    want = nn_reference.max_pool2d(x, (2, 2), (2, 2), ((0, 0), (0, 0))).astype(dtype)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    assert kernels.max_pool2d(x, pool_window("max_pool2d", shape, 3, 2, 1)) is None


@pytest.mark.parametrize(
    ("shape", "k"), [((64, 128), 1), ((4, 7, 33), 1), ((3, 4, 5), 2), ((1, 8), 1)], ids=str
)
def test_layer_norm_matches_the_float64_reference(kernels, shape, k) -> None:
    rng = np.random.default_rng(7)
    x = (rng.normal(size=shape) * 5 + 3).astype(np.float32)
    dy = rng.normal(size=shape).astype(np.float32)
    norm = shape[len(shape) - k :]
    gamma, beta = (rng.normal(size=norm).astype(np.float32) for _ in range(2))
    got = kernels.layer_norm(x, gamma, beta, 1e-5)
    assert got is not None  # the kernel took it
    y, mean, inv_std = got
    want_y, want_mean, want_inv = nn_reference.layer_norm(x, gamma, beta, 1e-5)
    np.testing.assert_allclose(y, want_y, rtol=1e-5, atol=2e-5)
    np.testing.assert_allclose(mean, want_mean, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(inv_std, want_inv, rtol=1e-5)
    grads = kernels.layer_norm_backward(dy, x, gamma, mean, inv_std)
    assert grads is not None
    want = nn_reference.layer_norm_backward(dy, x, gamma, 1e-5)
    for got_g, want_g in zip(grads, want, strict=True):
        assert got_g.dtype == np.float32 and got_g.shape == want_g.shape
        np.testing.assert_allclose(got_g, want_g, rtol=1e-4, atol=1e-4)
    for a, b in zip(xp.nn.layer_norm_backward(dy, x, gamma, mean, inv_std), grads, strict=True):
        np.testing.assert_array_equal(a, b)  # the namespace's op is the kernel's result


def test_kernels_follow_the_openmp_thread_count(kernels) -> None:
    import numba

    x, _, gamma, beta = _data((8, 4, 6, 6))
    with arraycore.threads(1):
        kernels.batch_norm(x, gamma, beta, 1e-5)
        assert numba.get_num_threads() == 1
    kernels.batch_norm(x, gamma, beta, 1e-5)
    from arraycore.backends import _openmp

    want = min(
        _openmp.max_threads() or numba.config.NUMBA_NUM_THREADS, numba.config.NUMBA_NUM_THREADS
    )
    assert numba.get_num_threads() == want
    if _openmp.max_threads():  # libgomp present: one OpenMP pool, oneDNN's and numba's
        assert numba.threading_layer() == "omp"
    assert "numba " in kernels.status()


def test_switched_off_by_the_environment() -> None:
    code = (
        "import numpy as np, arraycore\n"
        "from arraycore.backends import _numba\n"
        "x = np.ones((4, 3), np.float32); g = np.ones(3, np.float32)\n"
        "arraycore.namespace('numpy').nn.batch_norm(x, g, g)\n"
        "print(_numba.status())\n"
    )
    env = dict(os.environ, ARRAYCORE_NUMBA="0")
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "off (ARRAYCORE_NUMBA=0)"


def test_bias_relu_rejects_mixed_dtypes():
    """float32 images and a float64 bias: the error names the op and both dtypes (the NumPy
    backend's inline checks send anything unusual to the full ones)."""
    x = np.zeros((40, 1000), np.float32)
    with pytest.raises(TypeError, match=r"bias_relu: dtypes differ \(x float32, bias float64\)"):
        xp.nn.bias_relu(x, np.zeros(1000))
    with pytest.raises(TypeError, match=r"dtypes differ \(x float32, bias float32, out float64\)"):
        xp.nn.bias_relu(x, np.zeros(1000, np.float32), out=np.zeros((40, 1000)))
    with pytest.raises(TypeError, match=r"bias_relu_backward: dtypes differ"):
        xp.nn.bias_relu_backward(x, np.zeros((40, 1000)))


def test_the_first_compile_on_a_machine_is_announced_once(kernels, tmp_path) -> None:
    """A cold kernel cache: one PerformanceWarning saying the kernels compile on first use and
    where they are cached; the next process finds them there and says nothing."""
    code = (
        "import warnings, numpy as np, arraycore\n"
        "warnings.simplefilter('always')\n"
        "x = np.ones((4, 3, 2, 2), np.float32); g = np.ones(3, np.float32)\n"
        "with warnings.catch_warnings(record=True) as seen:\n"
        "    warnings.simplefilter('always')\n"
        "    for _ in range(2):\n"
        "        arraycore.namespace('numpy').nn.batch_norm(x, g, g)\n"
        "print(sum('numba compiles' in str(w.message) for w in seen))\n"
        "print([str(w.message) for w in seen if 'numba compiles' in str(w.message)])\n"
    )
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path))
    runs = [
        subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        ).stdout.splitlines()
        for _ in range(2)
    ]
    assert runs[0][0] == "1", runs[0]
    assert str(tmp_path) in runs[0][1] and "first use" in runs[0][1]
    assert runs[1][0] == "0", "the kernels were cached: nothing to announce"
