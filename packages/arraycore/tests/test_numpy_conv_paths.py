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
