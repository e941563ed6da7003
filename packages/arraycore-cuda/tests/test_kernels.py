"""The CUDA backend's kernel source (arraycore.device_kernels), checked without an NVIDIA GPU.

Two checks, each on real hardware and software, neither standing in for a GPU:

- NVRTC (the compiler CuPy uses) compiles the CUDA build of every kernel for Turing and Hopper.
  It needs ``libnvrtc`` (the ``nvidia-cuda-nvrtc-cu12`` wheel of the test extra), not a driver.
- The OpenCL build of the *same kernel bodies* runs on whatever OpenCL device is present (PoCL
  in CI) and must agree with arraycore's NumPy reference: convolution through im2col/col2im,
  max and average pooling forward and backward, softmax / log-softmax rows and the fused
  cross-entropy, on asymmetric padding, strides, dilation, NaN and -inf.

What only a GPU can show (the CuPy launches, cuDNN, speed) is in ``test_gpu.py``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import importlib.util
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import arraycore
from arraycore import nn_shapes
from arraycore_cuda._kernels import DTYPES, KERNELS, NVRTC_OPTIONS, geometry, source

XP = arraycore.namespace("numpy")


# -- NVRTC ------------------------------------------------------------------------------------------
def _find_nvrtc() -> str | None:
    """libnvrtc from the nvidia-cuda-nvrtc wheel (as CuPy's ctk extra installs it) or the system."""
    spec = importlib.util.find_spec("nvidia")
    for root in spec.submodule_search_locations or [] if spec else []:
        for lib in sorted(Path(root).glob("cuda_nvrtc/lib/libnvrtc.so*")):
            if "alt" not in lib.name and "builtins" not in lib.name:
                return str(lib)
    return ctypes.util.find_library("nvrtc")


@pytest.fixture(scope="module")
def nvrtc() -> Any:
    path = _find_nvrtc()
    if path is None:
        pytest.skip("libnvrtc not found: pip install nvidia-cuda-nvrtc-cu12 (the test extra)")
    return ctypes.CDLL(path)


def _compile(lib: Any, code: str, arch: str) -> tuple[int, str]:
    """NVRTC's result code and log for ``code`` compiled for virtual architecture ``arch``."""
    prog = ctypes.c_void_p()
    assert lib.nvrtcCreateProgram(ctypes.byref(prog), code.encode(), b"k.cu", 0, None, None) == 0
    try:
        # what cupy.RawModule passes: our options, -ftz=true and the device's architecture
        flags = [*NVRTC_OPTIONS, "-ftz=true", f"--gpu-architecture={arch}"]
        options = (ctypes.c_char_p * len(flags))(*(f.encode() for f in flags))
        result = lib.nvrtcCompileProgram(prog, len(flags), options)
        size = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetProgramLog(prog, log)
        return int(result), log.value.decode(errors="replace")
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))


@pytest.mark.parametrize("arch", ["compute_75", "compute_90"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_nvrtc_compiles_every_kernel(nvrtc: Any, dtype: str, arch: str) -> None:
    result, log = _compile(nvrtc, source(dtype, "cuda"), arch)
    assert result == 0, log
    assert "warning" not in log.lower(), log


def test_nvrtc_reports_a_broken_kernel(nvrtc: Any) -> None:
    """The check above can fail: a kernel with a type error does not compile."""
    result, log = _compile(
        nvrtc,
        source("float32", "cuda") + '\nextern "C" __global__ void bad() { float x = y; }',
        "compute_75",
    )
    assert result != 0 and "identifier" in log


# -- the OpenCL build on a real OpenCL device -------------------------------------------------------
class OpenCLRunner:
    """Builds :func:`source` as OpenCL C and runs its kernels on host arrays."""

    def __init__(self, cl: Any, ctx: Any) -> None:
        self.cl, self.ctx = cl, ctx
        self.queue = cl.CommandQueue(ctx)
        self.kernels: dict[tuple[str, str], Any] = {}

    def kernel(self, dtype: str, name: str) -> Any:
        if (dtype, name) not in self.kernels:
            program = self.cl.Program(self.ctx, source(dtype, "opencl")).build()
            for kernel in KERNELS:
                self.kernels[dtype, kernel] = self.cl.Kernel(program, kernel)
        return self.kernels[dtype, name]

    def call(self, dtype: str, name: str, threads: int, *args: Any) -> list[np.ndarray]:
        """Launch ``threads`` work items; array arguments are copied in and read back after."""
        cl, flags = self.cl, self.cl.mem_flags
        values, arrays = [], []
        for a in args:
            if isinstance(a, np.ndarray):
                data = np.ascontiguousarray(a)
                buf = cl.Buffer(self.ctx, flags.READ_WRITE, max(data.nbytes, 1))
                if data.nbytes:
                    cl.enqueue_copy(self.queue, buf, data)
                values.append(buf)
                arrays.append((buf, data))
            else:
                values.append(a)
        if threads:
            self.kernel(dtype, name)(self.queue, (threads,), None, *values)
        for buf, data in arrays:
            if data.nbytes:
                cl.enqueue_copy(self.queue, data, buf)
        self.queue.finish()
        return [data for _, data in arrays]

    def run(self, name: str, n: int, out_shape: tuple[int, ...], dtype: str, *args: Any) -> Any:
        """An element kernel ``(n, out, inputs..., scalars...)`` over ``n`` outputs."""
        out = np.zeros(out_shape, dtype=dtype)
        return self.call(dtype, name, n, np.int64(n), out, *args)[0]

    def rows(self, name: str, rows: int, dtype: str, *args: Any) -> list[np.ndarray]:
        """A row kernel (one work item per row; it takes ``rows`` itself)."""
        return self.call(dtype, name, rows, *args)


@pytest.fixture(scope="module")
def ocl() -> OpenCLRunner:
    cl = pytest.importorskip("pyopencl", reason="pyopencl is not installed (the test extra)")
    try:
        platforms = cl.get_platforms()
    except cl.Error as exc:
        pytest.skip(f"no OpenCL platform to run the OpenCL build of the kernels on: {exc}")
    devices = [d for p in platforms for d in p.get_devices()]
    if not devices:
        pytest.skip("no OpenCL device to run the OpenCL build of the kernels on")
    return OpenCLRunner(cl, cl.Context([devices[0]]))


def _needs(ocl: OpenCLRunner, dtype: str) -> None:
    if dtype == "float64" and "cl_khr_fp64" not in ocl.ctx.devices[0].extensions:
        pytest.skip(f"OpenCL device {ocl.ctx.devices[0].name} has no float64")


def _random(seed: int, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _close(got: np.ndarray, want: Any, dtype: str, terms: int = 1) -> None:
    eps = float(np.finfo(dtype).eps)
    np.testing.assert_allclose(
        got, np.asarray(want), rtol=8 * eps * terms, atol=8 * eps * terms, equal_nan=True
    )


CONV_CASES = [
    # x_shape, w_shape, stride, padding, dilation
    ((2, 3, 7, 6), (4, 3, 3, 3), 1, 0, 1),
    ((1, 2, 9, 8), (3, 2, 3, 2), (2, 3), ((1, 2), (0, 1)), 1),
    ((3, 1, 10, 9), (2, 1, 3, 3), 2, 1, (2, 1)),
    ((2, 4, 5, 5), (1, 4, 1, 1), 3, 0, 1),
    ((0, 2, 5, 5), (3, 2, 3, 3), 1, 1, 1),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", CONV_CASES, ids=str)
def test_im2col_col2im_convolutions(ocl: OpenCLRunner, dtype: str, case: Any) -> None:
    """conv2d = W @ im2col(x), backward data = col2im(W^T @ dy), backward filter = dy @
    im2col(x)^T and the transposed convolution, as the backend composes them with cuBLAS."""
    _needs(ocl, dtype)
    x_shape, w_shape, stride, padding, dilation = case
    x, w = _random(1, x_shape, dtype), _random(2, w_shape, dtype)
    win = nn_shapes.conv_window("conv2d", x_shape, w_shape, stride, padding, dilation)
    rows, cols = win.c * win.kh * win.kw, win.n * win.out_h * win.out_w
    im = ocl.run("im2col", rows * cols, (rows, cols), dtype, x, *geometry(win))
    o = w_shape[0]
    y = (w.reshape(o, -1) @ im).reshape(o, win.n, win.out_h, win.out_w).transpose(1, 0, 2, 3)
    kwargs = {"stride": stride, "padding": padding, "dilation": dilation}
    _close(y, XP.nn.conv2d(x, w, **kwargs), dtype, rows)
    dy = _random(3, y.shape, dtype)
    dy_cf = dy.transpose(1, 0, 2, 3).reshape(o, -1)
    dcols = w.reshape(o, -1).T @ dy_cf
    dx = ocl.run("col2im", int(np.prod(x_shape)), x_shape, dtype, dcols, *geometry(win))
    _close(dx, XP.nn.conv2d_backward_data(dy, w, x_shape, **kwargs), dtype, rows)
    dw = (dy_cf @ im.T).reshape(w_shape)
    _close(dw, XP.nn.conv2d_backward_filter(x, dy, w_shape, **kwargs), dtype, max(cols, 1))
    # the transposed convolution of dy with w is the backward-data pass
    twin = nn_shapes.conv_transpose_window("conv2d_transpose", dy.shape, w_shape, stride,
                                           padding, dilation, 0)  # fmt: skip
    if (twin.h, twin.w) == x_shape[2:]:
        t = ocl.run("col2im", int(np.prod(x_shape)), x_shape, dtype, dcols, *geometry(twin))
        _close(t, XP.nn.conv2d_transpose(dy, w, **kwargs), dtype, rows)


POOL_CASES = [
    # x_shape, kernel, stride, padding
    ((2, 3, 6, 6), 2, None, 0),
    ((1, 2, 7, 5), (3, 2), (2, 1), ((1, 1), (0, 1))),
    ((2, 1, 5, 7), 3, 1, 1),
    ((1, 1, 4, 4), (1, 5), (3, 1), ((0, 0), (2, 1))),  # padding at most half the kernel
]


def _pool_input(seed: int, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """Random values with ties, -inf and one NaN: what max pooling must get exactly right."""
    x = np.round(_random(seed, shape, dtype) * 2) / 2  # ties
    flat = x.reshape(-1)
    flat[:: max(len(flat) // 5, 1)] = -np.inf
    if len(flat) > 7:
        flat[7] = np.nan
    return x


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", POOL_CASES, ids=str)
def test_pooling_kernels(ocl: OpenCLRunner, dtype: str, case: Any) -> None:
    _needs(ocl, dtype)
    x_shape, kernel, stride, padding = case
    x = _pool_input(4, x_shape, dtype)
    win = nn_shapes.pool_window("max_pool2d", x_shape, kernel, stride, padding)
    out_shape = (win.n, win.c, win.out_h, win.out_w)
    n_out, n_in = int(np.prod(out_shape)), int(np.prod(x_shape))
    y = ocl.run("max_pool", n_out, out_shape, dtype, x, *geometry(win))
    want = XP.nn.max_pool2d(x, kernel, stride, padding)
    np.testing.assert_array_equal(y, want)  # a maximum is exact
    dy = _random(5, out_shape, dtype)
    dx = ocl.run("max_pool_backward", n_in, x_shape, dtype, x, dy, *geometry(win))
    _close(dx, XP.nn.max_pool2d_backward(dy, x, kernel, stride, padding), dtype, win.kh * win.kw)
    finite = np.nan_to_num(x, nan=0.0, neginf=-3.0)
    for include in (True, False):
        flag = np.int32(include)
        y = ocl.run("avg_pool", n_out, out_shape, dtype, finite, *geometry(win), flag)
        want = XP.nn.avg_pool2d(finite, kernel, stride, padding, include)
        _close(y, want, dtype, win.kh * win.kw)
        dx = ocl.run("avg_pool_backward", n_in, x_shape, dtype, dy, *geometry(win), flag)
        want = XP.nn.avg_pool2d_backward(dy, x_shape, kernel, stride, padding, include)
        _close(dx, want, dtype, win.kh * win.kw)


def _rows_input(dtype: str) -> np.ndarray:
    inf = np.inf
    big = 3e38 if dtype == "float32" else 1e308
    x = _random(6, (9, 7), dtype) * 10
    x[1] = [1e4, 0.0, -inf, -1e4, 1.0, 2.0, 3.0]
    x[2] = -inf
    x[3, 2] = inf
    x[4, 5] = np.nan
    x[5, 0] = big
    x[6] -= 1e4
    return x.astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_rows(ocl: OpenCLRunner, dtype: str) -> None:
    _needs(ocl, dtype)
    x = _rows_input(dtype)
    rows, cols = x.shape
    for mode, ref in ((0, XP.nn.softmax), (1, XP.nn.log_softmax)):
        out = np.empty_like(x)
        (got, _) = ocl.rows(
            "softmax_rows", rows, dtype, np.int64(rows), np.int64(cols), out, x, np.int32(mode)
        )
        _close(got, ref(x, axis=-1), dtype, 4 * cols)


@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_cross_entropy_rows(ocl: OpenCLRunner, dtype: str) -> None:
    _needs(ocl, dtype)
    x = _rows_input(dtype)
    rows, cols = x.shape
    labels = np.array([0, 3, 1, 2, 6, 0, 4, -1, 7], dtype=np.int64)  # -1 and 7: out of range
    scale = 1.0 / rows
    dlogits, row_loss = np.empty_like(x), np.empty((rows,), dtype=dtype)
    (got_d, got_rows, *_) = ocl.rows(
        "softmax_xent_rows", rows, dtype, np.int64(rows), np.int64(cols), dlogits, row_loss, x,
        labels, np.dtype(dtype).type(scale),
    )  # fmt: skip
    with arraycore.checks(False):  # what the kernel does when arraycore's label check is off
        want_loss, want_d = XP.nn.softmax_cross_entropy(x, labels, scale)
    _close(got_d, want_d, dtype, 4 * cols)
    _close(np.sum(got_rows), want_loss, dtype, 4 * cols * rows)
    # rows with a label out of range add nothing, even when degenerate
    assert got_rows[7] == 0 and got_rows[8] == 0


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("kernel", "approximate"), [("gelu", "tanh"), ("gelu_erf", "none")])
def test_gelu_kernels(ocl: OpenCLRunner, dtype: str, kernel: str, approximate: str) -> None:
    """GELU forward and backward (tanh approximation, exact) against arraycore's reference, over
    both saturated tails (the gradient at -12 is 0, not a rounding error times x**3), NaN and
    +inf."""
    _needs(ocl, dtype)
    x = np.concatenate([np.linspace(-12, 12, 97), [np.nan, np.inf, 0.0]]).astype(dtype)
    dy = _random(40, x.shape, dtype)
    n = x.size
    with np.errstate(invalid="ignore"):  # as PyTorch: gelu(-inf) and the slope at +-inf are NaN
        want = XP.nn.gelu(x, approximate=approximate)
        want_dx = XP.nn.gelu_backward(dy, x, approximate=approximate)
    got = ocl.run(kernel, n, x.shape, dtype, x)
    _close(got, want, dtype, 4)
    got_dx = ocl.run(f"{kernel}_backward", n, x.shape, dtype, dy, x)
    _close(got_dx, want_dx, dtype, 4)
    assert abs(got_dx[0]) < 1e-30 and abs(got[0]) < 1e-30 and got[-2] == np.inf  # x = -12; +inf


@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_backward_rows_kernel(ocl: OpenCLRunner, dtype: str) -> None:
    """Softmax's gradient from its output, row by row, against arraycore's reference: rows of
    several lengths' worth of columns (1, 7, 130), a NaN in dy spreading over its row only."""
    _needs(ocl, dtype)
    for cols in (1, 7, 130):
        rows = 9
        y = XP.nn.softmax(_random(41, (rows, cols), dtype) * 3, axis=-1)
        dy = _random(42, (rows, cols), dtype)
        dy[4, 0] = np.nan
        want = XP.nn.softmax_backward(dy, y)
        got = ocl.rows(
            "softmax_backward_rows", rows, dtype, np.int64(rows), np.int64(cols),
            np.empty_like(y), dy, y,
        )[0]  # fmt: skip
        assert np.isnan(got[4]).all() and np.isfinite(np.delete(got, 4, axis=0)).all()
        _close(got, want, dtype, 4 * cols)


@pytest.mark.parametrize("dtype", DTYPES)
def test_relu_backward_kernel(ocl: OpenCLRunner, dtype: str) -> None:
    """ReLU's gradient from its output against arraycore's reference: on where y > 0, off at 0
    and below, NaN from a NaN or infinite dy either way (as the product)."""
    _needs(ocl, dtype)
    y = np.array([2.0, 0.0, -0.0, 1e-30, 3.0, 0.0, 5.0, 0.0], dtype)
    dy = np.array([1.5, 2.0, -3.0, 4.0, np.nan, np.nan, -np.inf, np.inf], dtype)
    with np.errstate(invalid="ignore"):
        want = XP.nn.relu_backward(dy, y)
    got = ocl.run("relu_backward", y.size, y.shape, dtype, dy, y)
    np.testing.assert_array_equal(got, want)
    assert np.array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize("dtype", DTYPES)
def test_layer_norm_kernels(ocl: OpenCLRunner, dtype: str) -> None:
    """Layer norm forward (rows), input gradient (rows) and parameter gradients (columns)
    against arraycore's reference, rows of very different scales, and one-element rows, whose
    input gradient is exactly 0 (no multiply-add contraction)."""
    _needs(ocl, dtype)
    for rows, d in ((9, 37), (6, 1)):
        x = (_random(41, (rows, d), dtype) * np.logspace(-2, 2, rows)[:, None]).astype(dtype)
        gamma, beta, dy = (
            _random(s, shape, dtype) for s, shape in ((42, d), (43, d), (44, x.shape))
        )
        gamma, beta = gamma.reshape(d), beta.reshape(d)
        want_y, want_mean, want_inv = XP.nn.layer_norm(x, gamma, beta, eps=1e-5)
        y, mean, inv = (np.empty_like(a) for a in (x, want_mean, want_inv))
        got_y, got_mean, got_inv, *_ = ocl.rows(
            "layer_norm_rows", rows, dtype, np.int64(rows), np.int64(d), y, mean, inv, x,
            gamma, beta, np.dtype(dtype).type(1e-5),
        )  # fmt: skip
        _close(got_y, want_y, dtype, 4 * d)
        _close(got_mean, want_mean, dtype, 4 * d)
        _close(got_inv, want_inv, dtype, 4 * d)
        want_dx, want_dg, want_db = XP.nn.layer_norm_backward(dy, x, gamma, want_mean, want_inv)
        (got_dx, *_) = ocl.rows(
            "layer_norm_backward_rows", rows, dtype, np.int64(rows), np.int64(d),
            np.empty_like(x), dy, x, gamma, want_mean, want_inv,
        )  # fmt: skip
        _close(got_dx, want_dx, dtype, 8 * d)
        got_dg, got_db, *_ = ocl.call(
            dtype, "layer_norm_param_grads", d, np.int64(rows), np.int64(d),
            np.empty_like(gamma), np.empty_like(beta), dy, x, want_mean, want_inv,
        )  # fmt: skip
        _close(got_dg, want_dg, dtype, 4 * rows)
        _close(got_db, want_db, dtype, 4 * rows)
        if d == 1:
            assert not got_dx.any()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("state", [True, False])
def test_lstm_cell_kernels(ocl: OpenCLRunner, dtype: str, state: bool) -> None:
    """The LSTM's time steps as the host code runs them (one product with ``u`` and one launch
    per step, both ways) against arraycore's reference LSTM, with and without initial state and
    incoming state gradients."""
    from arraycore import _nn_rnn

    _needs(ocl, dtype)
    n, steps, c_in, hidden = 3, 4, 5, 6
    x, w, u = (
        _random(50 + k, s, dtype)
        for k, s in enumerate(((n, steps, c_in), (c_in, 4 * hidden), (hidden, 4 * hidden)))
    )
    b = _random(53, (4 * hidden,), dtype)
    h0, c0 = (_random(54 + k, (n, hidden), dtype) if state else None for k in range(2))
    want_y, want_h, want_c, want_saved = _nn_rnn.lstm(XP, x, w, u, b, h0, c0)
    xs, us, _ = _nn_rnn.projection(XP, x, w, u, b)
    xs = np.ascontiguousarray(xs)
    h = h0.copy() if state else np.zeros((n, hidden), dtype)
    c = c0.copy() if state else np.zeros((n, hidden), dtype)
    outs = [np.empty((n, steps, k * hidden), dtype) for k in (4, 1, 1, 1)]  # gates, cs, tanh_c, y
    sizes = (np.int64(n * hidden), np.int64(hidden), np.int64(steps))
    for t in range(steps):
        flags = (np.int32(state or t > 0),) * 2
        z = (h @ us).astype(dtype)
        c, h, *outs = ocl.call(
            dtype, "lstm_cell_forward", n * hidden, *sizes, np.int64(t), *flags, z, xs, c, h, *outs
        )[2:]
    gates, cs, tanh_c, y = outs
    for got, want in (
        (y, want_y),
        (h, want_h),
        (c, want_c),
        (gates, want_saved[0]),
        (cs, want_saved[2]),
    ):
        _close(got, want, dtype, 8 * hidden)
    dy, dh_n, dc_n = (_random(60 + k, s, dtype) for k, s in enumerate((y.shape, h.shape, c.shape)))
    want = _nn_rnn.lstm_backward(XP, dy, dh_n, dc_n, x, w, u, b, h0, c0, want_y, want_saved)
    dz, dz_t = np.empty_like(gates), np.empty((n, 4 * hidden), dtype)
    dh, dc = dh_n, dc_n.copy()
    u_t = np.ascontiguousarray(u.T)
    c0_arg = c0 if state else np.zeros_like(dc)  # not read: has_c0 is 0
    for t in range(steps - 1, -1, -1):
        flags = (np.int32(1),) * 3 + (np.int32(state),)
        got = ocl.call(
            dtype, "lstm_cell_backward", n * hidden, *sizes, np.int64(t), *flags, dy, dh, dc,
            c0_arg, gates, cs, tanh_c, dz, dz_t,
        )  # fmt: skip
        dc, dz, dz_t = got[2], got[7], got[8]
        dh = (dz_t @ u_t).astype(dtype)
    dx, dw, du, db = _nn_rnn.weight_grads(XP, dz, x, w, h0, want_y)
    for got_g, want_g in zip((dx, dw, du, db), want[:4], strict=True):
        _close(got_g, want_g, dtype, 16 * hidden * steps)
    if state:
        _close(dh, want[4], dtype, 16 * hidden * steps)
        _close(dc, want[5], dtype, 16 * hidden * steps)


@pytest.mark.parametrize("dtype", DTYPES)
def test_batch_norm_kernels(ocl: OpenCLRunner, dtype: str) -> None:
    """Batch norm's three launches each way as the host code runs them, against arraycore's
    reference: chunks of uneven size (the last one short), 2-D input (one position per sample),
    rows that the kernels' eight partial sums do and do not divide (28, 9 and 32 positions),
    and data far from zero (mean 100, spread 0.01), where a one-pass E[x^2] - E[x]^2 would
    lose every digit of the variance that the chunk merge keeps."""
    _needs(ocl, dtype)
    t = np.dtype(dtype).type
    for shape, spc in (((5, 3, 4, 7), 2), ((9, 4), 4), ((4, 2, 3, 3), 8), ((3, 2, 4, 8), 2)):
        n, c = shape[:2]
        hw = int(np.prod(shape[2:], dtype=np.int64))
        chunks = -(-n // spc)
        x = (100 + 0.01 * _random(70, shape, dtype)).astype(dtype)
        gamma, beta = _random(71, (c,), dtype), _random(72, (c,), dtype)
        dy = _random(73, shape, dtype)
        geo = tuple(np.int64(v) for v in (c, n, hw, spc, chunks))
        _, want_mean, want_inv = XP.nn.batch_norm(x, gamma, beta, eps=1e-5)
        part_mean, part_m2 = (np.empty((c, chunks), dtype) for _ in range(2))
        part_mean, part_m2, _ = ocl.call(
            dtype, "bn_chunk_stats", c * chunks, *geo, part_mean, part_m2, x
        )
        mean, inv, *_ = ocl.call(
            dtype, "bn_merge_stats", c, *geo, np.empty(c, dtype), np.empty(c, dtype),
            part_mean, part_m2, t(1e-5),
        )  # fmt: skip
        _close(mean, want_mean, dtype, 4 * n * hw)
        _close(inv / want_inv, np.ones(c), dtype, 16 * n * hw)  # inv_std is ~100 here
        for relu in (0, 1):  # batch_norm, then batch_norm_relu (the ReLU in the same launches)
            _check_bn_passes(ocl, dtype, relu, x, gamma, beta, dy, geo, want_mean, want_inv)


def _check_bn_passes(
    ocl: OpenCLRunner, dtype: str, relu: int, x: Any, gamma: Any, beta: Any, dy: Any,
    geo: tuple[Any, ...], mean: Any, inv: Any,
) -> None:  # fmt: skip
    """:func:`test_batch_norm_kernels`' element pass and backward launches, with or without the
    ReLU (``relu``: ``y`` through it, ``dy`` gated by it), against the namespace's ops."""
    t = np.dtype(dtype).type
    n, hw, c, chunks = int(geo[1]), int(geo[2]), int(geo[0]), int(geo[4])
    size = np.int64(x.size)
    if relu:
        want_y = XP.nn.batch_norm_relu(x, gamma, beta, eps=1e-5)[0]
    else:
        want_y = XP.nn.batch_norm(x, gamma, beta, eps=1e-5)[0]
    (y, *_) = ocl.call(
        dtype, "bn_normalize", x.size, size, geo[0], geo[2], np.int32(relu), np.empty_like(x), x,
        mean, inv, gamma, beta,
    )  # fmt: skip
    _close(y, want_y, dtype, 8 * n * hw)
    if relu:
        assert (y == 0).any() and not np.signbit(y).any()
        want = XP.nn.batch_norm_relu_backward(dy, x, gamma, mean, inv, want_y)
    else:
        want = XP.nn.batch_norm_backward(dy, x, gamma, mean, inv)
    want_dx, want_dg, want_db = want
    part_dy, part_dyx, *_ = ocl.call(
        dtype, "bn_chunk_grads", c * chunks, *geo, np.int32(relu), np.empty((c, chunks), dtype),
        np.empty((c, chunks), dtype), dy, want_y, x, mean,
    )  # fmt: skip
    dgamma, dbeta, *_ = ocl.call(
        dtype, "bn_merge_grads", c, geo[0], geo[4], np.empty(c, dtype), np.empty(c, dtype),
        part_dy, part_dyx, inv,
    )  # fmt: skip
    _close(dgamma, want_dg, dtype, 64 * n * hw)
    _close(dbeta, want_db, dtype, 4 * n * hw)
    (dx, *_) = ocl.call(
        dtype, "bn_backward_data", x.size, size, geo[0], geo[2], t(n * hw), np.int32(relu),
        np.empty_like(x), dy, want_y, x, mean, inv, gamma, want_dg, want_db,
    )  # fmt: skip
    scale = float(np.max(np.abs(want_dx)))
    _close(dx / scale, want_dx / scale, dtype, 64 * n * hw)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("state", [True, False])
def test_gru_cell_kernels(ocl: OpenCLRunner, dtype: str, state: bool) -> None:
    """The GRU's time steps as the host code runs them (one product with ``u`` and one launch
    per step, both ways) against arraycore's reference GRU, with and without an initial
    state."""
    from arraycore import _nn_gru, _nn_rnn

    _needs(ocl, dtype)
    n, steps, hidden = 3, 4, 5
    xw = _random(80, (n, steps, 3 * hidden), dtype)
    u = (0.5 * _random(81, (hidden, 3 * hidden), dtype)).astype(dtype)
    b = _random(82, (3 * hidden,), dtype)
    h0 = _random(83, (n, hidden), dtype) if state else None
    want_y, want_saved = _nn_gru.gru_sequence(XP, xw, u, b, h0)
    h = h0.copy() if state else np.zeros((n, hidden), dtype)
    outs = [np.empty((n, steps, k * hidden), dtype) for k in (2, 1, 1, 1)]  # ru, cand, rec_n, y
    sizes = (np.int64(n * hidden), np.int64(hidden), np.int64(steps))
    for t in range(steps):
        has_h = state or t > 0
        hid = (h @ u).astype(dtype) if has_h else b
        h, *outs = ocl.call(
            dtype, "gru_cell_forward", n * hidden, *sizes, np.int64(t), np.int32(has_h), hid, xw,
            b, h, *outs,
        )[3:]  # fmt: skip
    for got, want in zip((outs[3], *outs[:3]), (want_y, *want_saved), strict=True):
        _close(got, want, dtype, 8 * hidden)
    dy = _random(84, want_y.shape, dtype)
    want = _nn_gru.gru_sequence_backward(XP, dy, u, h0, want_y, want_saved)
    u_t = np.ascontiguousarray(_nn_rnn.transposed_u(XP, u))
    dxw, dhid = (np.empty((n, steps, 3 * hidden), dtype) for _ in range(2))
    dhz, g = np.zeros((n, hidden), dtype), np.zeros((n, hidden), dtype)
    h0_arg = h0 if state else np.zeros_like(dhz)  # not read: has_h0 is 0
    for t in range(steps - 1, -1, -1):
        flags = (np.int32(t < steps - 1), np.int32(state))
        got = ocl.call(
            dtype, "gru_cell_backward", n * hidden, *sizes, np.int64(t), *flags, dy, g, dhz,
            h0_arg, want_y, *want_saved, dxw, dhid,
        )  # fmt: skip
        dhz, dxw, dhid = got[2], got[8], got[9]
        g = (dhid[:, t] @ u_t).astype(dtype)
    _close(dxw, want[0], dtype, 16 * hidden * steps)
    du, db = _nn_gru.weight_grads(XP, _nn_gru.previous_states(XP, want_y, h0), dhid)
    _close(du, want[1], dtype, 16 * hidden * steps * n)
    _close(db, want[2], dtype, 16 * hidden * steps * n)
    if state:
        _close(g + dhz, want[3], dtype, 16 * hidden * steps)


def _attention_mask_args(lead: tuple[int, ...], tq: int, tk: int, mask: Any) -> tuple:
    """The kernels' ``MASK`` arguments as arraycore.kernel_host builds them: the mask (a dummy
    when absent) and its strides over the scores padded to four leading axes."""
    scores = (1,) * (4 - len(lead)) + lead + (tq, tk)
    strides = [0] * 6
    if mask is None:
        return (np.int32(0), np.zeros(1, np.uint8), np.zeros(1, np.float32)), scores, strides
    shape = (1,) * (6 - mask.ndim) + mask.shape
    step = 1
    for axis in range(5, -1, -1):
        strides[axis] = step if shape[axis] > 1 else 0
        step *= shape[axis]
    if mask.dtype == np.bool_:
        return (np.int32(1), mask.astype(np.uint8), np.zeros(1, mask.dtype)), scores, strides
    return (np.int32(2), np.zeros(1, np.uint8), mask), scores, strides


ATTENTION_KERNEL_CASES = [
    # lead, Tq, Tk, d, dv, mask, causal, dropout
    ((2, 3), 5, 7, 4, 6, None, False, False),
    ((2, 3), 5, 7, 4, 6, "padding", True, True),
    ((3,), 6, 4, 8, 3, "add", False, False),
    ((2, 1, 2, 2), 3, 3, 2, 2, "bool", True, False),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("lead", "tq", "tk", "d", "dv", "mask", "causal", "dropout"), ATTENTION_KERNEL_CASES
)
def test_attention_kernels(
    ocl: OpenCLRunner,
    dtype: str,
    lead: tuple[int, ...],
    tq: int,
    tk: int,
    d: int,
    dv: int,
    mask: str | None,
    causal: bool,
    dropout: bool,
) -> None:
    """The fused attention kernels (forward per query row, backward per query row then per key
    row) against arraycore's reference attention: the output, the rows' log-sum-exp and the
    three gradients, with a broadcast key padding mask, a full boolean mask, an additive mask
    over the last two axes, the causal mask and a dropout mask."""
    _needs(ocl, dtype)
    q, k, v = (
        _random(s, (*lead, t, w), dtype) for s, t, w in ((61, tq, d), (62, tk, d), (63, tk, dv))
    )
    dy = _random(64, (*lead, tq, dv), dtype)
    rng = np.random.default_rng(65)
    m: Any = None
    if mask == "padding":
        m = np.ones((lead[0], 1, 1, tk), dtype=bool)
        m[0, ..., tk - 3 :] = False
    elif mask == "bool":
        m = rng.random((*lead, tq, tk)) < 0.7
        m[..., 0] = True
    elif mask == "add":
        m = (rng.standard_normal((tq, tk)) * 2).astype(dtype)
    drop = ((rng.random((*lead, tq, tk)) < 0.6) / 0.6).astype(dtype) if dropout else None
    opts = {"causal": causal, "dropout_mask": drop}
    want_out, want_lse = XP.nn.scaled_dot_product_attention(q, k, v, m, recompute=True, **opts)
    want = XP.nn.scaled_dot_product_attention_backward(dy, q, k, v, want_out, want_lse, m, **opts)
    (kind, mb, ma), scores, strides = _attention_mask_args(lead, tq, tk, m)
    rows, keys = int(np.prod(lead)) * tq, int(np.prod(lead)) * tk
    scale = np.dtype(dtype).type(1 / np.sqrt(d))
    masks = (kind, mb, ma, *(np.int64(n) for n in scores[1:4]), *(np.int64(s) for s in strides))
    masks = (*masks, np.int32(causal))
    dropping = (np.int32(dropout), drop if dropout else np.zeros(1, dtype), scale)
    dims = (np.int64(tq), np.int64(tk), np.int64(d), np.int64(dv))
    out, lse, *_ = ocl.rows(
        "attn_forward", rows, dtype, np.int64(rows), *dims, np.empty(want_out.shape, dtype),
        np.empty(want_lse.shape, dtype), q, k, v, *masks, *dropping,
    )  # fmt: skip
    _close(out, want_out, dtype, 4 * tk * d)
    _close(lse, want_lse, dtype, 4 * tk * d)
    dq, delta, *_ = ocl.rows(
        "attn_backward_query", rows, dtype, np.int64(rows), *dims, np.empty_like(q),
        np.empty(rows, dtype), dy, out, q, k, v, lse, *masks, *dropping,
    )  # fmt: skip
    dk, dv_, *_ = ocl.rows(
        "attn_backward_key", keys, dtype, np.int64(keys), *dims, np.empty_like(k),
        np.empty_like(v), dy, q, k, v, lse, delta, *masks, *dropping,
    )  # fmt: skip
    for got, expected in zip((dq, dk, dv_), want, strict=True):
        _close(got, expected, dtype, 16 * tk * tq * d)


def test_every_kernel_is_exercised() -> None:
    """The kernels this file runs are all of them (a new kernel needs a test here)."""
    tested = {"im2col", "col2im", "max_pool", "max_pool_backward", "avg_pool"}
    tested |= {"avg_pool_backward", "softmax_rows", "softmax_xent_rows", "gelu", "gelu_backward"}
    tested |= {"softmax_backward_rows"}
    tested |= {"gelu_erf", "gelu_erf_backward", "relu_backward"}
    tested |= {"layer_norm_rows", "layer_norm_backward_rows", "layer_norm_param_grads"}
    tested |= {"lstm_cell_forward", "lstm_cell_backward"}
    tested |= {"bn_chunk_stats", "bn_merge_stats", "bn_normalize", "bn_chunk_grads"}
    tested |= {"bn_merge_grads", "bn_backward_data", "gru_cell_forward", "gru_cell_backward"}
    tested |= {"attn_forward", "attn_backward_query", "attn_backward_key"}
    assert tested == set(KERNELS)
