"""The cuda backend on a real GPU (every test here is skipped, with the reason, without one).

These are the backend's own checks; the full comparison with the NumPy reference is the
conformance kit (``nox -s "conformance(cuda)"``) and the nnlayers suite with
``ARRAYCORE_BACKEND=cuda`` (see the README).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

import arraycore
from arraycore.testing import assert_close
from arraycore_cuda import CudaBackend


def test_arrays_are_cupy_arrays_on_the_selected_device(xp: Any) -> None:
    import cupy

    x = xp.asarray([[1.0, 2.0], [3.0, 4.0]])
    assert isinstance(x, cupy.ndarray)
    default = xp.__array_namespace_info__().default_device()
    assert x.device == default and default == 0
    assert default in xp.__array_namespace_info__().devices()
    assert arraycore.namespace_of(x) is xp
    # device= accepts what arrays report and the plain index
    assert xp.zeros(2, device=x.device).device == x.device
    assert xp.ones(2, device=0).device == x.device
    with pytest.raises(ValueError):
        xp.zeros(2, device="no-such-device")


@pytest.mark.parametrize(
    "dtype", ["bool", "int8", "int32", "int64", "uint8", "float16", "float32", "float64"]
)
def test_host_round_trip(xp: Any, dtype: str) -> None:
    host = (np.arange(24).reshape(2, 3, 4) % 3).astype(dtype)
    x = xp.asarray(host)
    assert x.dtype == np.dtype(dtype) and x.shape == host.shape
    back = xp.to_numpy(x)
    assert isinstance(back, np.ndarray)
    np.testing.assert_array_equal(back, host)


def test_arithmetic_and_matmul_match_numpy(xp: Any, ref: Any) -> None:
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((3, 4, 5)), rng.standard_normal((5, 2))
    for fn in (
        lambda ns, x, y: ns.matmul(x, y),
        lambda ns, x, y: ns.sum(ns.exp(x), axis=(0, 2), keepdims=True),
        lambda ns, x, y: ns.maximum(x, 0.5) * 2 - ns.tanh(x) / 3,
        lambda ns, x, y: ns.argmax(x, axis=1),
        lambda ns, x, y: ns.mean(x[:, ::2, 1:], axis=-1),
    ):
        got = fn(xp, xp.asarray(a), xp.asarray(b))
        want = fn(ref, ref.asarray(a), ref.asarray(b))
        assert_close(xp.to_numpy(got), want)


def test_sign_keeps_nan(xp: Any) -> None:
    x = xp.asarray([-2.0, 0.0, 3.0, float("nan")])
    got = xp.to_numpy(xp.sign(x))
    np.testing.assert_array_equal(got, [-1.0, 0.0, 1.0, np.nan])


@pytest.mark.parametrize(
    "dtype", ["bool", "int8", "int32", "int64", "float16", "float32", "float64"]
)
def test_scatter_add_accumulates_repeated_indices(xp: Any, dtype: str) -> None:
    out = np.ones((5, 3), dtype=dtype)
    indices = np.array([0, 2, 2, 4, 0, 0])
    values = np.arange(18).reshape(6, 3).astype(dtype)
    want = out.copy()
    np.add.at(want, indices, values)
    got = xp.asarray(out)
    xp.inplace.scatter_add(got, xp.asarray(indices), xp.asarray(values), axis=0)
    assert_close(xp.to_numpy(got), want)


def test_random_streams_are_reproducible(xp: Any) -> None:
    a = xp.to_numpy(xp.random.default_rng(7).uniform(shape=(1000,)))
    b = xp.to_numpy(xp.random.default_rng(7).uniform(shape=(1000,)))
    np.testing.assert_array_equal(a, b)
    assert a.min() >= 0.0 and a.max() < 1.0 and abs(a.mean() - 0.5) < 0.05


def test_conv2d_and_pooling_match_numpy(xp: Any, ref: Any) -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 9, 8)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    got = xp.nn.conv2d(xp.asarray(x), xp.asarray(w), stride=2, padding=1)
    want = ref.nn.conv2d(x, w, stride=2, padding=1)
    assert_close(xp.to_numpy(got), want, scale=10)
    got = xp.nn.max_pool2d(xp.asarray(x), 2, 2, 0)
    assert_close(xp.to_numpy(got), ref.nn.max_pool2d(x, 2, 2, 0))


def test_from_dlpack_is_zero_copy_for_cuda_arrays(xp: Any) -> None:
    import cupy

    a = cupy.arange(6, dtype=cupy.float32)
    b = xp.from_dlpack(a)
    b[0] = 42
    assert float(a[0]) == 42.0
    host = np.arange(3.0)
    c = xp.from_dlpack(host)
    assert isinstance(c, cupy.ndarray)
    np.testing.assert_array_equal(xp.to_numpy(c), host)
    with pytest.raises(BufferError):
        xp.from_dlpack(host, copy=False)


def test_memory_stats_and_synchronize(xp: Any) -> None:
    bk = xp._backend
    assert isinstance(bk, CudaBackend)
    x = xp.zeros((1024, 1024), dtype=xp.float32)
    bk.synchronize()
    stats = bk.memory_stats()
    assert stats["used_bytes"] >= x.nbytes
    assert stats["pool_bytes"] >= stats["used_bytes"]
    assert 0 < stats["device_free_bytes"] <= stats["device_total_bytes"]


def test_overrides_can_be_switched_off(xp: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARRAYCORE_CUDA_OVERRIDES", "none")
    assert CudaBackend().overrides() == {}
    monkeypatch.setenv("ARRAYCORE_CUDA_OVERRIDES", "all")
    assert "matmul" in CudaBackend().overrides()


def test_a_second_gpu_gets_its_own_arrays(xp: Any) -> None:
    devices = CudaBackend.devices()
    if len(devices) < 2:
        pytest.skip(f"only {len(devices)} CUDA device here")
    xp1 = arraycore.namespace("cuda", device=1)
    x1 = xp1.ones(3)
    assert x1.device == 1 and arraycore.namespace_of(x1) is xp1
    with pytest.raises(arraycore.BackendMismatchError):
        xp.add(xp.ones(3), x1)


# -- the nn kernels of this package, cuDNN, fusion, synchronisation --------------------------------
def test_own_kernels_and_cudnn_match_numpy(xp: Any, ref: Any) -> None:
    """Each nn override (cuDNN where installed, the NVRTC kernels otherwise) against NumPy,
    float32 and float64, with asymmetric padding, stride and dilation."""
    rng = np.random.default_rng(2)
    for dtype in (np.float32, np.float64):
        x = rng.standard_normal((2, 3, 9, 8)).astype(dtype)
        w = rng.standard_normal((4, 3, 3, 2)).astype(dtype)
        kw = {"stride": (2, 1), "padding": ((1, 0), (2, 1)), "dilation": (1, 2)}
        y = xp.nn.conv2d(xp.asarray(x), xp.asarray(w), **kw)
        assert_close(xp.to_numpy(y), ref.nn.conv2d(x, w, **kw), scale=20)
        dy = rng.standard_normal(tuple(y.shape)).astype(dtype)
        dx = xp.nn.conv2d_backward_data(xp.asarray(dy), xp.asarray(w), x.shape, **kw)
        assert_close(xp.to_numpy(dx), ref.nn.conv2d_backward_data(dy, w, x.shape, **kw), scale=20)
        dw = xp.nn.conv2d_backward_filter(xp.asarray(x), xp.asarray(dy), w.shape, **kw)
        want = ref.nn.conv2d_backward_filter(x, dy, w.shape, **kw)
        assert_close(xp.to_numpy(dw), want, scale=100)
        for args in ((3, 2, 1), ((2, 3), (1, 2), ((1, 0), (0, 1)))):
            p = xp.nn.max_pool2d(xp.asarray(x), *args)
            assert_close(xp.to_numpy(p), ref.nn.max_pool2d(x, *args))
            g = rng.standard_normal(tuple(p.shape)).astype(dtype)
            got = xp.nn.max_pool2d_backward(xp.asarray(g), xp.asarray(x), *args)
            assert_close(xp.to_numpy(got), ref.nn.max_pool2d_backward(g, x, *args), scale=10)
            for include in (True, False):
                a = xp.nn.avg_pool2d(xp.asarray(x), *args, include)
                assert_close(xp.to_numpy(a), ref.nn.avg_pool2d(x, *args, include), scale=10)
                got = xp.nn.avg_pool2d_backward(xp.asarray(g), x.shape, *args, include)
                want = ref.nn.avg_pool2d_backward(g, x.shape, *args, include)
                assert_close(xp.to_numpy(got), want, scale=10)
        logits = (rng.standard_normal((64, 10)) * 5).astype(dtype)
        labels = rng.integers(0, 10, 64)
        for name in ("softmax", "log_softmax"):
            got = getattr(xp.nn, name)(xp.asarray(logits), axis=-1)
            assert_close(xp.to_numpy(got), getattr(ref.nn, name)(logits, axis=-1), scale=10)
        loss, d = xp.nn.softmax_cross_entropy(xp.asarray(logits), xp.asarray(labels), 1 / 64)
        want_loss, want_d = ref.nn.softmax_cross_entropy(logits, labels, 1 / 64)
        assert_close(xp.to_numpy(loss), want_loss, scale=100)
        assert_close(xp.to_numpy(d), want_d, scale=10)
        gamma, beta = rng.standard_normal(3).astype(dtype), rng.standard_normal(3).astype(dtype)
        got = xp.nn.batch_norm(xp.asarray(x), xp.asarray(gamma), xp.asarray(beta), eps=1e-3)
        want = ref.nn.batch_norm(x, gamma, beta, eps=1e-3)
        for a, b in zip(got, want, strict=True):
            assert_close(xp.to_numpy(a), b, scale=100)
        g = rng.standard_normal(x.shape).astype(dtype)
        got = xp.nn.batch_norm_backward(xp.asarray(g), xp.asarray(x), xp.asarray(gamma), *got[1:])
        want = ref.nn.batch_norm_backward(g, x, gamma, *want[1:])
        for a, b in zip(got, want, strict=True):
            assert_close(xp.to_numpy(a), b, scale=100)
        assert_close(xp.to_numpy(xp.nn.gelu(xp.asarray(x))), ref.nn.gelu(x), scale=10)
        got_dx = xp.nn.gelu_backward(xp.asarray(g), xp.asarray(x))
        assert_close(xp.to_numpy(got_dx), ref.nn.gelu_backward(g, x), scale=10)
        gamma, beta = rng.standard_normal(8).astype(dtype), rng.standard_normal(8).astype(dtype)
        got = xp.nn.layer_norm(xp.asarray(x), xp.asarray(gamma), xp.asarray(beta), eps=1e-3)
        want = ref.nn.layer_norm(x, gamma, beta, eps=1e-3)
        for a, b in zip(got, want, strict=True):
            assert_close(xp.to_numpy(a), b, scale=100)
        got = xp.nn.layer_norm_backward(xp.asarray(g), xp.asarray(x), xp.asarray(gamma), *got[1:])
        want = ref.nn.layer_norm_backward(g, x, gamma, *want[1:])
        for a, b in zip(got, want, strict=True):
            assert_close(xp.to_numpy(a), b, scale=100)


@pytest.mark.parametrize("recompute", [None, True])
def test_attention_matches_numpy(xp: Any, ref: Any, recompute: bool | None) -> None:
    """Attention and its gradients against the NumPy reference in float32 and float64: the
    products path (``recompute=None`` at this size) and the fused NVRTC kernels (``True``), with
    a key padding mask, an additive mask and the causal mask."""
    rng = np.random.default_rng(5)
    for dtype in (np.float32, np.float64):
        q, k, v = (rng.standard_normal((2, 3, t, 8)).astype(dtype) for t in (5, 7, 7))
        dy = rng.standard_normal((2, 3, 5, 8)).astype(dtype)
        keep = np.ones((2, 1, 1, 7), dtype=bool)
        keep[1, ..., 5:] = False
        bias = rng.standard_normal((5, 7)).astype(dtype)
        for mask, causal in ((None, False), (keep, True), (bias, False)):
            opts: dict[str, Any] = {"causal": causal}
            dev = [xp.asarray(a) for a in (q, k, v)]
            m = None if mask is None else xp.asarray(mask)
            out, saved = xp.nn.scaled_dot_product_attention(*dev, m, recompute=recompute, **opts)
            want_out, want_saved = ref.nn.scaled_dot_product_attention(q, k, v, mask, **opts)
            assert_close(xp.to_numpy(out), want_out, scale=50)
            grads = xp.nn.scaled_dot_product_attention_backward(
                xp.asarray(dy), *dev, out, saved, m, **opts
            )
            want = ref.nn.scaled_dot_product_attention_backward(
                dy, q, k, v, want_out, want_saved, mask, **opts
            )
            for got, expected in zip(grads, want, strict=True):
                assert_close(xp.to_numpy(got), expected, scale=500)


def test_attention_in_half_precision_uses_cudnn_when_installed(xp: Any, ref: Any) -> None:
    """float16 attention (what mixed precision runs) matches float32 NumPy to half precision's
    accuracy, and runs on cuDNN's SDPA graph where cudnn-frontend is installed (the float32
    log-sum-exp it keeps is the sign), with the causal mask and a boolean key padding mask."""
    from arraycore_cuda import backend

    rng = np.random.default_rng(6)
    q, k, v = (rng.standard_normal((2, 4, 64, 64)).astype(np.float32) for _ in range(3))
    dy = rng.standard_normal((2, 4, 64, 64)).astype(np.float32)
    keep = np.ones((2, 1, 1, 64), dtype=bool)
    keep[0, ..., 48:] = False
    module, description = backend.cudnn_probe()
    for mask, causal in ((None, True), (keep, False)):
        dev = [xp.asarray(a.astype(np.float16)) for a in (q, k, v)]
        m = None if mask is None else xp.asarray(mask)
        out, saved = xp.nn.scaled_dot_product_attention(*dev, m, causal=causal)
        want_out, want_saved = ref.nn.scaled_dot_product_attention(q, k, v, mask, causal=causal)
        np.testing.assert_allclose(xp.to_numpy(out), want_out, rtol=2e-2, atol=2e-2)
        if module is not None:
            assert saved.dtype == np.float32 and tuple(saved.shape) == (2, 4, 64), description
            assert "sdpa_forward" in xp._backend._nn.cudnn.describe()
        grads = xp.nn.scaled_dot_product_attention_backward(
            xp.asarray(dy.astype(np.float16)), *dev, out, saved, m, causal=causal
        )
        want = ref.nn.scaled_dot_product_attention_backward(
            dy, q, k, v, want_out, want_saved, mask, causal=causal
        )
        for got, expected in zip(grads, want, strict=True):
            assert got.dtype == np.float16
            np.testing.assert_allclose(xp.to_numpy(got), expected, rtol=5e-2, atol=5e-2)
    if module is None:
        pytest.skip(
            f"cuDNN is not installed here (the float16 path ran the reference): {description}"
        )


def test_cudnn_path_is_reported_and_used_when_installed(xp: Any) -> None:
    from arraycore_cuda import backend

    module, description = backend.cudnn_probe()
    assert description in CudaBackend.version()
    if module is None:
        pytest.skip(f"cuDNN is not installed here: {description}")
    cudnn = xp._backend._nn.cudnn
    assert cudnn is not None and cudnn.disabled_reason is None
    x = xp.ones((8, 16, 32, 32), dtype=xp.float32)
    w = xp.ones((32, 16, 3, 3), dtype=xp.float32)
    xp.nn.conv2d(x, w, padding=1)
    assert "conv2d" in cudnn.describe(), cudnn.describe()


def test_fuse_is_one_cupy_kernel_for_scalar_operands(xp: Any) -> None:
    """``scalar_operands=True``: one ``cupy.fuse`` kernel, called with new scalars; without the
    promise the function runs as it is (see the next test for why)."""
    import cupy

    def axpy(y: Any, x: Any, a: float) -> None:
        xp.inplace.multiply(y, a, out=y)
        xp.inplace.add(y, x, out=y)

    assert xp.inplace.fuse(axpy) is axpy
    fused = xp.inplace.fuse(axpy, scalar_operands=True)
    assert isinstance(fused, cupy._core.fusion.Fusion)
    y, x = xp.ones(1000, dtype=xp.float32), xp.full(1000, 2.0, dtype=xp.float32)
    fused(y, x, 3.0)
    fused(y, x, 0.5)
    np.testing.assert_allclose(xp.to_numpy(y), np.full(1000, 4.5, dtype=np.float32))


@pytest.mark.xfail(
    strict=True,
    reason="CuPy 14.2's fuse computes arithmetic between two Python-float arguments (1.0 - b1) "
    "in float16; when this passes, CudaBackend.fuse can fuse without scalar_operands",
)
def test_cupy_fuse_keeps_python_scalars_exact(xp: Any) -> None:
    """Found on an H200 (2026-11-27): ``m += g * (1.0 - b1)`` under ``cupy.fuse`` with ``b1=0.9``
    a Python float differs from the eager result by 1e-4 relative, what ``1 - float16(0.9)``
    gives. Strict: a CuPy that fixes it turns this into a failure that says so."""
    import cupy

    def update(m: Any, g: Any, b1: float) -> None:
        cupy.add(m, g * (1.0 - b1), out=m)

    rng = np.random.default_rng(0)
    g = cupy.asarray(rng.standard_normal(1000))
    fused, eager = cupy.zeros(1000), cupy.zeros(1000)
    cupy.fuse(update)(fused, g, 0.9)
    update(eager, g, 0.9)
    np.testing.assert_allclose(cupy.asnumpy(fused), cupy.asnumpy(eager), rtol=1e-12)


def test_a_training_step_never_synchronises(xp: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Whole nnlayers training steps (conv, batch-norm, max and average pooling, the fused
    cross-entropy, backward, SGD-momentum and Adam updates) run with CuPy's synchronisation
    detector armed: nothing in a step waits for the GPU. The labels live on the device, so
    their range check (one transfer) is switched off: that is what ``arraycore.checks(False)``
    is for (on the H200 the check was the one synchronisation found)."""
    pytest.importorskip("nnlayers", reason="nnlayers is not installed here")
    import cupyx

    from nnlayers.layers import Affine, AvgPool2D, BatchNorm, Conv2D, Flatten, Pool2D, Sequential
    from nnlayers.models import Classifier
    from nnlayers.optim import SGD, Adam

    monkeypatch.setenv("ARRAYCORE_BACKEND", "cuda")
    rng = np.random.default_rng(3)
    x = xp.asarray(rng.standard_normal((32, 3, 16, 16)).astype(np.float32))
    y = xp.asarray(rng.integers(0, 10, 32))
    for optimizer in (SGD(0.1, momentum=0.9), Adam(1e-3)):
        layers = [Conv2D(8, 3, padding="same"), BatchNorm(), "relu", Pool2D(2), AvgPool2D(2)]
        net = Sequential([*layers, Flatten(), Affine(10)], seed=0)
        model = Classifier(net, (3, 16, 16), optimizer=optimizer)
        assert model.graph.xp is xp
        model.train_step((x, y))  # warm-up: kernels compile, cuDNN autotunes
        with warnings.catch_warnings():
            # CuPy >= 10 deprecates the detector ("not possible to reliably detect"); it still
            # raises DeviceSynchronized on the synchronisations CuPy itself makes
            warnings.filterwarnings("ignore", "cupyx.allow_synchronize", UserWarning)
            detector = cupyx.allow_synchronize(False)
            detector.__enter__()
        try:
            with arraycore.checks(False):
                for _ in range(3):
                    loss, _accuracy = model.train_step((x, y))
        finally:
            detector.__exit__(None, None, None)
        assert np.isfinite(float(loss))
