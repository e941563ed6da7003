"""The cuda backend on a real GPU (every test here is skipped, with the reason, without one).

These are the backend's own checks; the full comparison with the NumPy reference is the
conformance kit (``nox -s "conformance(cuda)"``) and the nnlayers suite with
``ARRAYCORE_BACKEND=cuda`` (see the README).
"""

from __future__ import annotations

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
