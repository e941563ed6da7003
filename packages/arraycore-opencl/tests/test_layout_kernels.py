"""The OpenCL backend's layout kernels and split products against NumPy: strided copies and
element-wise kernels whose work-items each take a piece of a row (pieces of every length, rows
that do not divide into them, broadcast and permuted operands, fused updates), ``im2row`` (the transposed convolution columns the filter gradient multiplies) and products
with a long reduction run as slices of ``k``."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import arraycore
from arraycore import nn_shapes

# ``xp`` (the first OpenCL device, or a skip) comes from conftest.py


# name -> (shape of the source, axes to permute or None, then the index applied)
VIEWS: dict[str, tuple[tuple[int, ...], tuple[int, ...] | None, Any]] = {
    "leading axes swapped (a conv's output)": ((16, 8, 64), (1, 0, 2), ...),
    "NCHW as channels first": ((4, 6, 8, 9), (1, 0, 2, 3), ...),
    "rows sliced, with an offset": ((130, 40), None, (slice(3, -1), slice(2, -5))),
    "every other row": ((256, 33), None, slice(None, None, 2)),
    "3-D slab": ((5, 70, 20), None, (slice(1, 4), slice(None, None, 3), slice(2, 18))),
    "permuted, then sliced": ((9, 70, 24), (1, 0, 2), (slice(2, 66), slice(1, 8), slice(3, 23))),
}


def _view(a: Any, permute: Any, index: Any, permute_dims: Any) -> Any:
    return (a if permute is None else permute_dims(a, permute))[index]


@pytest.mark.parametrize("piece", [5, 256])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int8", "int64", "bool"])
@pytest.mark.parametrize("name", sorted(VIEWS))
def test_strided_copies_match_numpy(
    xp: Any, monkeypatch: Any, name: str, dtype: str, piece: int
) -> None:
    if dtype not in xp.__array_namespace_info__().dtypes():
        pytest.skip(f"this OpenCL device has no {dtype}")
    monkeypatch.setattr(xp._backend.rt, "piece", piece)
    shape, permute, index = VIEWS[name]
    rng = np.random.default_rng(0)
    host = (rng.standard_normal(shape) * 50).astype(dtype)
    view = _view(xp.asarray(host), permute, index, xp.permute_dims)
    got = xp.to_numpy(xp.astype(view, view.dtype, copy=True))
    np.testing.assert_array_equal(got, _view(host, permute, index, np.transpose))


@pytest.mark.parametrize("piece", [0, 1, 3, 64, 256])
def test_element_wise_pieces_match_numpy(xp: Any, monkeypatch: Any, piece: int) -> None:
    """Every item is computed once, whatever the piece length: rows of 300 (not a multiple of
    any piece), one long axis, broadcast and permuted operands, ``where``, casts, ``setitem``
    into a strided view and a fused in-place chain. ``piece=0``: the kernels GPUs build (an
    item per work-item, no ``AC_PIECES``), built afresh for this test."""
    rt = xp._backend.rt
    if piece == 0:
        for cache in ("_programs", "_kernels", "_arg_dtypes"):
            monkeypatch.setattr(rt, cache, {})
        monkeypatch.setattr(rt, "pieces", False)
        piece = 1
    monkeypatch.setattr(rt, "piece", piece)
    rng = np.random.default_rng(2)
    a = rng.standard_normal((5, 7, 300)).astype(np.float32)
    b = rng.standard_normal((7, 1)).astype(np.float32)
    c = rng.standard_normal(300).astype(np.float32)
    da, db, dc = xp.asarray(a), xp.asarray(b), xp.asarray(c)
    np.testing.assert_array_equal(xp.to_numpy(da * da), a * a)
    np.testing.assert_array_equal(xp.to_numpy(da + db), a + b)
    np.testing.assert_array_equal(xp.to_numpy(dc - da), c - a)
    np.testing.assert_allclose(xp.to_numpy(xp.exp(dc)), np.exp(c), rtol=1e-6)  # one axis
    t = xp.permute_dims(da, (2, 0, 1))
    np.testing.assert_array_equal(xp.to_numpy(t * 2.0), np.transpose(a, (2, 0, 1)) * 2)
    np.testing.assert_array_equal(xp.to_numpy(xp.where(da > 0, da, db)), np.where(a > 0, a, b))
    np.testing.assert_array_equal(
        xp.to_numpy(xp.astype(da * 10, xp.int32)), (a * 10).astype(np.int32)
    )
    np.testing.assert_array_equal(xp.to_numpy(xp.greater(da, dc)), a > c)
    target, host = xp.zeros((5, 7, 600), dtype=xp.float32), np.zeros((5, 7, 600), np.float32)
    target[:, :, ::2] = da
    host[:, :, ::2] = a
    np.testing.assert_array_equal(xp.to_numpy(target), host)

    def update(v: Any, g: Any, lr: float) -> None:
        xp.inplace.multiply(g, lr, out=g)
        xp.inplace.subtract(v, g, out=v)

    step = xp.inplace.fuse(update, scalar_operands=True)
    v, g = xp.asarray(a.copy()), xp.asarray(a * 0.5)
    step(v, g, 0.25)
    want = a - (a * 0.5) * np.float32(0.25)
    np.testing.assert_array_equal(xp.to_numpy(v), want)


@pytest.mark.parametrize(
    ("shape", "kernel", "stride", "padding", "dilation"),
    [
        ((2, 3, 8, 9), (3, 3), 1, 1, 1),
        ((2, 3, 8, 9), (3, 2), 2, ((1, 0), (2, 1)), 1),
        ((1, 4, 7, 7), (3, 3), 1, 2, 2),
        ((3, 2, 5, 6), (1, 1), 1, 0, 1),
    ],
)
def test_im2row_is_the_transpose_of_im2col(
    xp: Any, shape: Any, kernel: Any, stride: Any, padding: Any, dilation: Any, monkeypatch: Any
) -> None:
    """``im2row`` (the rows CLBlast's filter gradient multiplies) is the columns transposed;
    with arraycore's GEMM there are no rows (the transposed columns are read in place)."""
    bk = xp._backend
    monkeypatch.setattr(bk.rt, "gemm_engine", "arraycore")
    assert bk.im2row(xp.zeros(shape, dtype=xp.float32), None) is None
    monkeypatch.setattr(bk.rt, "gemm_engine", "clblast")
    rng = np.random.default_rng(1)
    host = rng.standard_normal(shape).astype(np.float32)
    w_shape = (4, shape[1], *kernel)
    win = nn_shapes.conv_window("conv2d", shape, w_shape, stride, padding, dilation)
    transposed = xp.asarray(np.ascontiguousarray(host.transpose(0, 1, 3, 2)))
    for x in (xp.asarray(host), xp.permute_dims(transposed, (0, 1, 3, 2))):
        cols = xp.to_numpy(bk.im2col(x, win))
        rows = xp.to_numpy(bk.im2row(x, win))
        np.testing.assert_array_equal(rows, cols.T)


@pytest.mark.parametrize("piece", [1, 3, 256])
@pytest.mark.parametrize(
    ("shape", "kernel", "stride", "padding"),
    [
        ((2, 3, 9, 11), 2, 2, 0),  # windows inside, a ragged last row and column
        ((2, 3, 9, 11), 3, 2, 1),  # overlapping windows, padding: border windows
        ((1, 2, 6, 40), (2, 3), (2, 3), (1, 1)),  # non-overlapping with padding
    ],
)
def test_windowed_kernels_at_every_piece_match_numpy(
    xp: Any, monkeypatch: Any, piece: int, shape: Any, kernel: Any, stride: Any, padding: Any
) -> None:
    """Max pooling (forward and backward, NaNs and ties included) and the convolution columns
    (``im2col``, ``im2row``) whatever number of outputs of a row each work-item takes, on a
    contiguous and a strided input, against the NumPy backend."""
    monkeypatch.setattr(xp._backend.rt, "piece", piece)
    ref = arraycore.namespace("numpy")
    rng = np.random.default_rng(5)
    host = np.round(rng.standard_normal(shape), 1).astype(np.float32)  # ties in windows
    host[0, 0, 1, 1] = np.nan
    host[-1, -1, -1, -1] = np.nan
    transposed = xp.asarray(np.ascontiguousarray(host.transpose(0, 1, 3, 2)))
    for x in (xp.asarray(host), xp.permute_dims(transposed, (0, 1, 3, 2))):
        y = xp.nn.max_pool2d(x, kernel, stride=stride, padding=padding)
        want = ref.nn.max_pool2d(host, kernel, stride=stride, padding=padding)
        np.testing.assert_array_equal(xp.to_numpy(y), want)
        dy = rng.standard_normal(want.shape).astype(np.float32)
        got = xp.nn.max_pool2d_backward(xp.asarray(dy), x, kernel, stride=stride, padding=padding)
        np.testing.assert_allclose(  # overlapping windows: sums in another order
            xp.to_numpy(got),
            ref.nn.max_pool2d_backward(dy, host, kernel, stride=stride, padding=padding),
            rtol=1e-6,
            atol=1e-6,
        )
    win = nn_shapes.conv_window("conv2d", shape, (4, shape[1], 3, 3), 1, 1, 1)
    bk = xp._backend
    monkeypatch.setattr(bk.rt, "gemm_engine", "clblast")  # where im2row has rows to give
    x = xp.permute_dims(transposed, (0, 1, 3, 2))
    cols = xp.to_numpy(bk.im2col(x, win))  # checked through conv2d below
    np.testing.assert_array_equal(xp.to_numpy(bk.im2row(x, win)), cols.T)
    w = rng.standard_normal((4, shape[1], 3, 3)).astype(np.float32)
    np.testing.assert_allclose(
        xp.to_numpy(xp.nn.conv2d(x, xp.asarray(w), padding=1)),
        ref.nn.conv2d(host, w, padding=1),
        rtol=1e-5,
        atol=1e-5,
    )


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_setitem_into_strided_views_matches_numpy(xp: Any, name: str) -> None:
    """``x[key] = v`` writes through the same row copy where rows are long: the rest of ``x``
    stays as it was, and a value that is a view of ``x`` itself is read before it is written."""
    shape, permute, index = VIEWS[name]
    rng = np.random.default_rng(2)
    host = rng.standard_normal(shape).astype(np.float32)
    if permute is not None:
        host = np.ascontiguousarray(host.transpose(permute))
    target = host[index]
    value = rng.standard_normal(target.shape).astype(np.float32)
    x = xp.asarray(host)
    x[index] = xp.asarray(value)
    want = host.copy()
    want[index] = value
    np.testing.assert_array_equal(xp.to_numpy(x), want)
    if target.ndim == 2 and target.shape[0] > 1:  # overlapping: rows shifted by one
        x = xp.asarray(host)
        x[index][1:] = x[index][:-1]
        want = host.copy()
        want[index][1:] = host[index][:-1].copy()
        np.testing.assert_array_equal(xp.to_numpy(x), want)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("a_view", [False, True])
@pytest.mark.parametrize("b_view", [False, True])
def test_long_reductions_split_over_k_match_numpy(
    xp: Any, dtype: str, a_view: bool, b_view: bool, monkeypatch: Any
) -> None:
    """A product with a long ``k`` and a small output (a filter gradient's) runs on CLBlast as
    slices of ``k`` summed (``_gemm.split_k``), for either operand transposed in memory."""
    from arraycore_opencl import _gemm

    monkeypatch.setattr(xp._backend.rt, "gemm_engine", "clblast")

    m, n, k = 12, 40, 8192
    assert _gemm.split_k(m, n, k) > 1
    rng = np.random.default_rng(3)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    xa = xp.permute_dims(xp.asarray(np.ascontiguousarray(a.T)), (1, 0)) if a_view else xp.asarray(a)
    xb = xp.permute_dims(xp.asarray(np.ascontiguousarray(b.T)), (1, 0)) if b_view else xp.asarray(b)
    calls: list[int] = []
    real = _gemm._split_gemm
    monkeypatch.setattr(_gemm, "_split_gemm", lambda *args: calls.append(args[-1]) or real(*args))
    got = xp.to_numpy(xp.matmul(xa, xb))
    assert calls == [_gemm._SPLIT_K]
    want = a.astype(np.float64) @ b.astype(np.float64)
    rtol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * np.abs(want).max())


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(8, 4, 6, 5), (4, 70, 17, 1), (3, 2, 3, 3)])
def test_batch_norm_by_rows_gives_the_shared_kernels_bits(
    xp: Any, dtype: str, shape: Any, monkeypatch: Any
) -> None:
    """bn_normalize / bn_backward_data run a (n, c) row per work-item where rows are long; the
    results are the shared element-wise kernels' to the bit (and NumPy's to rounding)."""
    from arraycore_opencl import _nn_kernels

    rng = np.random.default_rng(4)
    x, dy = (rng.standard_normal(shape).astype(dtype) for _ in range(2))
    gamma, beta = (rng.standard_normal(shape[1]).astype(dtype) for _ in range(2))
    results = {}
    for rows in (True, False):
        monkeypatch.setattr(_nn_kernels, "_ROW_ITEMS", 16 if rows else 10**12)
        monkeypatch.setattr(_nn_kernels, "_ROW_COUNT", 1)
        y, mean, inv_std = xp.nn.batch_norm(xp.asarray(x), xp.asarray(gamma), xp.asarray(beta))
        grads = xp.nn.batch_norm_backward(
            xp.asarray(dy), xp.asarray(x), xp.asarray(gamma), mean, inv_std
        )
        results[rows] = [xp.to_numpy(a) for a in (y, *grads)]
    for by_rows, by_items in zip(results[True], results[False], strict=True):
        np.testing.assert_array_equal(by_rows, by_items)
    ref = arraycore.namespace("numpy")
    want = ref.nn.batch_norm(x, gamma, beta)[0]
    np.testing.assert_allclose(
        results[True][0], want, rtol=1e-4 if dtype == "float32" else 1e-12, atol=1e-5
    )


@pytest.mark.parametrize("shape", [(1024, 512), (5000, 37), (3, 4, 50), (7, 1), (2, 16)])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "bool"])
def test_column_reductions_by_runs_of_outputs_match_one_output_per_item(
    xp: Any, shape: Any, dtype: str
) -> None:
    """Reductions over leading axes of a contiguous array (a bias gradient's column sums) take
    runs of consecutive outputs per work-item on CPU devices: the same values, bit for bit, as
    the one-output-per-work-item kernel gives for the same numbers read through a strided view
    (which that kernel serves), and NumPy's to rounding; chunked past 2048 rows."""
    if dtype not in xp.__array_namespace_info__().dtypes():
        pytest.skip(f"the device has no {dtype}")
    rng = np.random.default_rng(7)
    a = (rng.standard_normal(shape) * 3).astype(dtype)
    wide = np.zeros((*shape[:-1], 2 * shape[-1]), dtype=dtype)
    wide[..., ::2] = a
    x = xp.asarray(a)
    strided = xp.asarray(wide)[..., ::2]  # the same values, outputs two items apart
    axes = tuple(range(len(shape) - 1))
    ops = ["sum", "max", "min", "prod"] if dtype != "bool" else []
    for op in ops:
        got = xp.to_numpy(getattr(xp, op)(x, axis=axes))
        np.testing.assert_array_equal(got, xp.to_numpy(getattr(xp, op)(strided, axis=axes)))
        if op != "prod":  # (products of thousands overflow: compared between kernels only)
            want = getattr(np, op)(a.astype(np.float64), axis=axes)
            tol = 1e-4 if dtype == "float32" else 1e-12  # float32 sums of thousands: atol too
            np.testing.assert_allclose(got, want, rtol=tol, atol=tol * 10 * np.abs(a).max())
    for op in ("any", "all"):
        got = xp.to_numpy(getattr(xp, op)(x, axis=axes))
        np.testing.assert_array_equal(got, getattr(np, op)(a, axis=axes))


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
@pytest.mark.parametrize(
    ("shape", "axis"),
    [((50, 64), 0), ((7, 40), 0), ((3, 9, 20), 1), ((4, 6, 130), 0), ((6, 5, 3), 0), ((5, 9), 1)],
)
def test_take_by_rows_matches_numpy(xp: Any, shape: Any, axis: int, dtype: str) -> None:
    """``take`` from a contiguous array whose slices after the axis hold at least 16 items runs
    by rows (an embedding lookup): NumPy's values, from an array with an offset into its buffer
    too, repeated and negative ids included; shorter slices and strided arrays take the
    general kernel."""
    rng = np.random.default_rng(3)
    a = (rng.standard_normal((2, *shape)) * 5).astype(dtype)
    ids = rng.integers(-shape[axis], shape[axis], size=37)
    ids[:4] = [0, 0, shape[axis] - 1, -1]
    x = xp.asarray(a)
    for source, host in ((x[1], a[1]), (x[0], a[0])):  # x[1] starts past the buffer's start
        got = xp.to_numpy(xp.take(source, xp.asarray(ids), axis=axis))
        np.testing.assert_array_equal(got, np.take(host, ids, axis=axis))
    strided = xp.permute_dims(x[1], tuple(reversed(range(len(shape)))))
    got = xp.to_numpy(xp.take(strided, xp.asarray(ids), axis=len(shape) - 1 - axis))
    np.testing.assert_array_equal(got, np.take(a[1].T, ids, axis=len(shape) - 1 - axis))
