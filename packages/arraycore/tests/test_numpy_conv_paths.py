"""The NumPy backend's convolution paths (chunked im2col, the input gradient as a convolution,
batch-innermost columns, col2im) against arraycore's reference kernels, chunk boundaries
included."""

from __future__ import annotations

import numpy as np
import pytest

import arraycore
from arraycore import _nn
from arraycore.backends import _numpy_nn as fast

CASES = [
    # x shape, w shape, stride, padding, dilation
    ((5, 3, 20, 18), (4, 3, 3, 3), 1, 1, 1),  # 'same', the input gradient as a convolution
    ((5, 3, 20, 18), (4, 3, 3, 3), 1, "same", 2),
    ((5, 2, 19, 21), (3, 2, 4, 2), 1, "same", 1),  # even kernel: uneven padding
    ((5, 3, 20, 18), (4, 3, 3, 3), 2, 1, 1),  # strided: col2im
    ((5, 3, 20, 18), (4, 3, 5, 5), 1, 3, 1),  # padding beyond the kernel's span: col2im
    ((5, 3, 20, 18), (4, 3, 1, 1), 1, 0, 1),
    ((4, 6, 9, 9), (5, 6, 3, 3), 1, 1, 1),  # short rows: batch-innermost columns
    ((3, 2, 17, 30), (2, 2, 3, 5), 1, ((2, 0), (1, 3)), 1),
]


@pytest.fixture(params=[1 << 21, 1], ids=["one chunk", "one image per chunk"])
def chunk(request, monkeypatch):
    monkeypatch.setattr(fast, "_CHUNK_BYTES", request.param)
    return request.param


@pytest.mark.parametrize(("xs", "ws", "stride", "padding", "dilation"), CASES)
def test_matches_the_reference(chunk, xs, ws, stride, padding, dilation) -> None:
    xp = arraycore.namespace("numpy")
    rng = np.random.default_rng(0)
    x, w = rng.normal(size=xs), rng.normal(size=ws)
    kw = {"stride": stride, "padding": padding, "dilation": dilation}
    y = fast.conv2d(x, w, **kw)
    np.testing.assert_allclose(y, _nn.conv2d(xp, x, w, **kw), rtol=1e-10, atol=1e-10)
    dy = rng.normal(size=y.shape)
    np.testing.assert_allclose(
        fast.conv2d_backward_data(dy, w, xs, **kw),
        _nn.conv2d_backward_data(xp, dy, w, xs, **kw),
        rtol=1e-10,
        atol=1e-10,
    )
    np.testing.assert_allclose(
        fast.conv2d_backward_filter(x, dy, ws, **kw),
        _nn.conv2d_backward_filter(xp, x, dy, ws, **kw),
        rtol=1e-10,
        atol=1e-10,
    )


def test_float32_stays_float32() -> None:
    x = np.ones((2, 3, 20, 20), np.float32)
    w = np.ones((4, 3, 3, 3), np.float32)
    y = fast.conv2d(x, w, padding=1)
    assert y.dtype == np.float32
    assert fast.conv2d_backward_data(y, w, x.shape, padding=1).dtype == np.float32
    assert fast.conv2d_backward_filter(x, y, w.shape, padding=1).dtype == np.float32


@pytest.mark.parametrize("shape", [(6, 4), (5, 3, 7, 2), (1, 2, 1, 1), (4, 3, 0, 5)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_batch_norm_matches_the_reference(shape, dtype) -> None:
    from arraycore import _nn_batchnorm as ref

    xp = arraycore.namespace("numpy")
    rng = np.random.default_rng(1)
    c = shape[1]
    x = (rng.normal(size=shape) * 3 + 5).astype(dtype)  # a large mean: no cancellation
    gamma, beta = rng.normal(size=c).astype(dtype), rng.normal(size=c).astype(dtype)
    dy = rng.normal(size=shape).astype(dtype)
    tol = {"rtol": 1e-4, "atol": 1e-5} if dtype == "float32" else {"rtol": 1e-10, "atol": 1e-12}
    if 0 not in shape:
        got, want = (
            fast.batch_norm(x, gamma, beta, eps=1e-3),
            ref.batch_norm(xp, x, gamma, beta, 1e-3),
        )
        for a, b in zip(got, want, strict=True):
            assert a.dtype == b.dtype == np.dtype(dtype)
            np.testing.assert_allclose(a, b, **tol)
        mean, inv = want[1], want[2]
    else:
        mean, inv = np.zeros(c, dtype), np.ones(c, dtype)
    got = fast.batch_norm_backward(dy, x, gamma, mean, inv)
    want = ref.batch_norm_backward(xp, dy, x, gamma, mean, inv)
    for a, b in zip(got, want, strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_allclose(a, b, **tol)


def test_batch_norm_errors_name_the_op() -> None:
    with pytest.raises(ValueError, match="batch_norm: gamma has shape"):
        fast.batch_norm(np.ones((2, 3)), np.ones(4), np.ones(3))
    with pytest.raises(TypeError, match=r"batch_norm_backward: .*floating"):
        fast.batch_norm_backward(
            np.ones((2, 3), int), np.ones((2, 3)), np.ones(3), np.ones(3), np.ones(3)
        )


def _onednn():
    from arraycore.backends import _onednn

    if _onednn.library() is None:
        pytest.skip(f"oneDNN accelerator: {_onednn.status()}")
    return _onednn


@pytest.mark.parametrize(("xs", "ws", "stride", "padding", "dilation"), CASES)
def test_onednn_float32_matches_the_reference(xs, ws, stride, padding, dilation) -> None:
    onednn = _onednn()
    xp = arraycore.namespace("numpy")
    rng = np.random.default_rng(2)
    x, w = rng.normal(size=xs), rng.normal(size=ws)
    kw = {"stride": stride, "padding": padding, "dilation": dilation}
    y64 = _nn.conv2d(xp, x, w, **kw)
    x32, w32 = x.astype(np.float32), w.astype(np.float32)
    win = fast.conv_window("conv2d", x.shape, w.shape, stride, padding, dilation)
    assert onednn.conv_plan(win, ws[0], np.dtype("float32")) is not None
    y = fast.conv2d(x32, w32, **kw)
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, y64, rtol=1e-4, atol=1e-4)
    dy = rng.normal(size=y.shape)
    dx = fast.conv2d_backward_data(dy.astype(np.float32), w32, xs, **kw)
    np.testing.assert_allclose(
        dx, _nn.conv2d_backward_data(xp, dy, w, xs, **kw), rtol=1e-4, atol=1e-4
    )
    dw = fast.conv2d_backward_filter(x32, dy.astype(np.float32), ws, **kw)
    want = _nn.conv2d_backward_filter(xp, x, dy, ws, **kw)
    np.testing.assert_allclose(dw, want, rtol=1e-4, atol=1e-3)


def test_onednn_takes_strided_views_and_can_be_switched_off(monkeypatch) -> None:
    onednn = _onednn()
    rng = np.random.default_rng(3)
    x = rng.normal(size=(4, 6, 10, 10)).astype(np.float32)[:, ::2]  # a non-contiguous view
    w = rng.normal(size=(5, 3, 3, 3)).astype(np.float32)
    y = fast.conv2d(x, w, padding=1)
    monkeypatch.setattr(onednn, "conv_plan", lambda *args: None)
    np.testing.assert_allclose(y, fast.conv2d(x, w, padding=1), rtol=1e-4, atol=1e-4)


def test_onednn_off_by_environment() -> None:
    import subprocess
    import sys

    code = "from arraycore.backends import _onednn; print(_onednn.status())"
    env = {**__import__("os").environ, "ARRAYCORE_ONEDNN": "0"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.stdout.strip() == "off (ARRAYCORE_ONEDNN=0)", out


POOLS = [
    # x shape, kernel, stride, padding
    ((4, 3, 8, 8), 2, None, 0),  # tiles the image
    ((4, 3, 9, 7), 3, 2, 1),  # overlapping, padded, a remainder
    ((2, 2, 10, 10), 3, 1, 1),
    ((2, 3, 7, 9), (2, 3), (1, 2), (1, 1)),
]


@pytest.mark.parametrize(("xs", "kernel", "stride", "padding"), POOLS)
def test_onednn_max_pool_backward_matches_the_reference(xs, kernel, stride, padding) -> None:
    onednn = _onednn()
    rng = np.random.default_rng(7)
    x = rng.normal(size=xs).astype(np.float32)
    x[:, :, :3, :3] = 1.5  # ties: the first maximum of a window takes the gradient
    win = fast.pool_window("max_pool2d", xs, kernel, stride, padding)
    assert onednn.max_pool_plan(win, x.dtype, x.dtype) is not None
    y = fast.max_pool2d(x, kernel, stride, padding)
    dy = rng.normal(size=y.shape).astype(np.float32)
    dx = fast.max_pool2d_backward(dy, x, kernel, stride, padding)
    assert dx.dtype == np.float32
    want = _nn.max_pool2d_backward(
        np, dy.astype(np.float64), x.astype(np.float64), kernel, stride, padding
    )
    np.testing.assert_allclose(dx, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_max_pool_backward_with_non_finite_inputs_follows_the_reference(bad) -> None:
    rng = np.random.default_rng(8)
    x = rng.normal(size=(2, 2, 6, 6)).astype(np.float32)
    x[0, 1, 2, 3] = bad
    dy = rng.normal(size=(2, 2, 3, 3)).astype(np.float32)
    dx = fast.max_pool2d_backward(dy, x, 2)
    want = _nn.max_pool2d_backward(np, dy, x, 2)
    np.testing.assert_array_equal(dx, want)
