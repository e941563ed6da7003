"""The OpenCL backend on a real OpenCL device (PoCL in CI); skipped where none exists.

Device selection, capabilities (float64 refused where absent), probe errors (a real missing
platform or library, in a subprocess), the array class, kernel caching, and the kernels the
conformance kit reaches only with small shapes (long reductions, big batched GEMMs).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from typing import Any

import numpy as np
import pytest

import arraycore
from arraycore.backend import BackendUnavailable, DeviceNotFound
from arraycore_opencl import OpenCLArray, OpenCLBackend
from arraycore_opencl._backend import _SMALL_GEMM
from arraycore_opencl._runtime import ENV_NO_FP64

try:
    OpenCLBackend.probe()
    DEVICES = OpenCLBackend.devices()
except BackendUnavailable as exc:  # pragma: no cover - only where OpenCL is absent
    pytest.skip(f"no usable OpenCL device here: {exc}", allow_module_level=True)


@pytest.fixture(scope="module")
def xp() -> Any:
    return arraycore.namespace("opencl", device=0)


@pytest.fixture(scope="module")
def backend(xp: Any) -> OpenCLBackend:
    bk: OpenCLBackend = xp._backend
    return bk


def _run(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter with extra environment variables."""
    full = {**os.environ, **env}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=full,
        timeout=300,
        check=False,
    )


# -- devices -------------------------------------------------------------------------------------
def test_devices_list_every_platform_device_with_capabilities() -> None:
    import pyopencl as cl

    expected = [
        (p, d) for p, pl in enumerate(cl.get_platforms()) for d in range(len(pl.get_devices()))
    ]
    assert [dev.id for dev in DEVICES] == [f"{p}:{d}" for p, d in expected]
    for dev in DEVICES:
        p, d = (int(v) for v in dev.id.split(":"))
        cl_dev = cl.get_platforms()[p].get_devices()[d]
        assert set(dev.capabilities) == {"float64", "float16"}
        assert dev.capabilities["float64"] == (
            "cl_khr_fp64" in cl_dev.extensions or bool(cl_dev.double_fp_config)
        )
        assert dev.capabilities["float16"] == ("cl_khr_fp16" in cl_dev.extensions)
        assert cl_dev.name.strip() in dev.name


def test_select_device_by_index_pair_and_name() -> None:
    first = DEVICES[0]
    assert OpenCLBackend.select_device(DEVICES, None) is first
    assert OpenCLBackend.select_device(DEVICES, "0") is first
    assert OpenCLBackend.select_device(DEVICES, 0) is first
    assert OpenCLBackend.select_device(DEVICES, first.id) is first
    word = first.name.split()[0].lower()
    assert OpenCLBackend.select_device(DEVICES, word.upper()).name.lower().count(word)
    for bad in ("99", "7:7", "no-such-device-anywhere"):
        with pytest.raises(DeviceNotFound, match="platform:device"):
            OpenCLBackend.select_device(DEVICES, bad)


def test_arraycore_device_environment_variable() -> None:
    result = _run(
        """
        import arraycore
        xp = arraycore.namespace()
        print(xp.name, xp.zeros(2).device)
        """,
        ARRAYCORE_BACKEND="opencl",
        ARRAYCORE_DEVICE=DEVICES[0].id,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["opencl", DEVICES[0].id]
    bad = _run(
        "import arraycore; arraycore.namespace()",
        ARRAYCORE_BACKEND="opencl",
        ARRAYCORE_DEVICE="no-such-device-anywhere",
    )
    assert bad.returncode != 0
    assert "no device matching 'no-such-device-anywhere'" in bad.stderr


def test_info_lists_the_backend_and_its_devices() -> None:
    result = _run("import arraycore.__main__ as m; m.main(['info'])")
    assert result.returncode == 0, result.stderr
    assert "opencl" in result.stdout
    assert DEVICES[0].name.split()[0] in result.stdout


def test_version_names_the_libraries_and_platform() -> None:
    text = OpenCLBackend.version()
    assert "pyopencl" in text and "pyclblast" in text and "CLBlast" in text
    assert "platform" in text


# -- capabilities ----------------------------------------------------------------------------------
def test_float64_missing_is_a_clear_error() -> None:
    """With float64 hidden (as on a device without cl_khr_fp64), asking for it is a TypeError."""
    result = _run(
        """
        import numpy as np, arraycore
        xp = arraycore.namespace("opencl")
        print(xp.asarray([1.5]).dtype, xp.zeros(2).dtype)
        for make in (lambda: xp.zeros(2, dtype="float64"),
                     lambda: xp.asarray(np.ones(2)),
                     lambda: xp._backend.from_numpy(np.ones(2))):
            try:
                make()
            except TypeError as exc:
                print("TypeError:", exc)
        """,
        **{ENV_NO_FP64: "1"},
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "float32 float32"
    assert len(lines) == 4, result.stdout
    for line in lines[1:]:
        assert line.startswith("TypeError:") and "float64" in line and "opencl" in line


def test_float16_follows_the_device(xp: Any) -> None:
    if DEVICES[0].capabilities["float16"]:
        x = xp.asarray(np.array([1.5, 2.5], dtype=np.float16))
        assert xp.to_numpy(x * 2).tolist() == [3.0, 5.0]
    else:
        with pytest.raises(TypeError, match="float16"):
            xp.zeros(2, dtype="float16")


# -- probe -------------------------------------------------------------------------------------------
def test_no_opencl_platform_is_a_clear_chained_error(tmp_path: Any) -> None:
    """An ICD loader with no driver registered: a real missing platform."""
    result = _run(
        """
        import arraycore
        from arraycore_opencl import OpenCLBackend
        try:
            OpenCLBackend.probe()
        except Exception as exc:
            print(type(exc).__name__, "|", exc, "|", type(exc.__cause__).__name__)
        try:
            arraycore.namespace("opencl")
        except arraycore.BackendError as exc:
            print(type(exc).__name__, "|", exc)
        """,
        OCL_ICD_VENDORS=str(tmp_path),
    )
    assert result.returncode == 0, result.stderr
    probe, namespace = result.stdout.splitlines()
    assert probe.startswith("BackendUnavailable | no OpenCL platform found")
    assert "apt-get install pocl-opencl-icd" in probe
    assert not probe.endswith("NoneType")
    assert "BackendUnavailableError" in namespace and "apt-get install" in namespace
    assert 'pip install "arraycore[opencl]"' in namespace


def test_missing_clblast_names_what_to_install() -> None:
    """pyclblast that cannot load (as without libclblast): blocked in a fresh interpreter."""
    result = _run(
        """
        import sys
        sys.modules["pyclblast"] = None  # import pyclblast -> ImportError, as without the library
        from arraycore_opencl import OpenCLBackend
        try:
            OpenCLBackend.probe()
        except Exception as exc:
            print(type(exc).__name__, "|", exc, "|", type(exc.__cause__).__name__)
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("BackendUnavailable | pyclblast cannot be imported")
    assert "libclblast-dev" in result.stdout and 'pip install "arraycore[opencl]"' in result.stdout
    assert result.stdout.split("|")[-1].strip() in ("ImportError", "ModuleNotFoundError")


# -- the array class -------------------------------------------------------------------------------
def test_array_class_attributes_and_views(xp: Any) -> None:
    host = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    x = xp.asarray(host)
    assert isinstance(x, OpenCLArray) and isinstance(x, arraycore.ArrayBase)
    assert x.shape == (2, 3, 4) and x.dtype == np.float32 and x.device == DEVICES[0].id
    assert x.strides == (12, 4, 1) and x.offset == 0 and x.is_contiguous
    v = x[1, ::-2, 1:]
    assert v.buffer is x.buffer and not v.is_contiguous
    assert v.offset == 12 + 2 * 4 + 1 and v.strides == (-8, 1)
    np.testing.assert_array_equal(xp.to_numpy(v), host[1, ::-2, 1:])
    t = xp.permute_dims(x, (2, 0, 1))
    assert t.buffer is x.buffer and t.strides == (1, 12, 4)
    v[...] = -1.0  # writes through the view into x
    host[1, ::-2, 1:] = -1.0
    np.testing.assert_array_equal(xp.to_numpy(x), host)
    b = xp.broadcast_to(xp.asarray(np.ones(4, np.float32)), (3, 4))
    assert b.strides == (0, 1)


def test_operators_scalars_and_repr(xp: Any) -> None:
    x = xp.asarray(np.array([[1.0, -2.0], [3.0, 4.0]], dtype=np.float32))
    np.testing.assert_allclose(
        xp.to_numpy((x * 2 - 1) / 4 + x @ x), [[-4.75, -11.25], [16.25, 11.75]]
    )
    assert float(xp.sum(x)) == 6.0 and int(xp.argmax(x)) == 3 and bool(x[0, 0] > 0)
    assert "backend='opencl'" in repr(x)
    x += 1
    np.testing.assert_array_equal(xp.to_numpy(x), [[2.0, -1.0], [4.0, 5.0]])


def test_bool_is_stored_as_bytes(xp: Any, backend: OpenCLBackend) -> None:
    import pyopencl as cl

    flags = xp.less(xp.asarray(np.array([1, 5, 2, 7])), 3)
    raw = np.empty(4, dtype=np.uint8)
    cl.enqueue_copy(backend.rt.queue, raw, flags.buffer, is_blocking=True)
    assert raw.tolist() == [1, 0, 1, 0]
    assert xp.to_numpy(flags).dtype == np.bool_


def test_zero_size_and_zero_dimensional_arrays(xp: Any) -> None:
    e = xp.zeros((0, 3), dtype=xp.float32)
    assert xp.to_numpy(xp.sum(e, axis=0)).tolist() == [0.0, 0.0, 0.0]
    assert xp.to_numpy(e + 1).shape == (0, 3)
    s = xp.asarray(np.float32(2.5))
    assert s.shape == () and float(s * 2) == 5.0


# -- kernel caching ------------------------------------------------------------------------------------
def test_kernels_are_compiled_once_per_op_and_dtype(xp: Any, backend: OpenCLBackend) -> None:
    """One program per (family, dtype): new shapes, strides and broadcasts compile nothing."""
    rt = backend.rt
    a = xp.asarray(np.ones((3, 4), dtype=np.float32))
    xp.to_numpy(xp.multiply(a, a))  # builds the float32 element-wise program if needed
    kernel = rt.kernel("ew", "float32", "b_multiply")
    builds = rt.builds
    for shape in [(5,), (2, 3, 4), (7, 1, 2, 3), (1,), ()]:
        x = xp.asarray(np.full(shape, 2.0, dtype=np.float32))
        y = xp.asarray(np.full(shape[-1:], 3.0, dtype=np.float32))
        np.testing.assert_array_equal(xp.to_numpy(x * y), np.full(shape, 6.0, np.float32))
        if x.ndim >= 2:
            np.testing.assert_array_equal(
                xp.to_numpy(x[..., ::-1] * x.mT.mT[::-1]), np.full(shape, 4.0, np.float32)
            )
    assert rt.builds == builds
    assert rt.kernel("ew", "float32", "b_multiply") is kernel


# -- kernels beyond the kit's small shapes ------------------------------------------------------------
def test_long_reductions_split_into_chunks(xp: Any) -> None:
    rng = np.random.default_rng(0)
    host = rng.standard_normal((3, 50_000)).astype(np.float32)
    x = xp.asarray(host)
    np.testing.assert_allclose(
        xp.to_numpy(xp.sum(x, axis=1)), host.sum(axis=1), rtol=1e-4, atol=1e-2
    )
    np.testing.assert_allclose(
        float(xp.sum(x)), host.astype(np.float64).sum(), rtol=1e-4, atol=1e-1
    )
    assert float(xp.max(x)) == host.max() and float(xp.min(x.T)) == host.min()
    host[1, 40_000] = np.nan
    x = xp.asarray(host)
    got = xp.to_numpy(xp.max(x, axis=1))
    assert np.isnan(got[1]) and got[0] == host[0].max()
    assert xp.to_numpy(xp.argmax(x, axis=1)).tolist() == np.argmax(host, axis=1).tolist()
    ints = np.arange(100_000, dtype=np.int64)
    assert int(xp.sum(xp.asarray(ints))) == int(ints.sum())


@pytest.mark.parametrize(
    ("dtype", "size"),
    [(d, "small") for d in ("float32", "float64", "int32")]
    + [(d, engine) for d in ("float32", "float64") for engine in ("clblast", "arraycore")],
)
def test_batched_matmul_with_broadcasting_and_transposes(
    xp: Any, dtype: str, size: str, monkeypatch: Any
) -> None:
    """Small products run the plain kernel, big float ones CLBlast (gemm, gemmStridedBatched) or
    arraycore's GEMM kernels, whichever the device runs (``ARRAYCORE_OPENCL_GEMM``)."""
    if dtype not in xp.__array_namespace_info__().dtypes():
        pytest.skip(f"the device has no {dtype}")
    if size != "small":
        monkeypatch.setattr(xp._backend.rt, "gemm_engine", size)
    rng = np.random.default_rng(1)
    m, k, n = (33, 17, 9) if size == "small" else (130, 97, 120)
    a = (rng.standard_normal((4, 1, m, k)) * 4).astype(dtype)
    b = (rng.standard_normal((3, k, n)) * 4).astype(dtype)
    w = (rng.standard_normal((n, k)) * 4).astype(dtype)
    if size != "small":
        assert m * n * k > _SMALL_GEMM  # every product below goes to the GEMM
    else:
        assert 12 * m * n * k < _SMALL_GEMM
    rtol = 1e-4 if dtype == "float32" else 1e-10
    x, y, v = xp.asarray(a), xp.asarray(b), xp.asarray(w)
    np.testing.assert_allclose(xp.to_numpy(x @ y), a @ b, rtol=rtol, atol=1e-3)
    np.testing.assert_allclose(xp.to_numpy(x @ v.T), a @ w.T, rtol=rtol, atol=1e-3)
    big = np.concatenate([a[:, 0]] * 4, axis=1)  # (4, 4m, k): 2-D products
    np.testing.assert_allclose(
        xp.to_numpy(xp.asarray(big[0]) @ v.T), big[0] @ w.T, rtol=rtol, atol=1e-3
    )
    np.testing.assert_allclose(
        xp.to_numpy(v @ xp.asarray(big[1]).T), w @ big[1].T, rtol=rtol, atol=1e-3
    )
    np.testing.assert_allclose(
        xp.to_numpy(x[:, :, ::2] @ v[:, ::-1].T), a[:, :, ::2] @ w[:, ::-1].T, rtol=rtol, atol=1e-3
    )


def test_scatter_add_accumulates_repeated_indices(xp: Any) -> None:
    out = xp.zeros((5, 3), dtype=xp.float32)
    idx = xp.asarray(np.array([0, 4, 0, 0, 2]))
    vals = xp.asarray(np.arange(15, dtype=np.float32).reshape(5, 3))
    xp.inplace.scatter_add(out, idx, vals, axis=0)
    ref = np.zeros((5, 3), np.float32)
    np.add.at(ref, [0, 4, 0, 0, 2], np.arange(15, dtype=np.float32).reshape(5, 3))
    np.testing.assert_array_equal(xp.to_numpy(out), ref)


def test_random_streams_repeat_per_seed(xp: Any) -> None:
    a = xp.to_numpy(xp.random.default_rng(7).uniform(shape=(1000,), dtype=xp.float32))
    b = xp.to_numpy(xp.random.default_rng(7).uniform(shape=(1000,), dtype=xp.float32))
    c = xp.to_numpy(xp.random.default_rng(8).uniform(shape=(1000,), dtype=xp.float32))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert a.min() >= 0.0 and a.max() < 1.0 and abs(a.mean() - 0.5) < 0.05
    g = xp.random.default_rng(7)
    first, second = xp.to_numpy(g.uniform(shape=(500,))), xp.to_numpy(g.uniform(shape=(500,)))
    both = xp.to_numpy(xp.random.default_rng(7).uniform(shape=(1000,)))
    np.testing.assert_array_equal(np.concatenate([first, second]), both)


# -- nn overrides ------------------------------------------------------------------------------------
def test_nn_overrides_match_the_reference_kernels(xp: Any) -> None:
    """im2col/col2im convolutions and max pooling against the NumPy backend (the reference)."""
    ref = arraycore.namespace("numpy")
    assert xp.nn.conv2d.__name__ == "shared_conv2d"  # the override, not the derived version
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 11, 9))
    w = rng.standard_normal((4, 3, 3, 2))
    geometry = {"stride": (2, 1), "padding": ((1, 2), (0, 1)), "dilation": (1, 2)}
    y = ref.nn.conv2d(x, w, **geometry)
    np.testing.assert_allclose(
        xp.to_numpy(xp.nn.conv2d(xp.asarray(x), xp.asarray(w), **geometry)), y
    )
    dy = rng.standard_normal(y.shape)
    np.testing.assert_allclose(
        xp.to_numpy(xp.nn.conv2d_backward_data(xp.asarray(dy), xp.asarray(w), x.shape, **geometry)),
        ref.nn.conv2d_backward_data(dy, w, x.shape, **geometry),
    )
    np.testing.assert_allclose(
        xp.to_numpy(
            xp.nn.conv2d_backward_filter(xp.asarray(x), xp.asarray(dy), w.shape, **geometry)
        ),
        ref.nn.conv2d_backward_filter(x, dy, w.shape, **geometry),
    )
    x[0, 1, 2, 3] = np.nan
    x[1, 2, :3, :3] = 5.0  # ties: the first maximum receives the gradient
    pool = {"kernel_size": 3, "stride": 2, "padding": 1}
    y = ref.nn.max_pool2d(x, **pool)
    got = xp.nn.max_pool2d(xp.asarray(x), **pool)
    np.testing.assert_array_equal(xp.to_numpy(got), y)
    dy = rng.standard_normal(y.shape)
    # overlapping windows: a pixel that two windows pick sums their gradients, in window order
    # on NumPy (numba's kernel, the reference's loop) and in tap order here (last bits)
    np.testing.assert_allclose(
        xp.to_numpy(xp.nn.max_pool2d_backward(xp.asarray(dy), xp.asarray(x), **pool)),
        ref.nn.max_pool2d_backward(dy, x, **pool),
        rtol=4 * np.finfo(np.float64).eps,
        atol=0,
    )


# -- arraycore.device_kernels: the host code and kernel bodies the CUDA backend runs too ---------
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_shared_kernel_host_paths_match_the_reference(
    xp: Any, backend: OpenCLBackend, dtype: str
) -> None:
    """Every KernelHost path, including those this backend serves with its own strided kernels
    (max pooling, im2col/col2im), on this device against the NumPy reference: what the CUDA
    backend does on a GPU with the same host code and kernel bodies."""
    if dtype not in xp.__array_namespace_info__().dtypes():
        pytest.skip(f"this OpenCL device has no {dtype}")
    from arraycore import nn_shapes

    ref = arraycore.namespace("numpy")
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3, 7, 6)).astype(dtype)
    x[0, 1, 2, 3] = np.nan
    view = xp.asarray(np.ascontiguousarray(x.transpose(0, 1, 3, 2))).mT  # strided input
    args = ((3, 2), (2, 1), ((1, 0), (1, 1)))
    got = backend.shared_max_pool2d(view, *args)
    np.testing.assert_array_equal(xp.to_numpy(got), ref.nn.max_pool2d(x, *args))
    # the shared max-pool kernels (the CUDA backend's), not this backend's strided hooks
    from arraycore.kernel_host import KernelHost

    pwin = nn_shapes.pool_window("max_pool2d", x.shape, *args)
    pooled = KernelHost.max_pool(backend, view, pwin)
    np.testing.assert_array_equal(xp.to_numpy(pooled), ref.nn.max_pool2d(x, *args))
    g = rng.standard_normal(tuple(pooled.shape)).astype(dtype)
    grad = KernelHost.max_pool_backward(backend, xp.asarray(g), view, pwin)
    want = ref.nn.max_pool2d_backward(g, x, *args)
    np.testing.assert_allclose(xp.to_numpy(grad), want, rtol=1e-5, atol=1e-5)
    dy = rng.standard_normal(tuple(got.shape)).astype(dtype)
    got = backend.shared_max_pool2d_backward(xp.asarray(dy), view, *args)
    want = ref.nn.max_pool2d_backward(dy, x, *args)
    np.testing.assert_allclose(xp.to_numpy(got), want, rtol=1e-5, atol=1e-5)
    clean = np.nan_to_num(x)
    got = backend.shared_avg_pool2d(xp.asarray(clean), *args, False)
    np.testing.assert_allclose(xp.to_numpy(got), ref.nn.avg_pool2d(clean, *args, False), rtol=1e-5)
    w = rng.standard_normal((4, 3, 3, 3)).astype(dtype)
    win = nn_shapes.conv_window("conv2d", x.shape, w.shape, 2, 1, (1, 2))
    cols = xp.to_numpy(backend.shared_im2col(xp.asarray(clean), win))
    y = (w.reshape(4, -1) @ cols).reshape(4, win.n, win.out_h, win.out_w).transpose(1, 0, 2, 3)
    want = ref.nn.conv2d(clean, w, stride=2, padding=1, dilation=(1, 2))
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)
    g = rng.standard_normal(y.shape).astype(dtype)
    dcols = w.reshape(4, -1).T @ g.transpose(1, 0, 2, 3).reshape(4, -1)
    dx = xp.to_numpy(backend.shared_col2im(xp.asarray(dcols), win))
    want = ref.nn.conv2d_backward_data(g, w, x.shape, stride=2, padding=1, dilation=(1, 2))
    np.testing.assert_allclose(dx, want, rtol=1e-4, atol=1e-4)
    logits = rng.standard_normal((6, 4, 5)).astype(dtype)
    got = backend.shared_log_softmax(xp.asarray(logits), axis=-1)
    np.testing.assert_allclose(xp.to_numpy(got), ref.nn.log_softmax(logits, axis=-1), rtol=1e-5)
    got = backend.shared_softmax(xp.asarray(logits), axis=1)  # another axis: the reference
    np.testing.assert_allclose(xp.to_numpy(got), ref.nn.softmax(logits, axis=1), rtol=1e-5)


@pytest.mark.parametrize("light", [True, False])
def test_clblast_operands_are_light_views_of_the_buffers(xp: Any, light: bool, monkeypatch) -> None:
    """pyclblast reads an Array's shape, dtype and base buffer only: the GEMM path hands it bare
    instances carrying those (1 us instead of the constructor's 30 on PoCL), and the constructor
    where a pyopencl refuses them; both give the same products."""
    import pyopencl.array as cla

    from arraycore_opencl import _gemm

    monkeypatch.setattr(_gemm, "_LIGHT", [] if light else [False])
    monkeypatch.setattr(xp._backend.rt, "gemm_engine", "clblast")
    x = xp.asarray(np.arange(12.0, dtype=np.float32).reshape(3, 4))
    view = _gemm.operand_view(cla, xp._backend.rt.queue, x._buf, x.dtype)
    assert isinstance(view, cla.Array) and view.base_data is x._buf
    assert view.shape == (1, x._buf.size // 4) and view.dtype == np.float32
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((130, 90)), rng.standard_normal((90, 120))
    for dtype in ("float32", "float64"):
        if dtype not in xp.__array_namespace_info__().dtypes():
            continue
        got = xp.matmul(xp.asarray(a.astype(dtype)), xp.asarray(b.astype(dtype)))
        np.testing.assert_allclose(xp.to_numpy(got), a @ b, rtol=1e-4, atol=1e-4)
