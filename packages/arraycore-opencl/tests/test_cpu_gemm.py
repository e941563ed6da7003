"""arraycore's GEMM kernels for CPU devices (``_cpu_gemm``) against NumPy in float64: every
layout the kernels read (rows or columns contiguous, offsets, leading dimensions wider than the
matrix), edge tiles of every size, ``k`` shorter and longer than a vector and than a packed
block, batches with broadcast and non-collapsible batch axes, the split of a long ``k``; and the
choice between them and CLBlast (``ARRAYCORE_OPENCL_GEMM``)."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import numpy as np
import pytest

import arraycore
from arraycore_opencl import _cpu_gemm

# ``xp`` (the first OpenCL device, or a skip) comes from conftest.py


@pytest.fixture
def own(xp: Any, monkeypatch: Any) -> Any:
    """``xp`` with arraycore's kernels running every float product above the small-product
    threshold, and a count of their launches by kernel name."""
    from arraycore_opencl import _backend

    rt = xp._backend.rt
    monkeypatch.setattr(rt, "gemm_engine", "arraycore")
    monkeypatch.setattr(_backend, "_SMALL_GEMM", 0)
    launches: list[str] = []
    real = rt.launch_tiles

    def counted(kernel: Any, tiles: Any, *args: Any) -> None:
        launches.append(kernel.function_name)
        real(kernel, tiles, *args)

    monkeypatch.setattr(rt, "launch_tiles", counted)
    xp.gemm_launches = launches
    return xp


def _dtypes(xp: Any) -> list[str]:
    return [d for d in ("float32", "float64") if d in xp.__array_namespace_info__().dtypes()]


def _check(got: Any, want: np.ndarray, dtype: str, k: int) -> None:
    rtol = (2e-6 if dtype == "float32" else 1e-14) * max(1.0, np.sqrt(k))
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * np.abs(want).max())


def _stored(xp: Any, a: np.ndarray, transposed: bool, pad: int) -> Any:
    """``a`` on the device as a view: its transpose stored (if ``transposed``), in a buffer
    ``pad`` columns wider than it, starting one row and column in (an offset)."""
    host = np.ascontiguousarray(a.T) if transposed else a
    rows, cols = host.shape
    wide = np.zeros((rows + 1, cols + 1 + pad), dtype=a.dtype)
    wide[1:, 1 : cols + 1] = host
    view = xp.asarray(wide)[1:, 1 : cols + 1]
    return xp.permute_dims(view, (1, 0)) if transposed else view


@pytest.mark.parametrize("layout", ["nn", "tn", "nt", "tt"])
def test_every_edge_tile_and_layout_matches_numpy(own: Any, layout: str) -> None:
    """m and n running through every remainder of the kernels' tiles, k through the vector and
    packed-block boundaries; operands as offset views with wider rows, either transposed."""
    xp = own
    rng = np.random.default_rng(11)
    _, (w, mr) = xp._backend.rt.gemm_kernel("float32", "gemm_nn")
    ms = sorted({1, mr - 1, mr + 1, 2 * mr + 3, 37})
    ns = sorted({1, 3, w - 1, w + 1, 2 * w, 2 * w + 5, 70})
    ks = [1, w - 1, w + 3, _cpu_gemm.KC + 5]
    for dtype in _dtypes(xp):
        for m in ms:
            for n in ns:
                for k in ks:
                    a = rng.standard_normal((m, k))
                    b = rng.standard_normal((k, n))
                    x = _stored(xp, a.astype(dtype), layout[0] == "t", pad=3)
                    y = _stored(xp, b.astype(dtype), layout[1] == "t", pad=5)
                    got = xp.to_numpy(x @ y)
                    _check(got, a.astype(dtype).astype(np.float64) @ b.astype(dtype), dtype, k)
    # (a single row or step of k reads as either layout: those may take another kernel)
    assert xp.gemm_launches.count(f"gemm_{layout}") > len(xp.gemm_launches) // 2


def test_batches_broadcast_and_share_operands(own: Any) -> None:
    """A batch is one launch with a stride per operand: 0 for an operand every product shares,
    one stride for batch axes that collapse; axes that do not collapse are copied first."""
    xp = own
    rng = np.random.default_rng(12)
    for dtype in _dtypes(xp):
        a = rng.standard_normal((4, 1, 70, 50)).astype(dtype)
        b = rng.standard_normal((3, 50, 90)).astype(dtype)
        w = rng.standard_normal((90, 50)).astype(dtype)
        x, y, v = xp.asarray(a), xp.asarray(b), xp.asarray(w)
        _check(xp.to_numpy(x @ y), a.astype(np.float64) @ b, dtype, 50)
        _check(xp.to_numpy(x @ v.T), a.astype(np.float64) @ w.T, dtype, 50)
        # batch axes (2, 3) of a (3, 2) layout do not collapse into one stride
        c = rng.standard_normal((3, 2, 40, 60)).astype(dtype)
        z = xp.permute_dims(xp.asarray(c), (1, 0, 2, 3))
        d = rng.standard_normal((2, 3, 60, 30)).astype(dtype)
        want = np.transpose(c, (1, 0, 2, 3)).astype(np.float64) @ d
        _check(xp.to_numpy(z @ xp.asarray(d)), want, dtype, 60)
    assert xp.gemm_launches and set(xp.gemm_launches) <= {"gemm_nn", "gemm_nt"}
    assert len(xp.gemm_launches) == 3 * len(_dtypes(xp))  # one launch a product


@pytest.mark.parametrize("transposed", ["", "a", "b", "ab"])
def test_long_k_with_few_columns_runs_in_slices(
    own: Any, transposed: str, monkeypatch: Any
) -> None:
    """A filter gradient's shape (few rows and columns, a long k) runs as slices of k in one
    launch, summed, with either operand transposed in memory: the same values."""
    xp = own
    m, n, k = 16, 40, 32768
    assert _cpu_gemm._split(-(-n // 32), -(-m // 8), k, 8) > 1
    sums: list[Any] = []
    real = _cpu_gemm.sum_slices
    monkeypatch.setattr(
        _cpu_gemm, "sum_slices", lambda bk, p, o: sums.append(p.shape) or real(bk, p, o)
    )
    rng = np.random.default_rng(13)
    for dtype in _dtypes(xp):
        a = rng.standard_normal((m, k)).astype(dtype)
        b = rng.standard_normal((k, n)).astype(dtype)
        sums.clear()
        x, y = _stored(xp, a, "a" in transposed, pad=0), _stored(xp, b, "b" in transposed, pad=3)
        got = xp.to_numpy(x @ y)
        assert len(sums) == 1 and sums[0][1:] == (m, n) and sums[0][0] > 1
        _check(got, a.astype(np.float64) @ b, dtype, k)


def _engine(value: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "ARRAYCORE_OPENCL_GEMM"}
    if value is not None:
        env["ARRAYCORE_OPENCL_GEMM"] = value
    script = (
        "import arraycore, numpy as np\n"
        "xp = arraycore.namespace('opencl', device=0)\n"
        "rt = xp._backend.rt\n"
        "a = xp.asarray(np.ones((200, 300), np.float32))\n"
        "print(rt.gemm_engine, 'cpu' if rt.pieces else 'other', float(xp.sum(a @ a.T)))\n"
    )
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=600
    )


@pytest.mark.parametrize("value", [None, "auto", "clblast", "arraycore", "CLBlast"])
def test_the_environment_chooses_the_gemm(xp: Any, value: str | None) -> None:
    """Unset or ``auto``: arraycore's kernels on CPU devices, CLBlast on others; ``clblast`` and
    ``arraycore`` (any case) force one; both give the product."""
    proc = _engine(value)
    assert proc.returncode == 0, proc.stderr[-2000:]
    engine, kind, total = proc.stdout.split()
    if value in (None, "auto"):
        assert engine == ("arraycore" if kind == "cpu" else "clblast")
    else:
        assert engine == value.lower()
    assert float(total) == 200 * 200 * 300


def test_a_wrong_gemm_choice_names_the_variable(xp: Any) -> None:
    proc = _engine("cublas")
    assert proc.returncode != 0
    assert "ARRAYCORE_OPENCL_GEMM='cublas'" in proc.stderr
    assert "'arraycore', 'clblast' or 'auto'" in proc.stderr


def test_info_names_the_gemm(monkeypatch: Any) -> None:
    from arraycore_opencl import OpenCLBackend

    monkeypatch.delenv("ARRAYCORE_OPENCL_GEMM", raising=False)
    assert "GEMM: arraycore's kernels on CPU devices, CLBlast on others" in OpenCLBackend.version()
    monkeypatch.setenv("ARRAYCORE_OPENCL_GEMM", "clblast")
    assert (
        "GEMM: clblast on every device (ARRAYCORE_OPENCL_GEMM=clblast)" in OpenCLBackend.version()
    )


@pytest.mark.parametrize("per_image", [True, False])
@pytest.mark.parametrize(
    ("x_shape", "w_shape", "geometry"),
    [
        # taps (27) under pixels (64): the filter gradient sums per-image products
        ((3, 3, 8, 8), (5, 3, 3, 3), {"padding": 1}),
        # taps (72) over pixels (16): dy copied channels first, one product
        ((2, 8, 6, 6), (4, 8, 3, 3), {"stride": 2, "padding": ((1, 2), (0, 1))}),
    ],
)
def test_convolutions_multiply_per_image_or_whole(
    own: Any, per_image: bool, x_shape: Any, w_shape: Any, geometry: Any, monkeypatch: Any
) -> None:
    """The convolutions' products as a batch of per-image products read in place (where the
    GEMM reads strided batches) or as one product of the whole batch: the reference's values
    either way, forward and both gradients."""
    xp = own
    backend = type(xp._backend)
    if not per_image:
        monkeypatch.setattr(backend, "matmul_reads_batch_strides", lambda self, dtype: False)
    assert xp._backend.matmul_reads_batch_strides(np.dtype("float32")) is per_image
    ref = arraycore.namespace("numpy")
    rng = np.random.default_rng(14)
    x = rng.standard_normal(x_shape)
    w = rng.standard_normal(w_shape)
    y = ref.nn.conv2d(x, w, **geometry)
    dy = rng.standard_normal(y.shape)
    launches = len(xp.gemm_launches)
    got = xp.nn.conv2d(xp.asarray(x), xp.asarray(w), **geometry)
    assert got.shape == y.shape
    np.testing.assert_allclose(xp.to_numpy(got), y, rtol=1e-12, atol=1e-12)
    got = xp.nn.conv2d_backward_data(xp.asarray(dy), xp.asarray(w), x.shape, **geometry)
    want = ref.nn.conv2d_backward_data(dy, w, x.shape, **geometry)
    np.testing.assert_allclose(xp.to_numpy(got), want, rtol=1e-12, atol=1e-12)
    got = xp.nn.conv2d_backward_filter(xp.asarray(x), xp.asarray(dy), w.shape, **geometry)
    want = ref.nn.conv2d_backward_filter(x, dy, w.shape, **geometry)
    np.testing.assert_allclose(xp.to_numpy(got), want, rtol=1e-12, atol=1e-12)
    assert len(xp.gemm_launches) - launches == 3  # every product through the GEMM kernels


@pytest.mark.parametrize(
    ("n", "c", "o", "size", "kernel", "geometry"),
    [
        (2, 3, 5, 32, 3, {"padding": 1}),  # output rows of whole vectors: runs of image rows
        (3, 20, 9, 16, 3, {"padding": ((2, 0), (0, 2))}),  # 180 taps: two packed blocks
        (1, 4, 17, 16, 5, {"padding": 2}),  # taps reaching past both ends of a row
        (2, 3, 4, 16, 1, {}),  # 1x1
        (2, 5, 6, 19, 3, {"padding": 1}),  # rows not whole vectors: item by item
        (2, 3, 6, 33, 3, {"stride": 2, "padding": 1}),  # strided
        (1, 2, 3, 35, 3, {"dilation": 2, "padding": ((3, 1), (2, 2))}),  # dilated
    ],
)
def test_implicit_convolution_matches_the_reference(
    own: Any, n: int, c: int, o: int, size: int, kernel: int, geometry: Any
) -> None:
    """The forward convolution (and the input gradient of a stride-1 one, a convolution of
    ``dy``) as one implicit-GEMM launch (``conv_nn``), on contiguous and strided inputs."""
    xp = own
    ref = arraycore.namespace("numpy")
    rng = np.random.default_rng(15)
    for dtype in _dtypes(xp):
        x = rng.standard_normal((n, c, size, size)).astype(dtype)
        w = rng.standard_normal((o, c, kernel, kernel)).astype(dtype)
        want = ref.nn.conv2d(x.astype(np.float64), w.astype(np.float64), **geometry)
        swapped = xp.permute_dims(xp.asarray(np.ascontiguousarray(x.swapaxes(2, 3))), (0, 1, 3, 2))
        for xd in (xp.asarray(x), swapped):
            before = len(xp.gemm_launches)
            got = xp.nn.conv2d(xd, xp.asarray(w), **geometry)
            assert xp.gemm_launches[before:] == ["conv_nn"]
            _check(xp.to_numpy(got), want, dtype, c * kernel * kernel)
        if "stride" not in geometry and "dilation" not in geometry:
            dy = rng.standard_normal(want.shape).astype(dtype)
            got = xp.nn.conv2d_backward_data(xp.asarray(dy), xp.asarray(w), x.shape, **geometry)
            expect = ref.nn.conv2d_backward_data(
                dy.astype(np.float64), w.astype(np.float64), x.shape, **geometry
            )
            _check(xp.to_numpy(got), expect, dtype, o * kernel * kernel)


def test_implicit_convolution_of_nothing(own: Any) -> None:
    xp = own
    w = xp.ones((4, 3, 3, 3), dtype=xp.float32)
    assert xp.nn.conv2d(xp.ones((0, 3, 8, 8), dtype=xp.float32), w, padding=1).shape == (0, 4, 8, 8)
    y = xp.nn.conv2d(
        xp.ones((2, 0, 8, 8), dtype=xp.float32), xp.ones((4, 0, 3, 3), dtype=xp.float32)
    )
    np.testing.assert_array_equal(xp.to_numpy(y), np.zeros((2, 4, 6, 6), np.float32))


@pytest.mark.parametrize("hidden", [16, 48, 20])
def test_lstm_steps_run_fused_and_match_the_shared_loop(own: Any, hidden: int) -> None:
    """Where the units are whole vectors, each LSTM step is one launch each way
    (``lstm_step_fw``, ``lstm_step_bw``) instead of a product and a cell kernel; outputs and
    every gradient match the shared loop's (the per-step product, then the cell) to rounding,
    with and without an initial state; a width that is not whole vectors takes the shared loop."""
    from arraycore_opencl import _nn_kernels

    xp = own
    width = xp._backend.rt.gemm_kernel("float32", "gemm_nn")[1][0]
    n, steps, features = 5, 4, 3

    def run(h: int, state: bool) -> list[np.ndarray]:
        rng = np.random.default_rng(4)  # the same numbers for both paths
        arrays = [(rng.standard_normal(s) * 0.4).astype(np.float32) for s in (
            (n, steps, features), (features, 4 * h), (h, 4 * h), (4 * h,), (n, h), (n, h),
            (n, steps, h), (n, h), (n, h),
        )]  # fmt: skip
        x, w, u, b, h0, c0, dy, dh, dc = (xp.asarray(a) for a in arrays)
        h0, c0 = (h0, c0) if state else (None, None)
        y, h_n, c_n, saved = xp.nn.lstm(x, w, u, b, h0, c0)
        grads = xp.nn.lstm_backward(dy, dh, dc, x, w, u, b, h0, c0, y, saved)
        return [xp.to_numpy(a) for a in (y, h_n, c_n, *grads) if a is not None]

    for state in (True, False):
        xp.gemm_launches.clear()
        fused = run(hidden, state)
        if hidden % width == 0:
            assert xp.gemm_launches.count("lstm_step_fw") == steps
            assert xp.gemm_launches.count("lstm_step_bw") == steps
        else:
            assert "lstm_step_fw" not in xp.gemm_launches
        with pytest.MonkeyPatch.context() as mp:  # the shared loop on the same numbers
            mp.setattr(_nn_kernels.OpenCLKernels, "lstm_steps_forward", lambda *a: False)
            mp.setattr(_nn_kernels.OpenCLKernels, "lstm_steps_backward", lambda *a: False)
            shared = run(hidden, state)
        for got, want in zip(fused, shared, strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
