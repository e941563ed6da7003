"""OpenCL arrays and host (NumPy) arrays never mix silently, on a real OpenCL device (PoCL in CI).

The ``nn`` kernels refuse arrays of another backend with a BackendMismatchError that names the
op; DLPack exports host copies only; uploaded arrays count in the memory statistics. (The rules
every backend shares are in the conformance kit: ``--arraycore-backend=opencl``.)
"""

from __future__ import annotations

import ctypes
import gc
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import arraycore
from arraycore.backend import BackendUnavailable
from arraycore.errors import BackendMismatchError
from arraycore_opencl import OpenCLArray, OpenCLBackend

try:
    OpenCLBackend.probe()
    DEVICES = OpenCLBackend.devices()
except BackendUnavailable as exc:  # pragma: no cover - only where OpenCL is absent
    pytest.skip(f"no usable OpenCL device here: {exc}", allow_module_level=True)

F32 = np.float32


@pytest.fixture(scope="module")
def xp() -> Any:
    return arraycore.namespace("opencl", device=0)


def _nn_calls(nn: Any, x: Any, w: Any, dy: Any, flat: Any, labels: Any) -> dict[str, Any]:
    """Every ``xp.nn`` kernel, called with the given arrays (NCHW ``x``, OIHW ``w``, ``dy`` of
    the convolution's output shape, 2-D ``flat``, int ``labels``)."""
    return {
        "conv2d": lambda: nn.conv2d(x, w, padding=1),
        "conv2d_backward_data": lambda: nn.conv2d_backward_data(dy, w, (1, 2, 4, 4), padding=1),
        "conv2d_backward_filter": lambda: nn.conv2d_backward_filter(x, dy, (2, 2, 3, 3), padding=1),
        "conv2d_transpose": lambda: nn.conv2d_transpose(dy, w, padding=1),
        "max_pool2d": lambda: nn.max_pool2d(x, 2),
        "max_pool2d_backward": lambda: nn.max_pool2d_backward(dy[:, :, :2, :2], x, 2),
        "avg_pool2d": lambda: nn.avg_pool2d(x, 2),
        "avg_pool2d_backward": lambda: nn.avg_pool2d_backward(dy[:, :, :2, :2], (1, 2, 4, 4), 2),
        "softmax": lambda: nn.softmax(flat),
        "log_softmax": lambda: nn.log_softmax(flat),
        "logsumexp": lambda: nn.logsumexp(flat, axis=1),
        "softmax_backward": lambda: nn.softmax_backward(flat, flat),
        "softmax_cross_entropy": lambda: nn.softmax_cross_entropy(flat, labels),
        "one_hot": lambda: nn.one_hot(labels, 3),
        "batch_norm": lambda: nn.batch_norm(x, flat[0, :2], flat[1, :2]),
        "batch_norm_backward": lambda: nn.batch_norm_backward(
            dy, x, flat[0, :2], flat[1, :2], flat[0, 1:]
        ),
        "batch_norm_relu": lambda: nn.batch_norm_relu(x, flat[0, :2], flat[1, :2]),
        "batch_norm_relu_backward": lambda: nn.batch_norm_relu_backward(
            dy, x, flat[0, :2], flat[1, :2], flat[0, 1:], x
        ),
        "gelu": lambda: nn.gelu(x),
        "gelu_backward": lambda: nn.gelu_backward(dy, x),
        "relu_backward": lambda: nn.relu_backward(dy, x),
        "layer_norm": lambda: nn.layer_norm(flat, flat[0], flat[1]),
        "layer_norm_backward": lambda: nn.layer_norm_backward(
            flat, flat, flat[0], flat[:, 0], flat[:, 1]
        ),
        # 2 sequences of 4 steps of 4 features, 1 unit: x[0] (2, 4, 4), w (4, 4), u (1, 4), b
        # (4,) from x; dy and y (2, 4, 1) from dy; any arrays of the right shapes as "saved"
        "lstm": lambda: nn.lstm(x[0], x[0, 0], x[0, 1, :1], x[0, 1, 1]),
        "lstm_backward": lambda: nn.lstm_backward(
            dy[0, :, :, :1],
            None,
            None,
            x[0],
            x[0, 0],
            x[0, 1, :1],
            x[0, 1, 1],
            None,
            None,
            dy[0, :, :, :1],
            (x[0], dy[0, :, :, :1], dy[0, :, :, :1]),
        ),
        # a GRU of 1 unit: xw (2, 4, 3), u (1, 3), b (3,) from x; dy, y and saved from dy
        "gru_sequence": lambda: nn.gru_sequence(x[0, :, :, :3], x[0, 0, :1, :3], x[0, 1, 1, :3]),
        "gru_sequence_backward": lambda: nn.gru_sequence_backward(
            dy[0, :, :, :1],
            x[0, 0, :1, :3],
            None,
            dy[0, :, :, :1],
            (dy[0, :, :, :2], dy[0, :, :, :1], dy[0, :, :, :1]),
        ),
        # attention over (1, 2) heads of 4 steps of width 4: q = k = v = x; dy and out from dy,
        # any (1, 2, 4) array as the rows' log-sum-exp
        "scaled_dot_product_attention": lambda: nn.scaled_dot_product_attention(x, x, x),
        "scaled_dot_product_attention_backward": lambda: nn.scaled_dot_product_attention_backward(
            dy, x, x, x, dy, dy[..., 0]
        ),
    }


#: Which of (x, w, dy, flat, labels) each call of :func:`_nn_calls` reads.
USES = {
    "conv2d": {0, 1},
    "conv2d_backward_data": {1, 2},
    "conv2d_backward_filter": {0, 2},
    "conv2d_transpose": {1, 2},
    "max_pool2d": {0},
    "max_pool2d_backward": {0, 2},
    "avg_pool2d": {0},
    "avg_pool2d_backward": {2},
    "softmax": {3},
    "log_softmax": {3},
    "logsumexp": {3},
    "softmax_backward": {3},
    "softmax_cross_entropy": {3, 4},
    "one_hot": {4},
    "batch_norm": {0, 3},
    "batch_norm_backward": {0, 2, 3},
    "batch_norm_relu": {0, 3},
    "batch_norm_relu_backward": {0, 2, 3},
    "gelu": {0},
    "gelu_backward": {0, 2},
    "relu_backward": {0, 2},
    "layer_norm": {3},
    "layer_norm_backward": {3},
    "lstm": {0},
    "lstm_backward": {0, 2},
    "gru_sequence": {0},
    "gru_sequence_backward": {0, 2},
    "scaled_dot_product_attention": {0},
    "scaled_dot_product_attention_backward": {0, 2},
}


def _host_arrays() -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 2, 4, 4)).astype(F32)
    w = rng.standard_normal((2, 2, 3, 3)).astype(F32)
    dy = rng.standard_normal((1, 2, 4, 4)).astype(F32)
    flat = rng.standard_normal((2, 3)).astype(F32)
    labels = np.array([0, 2], dtype=np.int64)
    return x, w, dy, flat, labels


def test_nn_kernels_given_numpy_arrays_raise_a_backend_mismatch(xp: Any) -> None:
    calls = _nn_calls(xp.nn, *_host_arrays())
    nn = {name.removeprefix("nn.") for name in xp._backend.overrides() if name.startswith("nn.")}
    assert set(calls) >= nn
    for name, call in calls.items():
        with pytest.raises(BackendMismatchError) as info:
            call()
        message = str(info.value)
        assert message.startswith(f"nn.{name}: "), message
        assert "numpy.ndarray in host memory" in message and "backend 'opencl'" in message
        assert "xp.asarray(a)" in message and "to_numpy(x)" in message, message


def test_nn_kernels_given_one_host_array_among_device_arrays(xp: Any) -> None:
    """A weight (or label, or gradient) left on the host is named, with the op; nothing moves."""
    host = _host_arrays()
    on_device = [xp.asarray(a) for a in host]
    for call in _nn_calls(xp.nn, *on_device).values():
        call()  # valid calls: what fails below is only the host array
    for i in range(len(host)):
        args = list(on_device)
        args[i] = host[i]
        for name, call in _nn_calls(xp.nn, *args).items():
            if i not in USES[name]:
                continue
            with pytest.raises(BackendMismatchError) as info:
                call()
            message = str(info.value)
            assert message.startswith(f"nn.{name}: "), message
            assert "numpy" in message and "opencl" in message, message


def test_a_parameter_used_on_two_backends_is_an_error(xp: Any) -> None:
    x, w, *_ = _host_arrays()
    tiny = arraycore.namespace("tiny")
    numpy_xp = arraycore.namespace("numpy")
    w_cl, x_tiny = xp.asarray(w), tiny.asarray(x)
    with pytest.raises(BackendMismatchError, match=r"^nn\.conv2d: .*OpenCLArray.*TinyArray"):
        xp.nn.conv2d(xp.asarray(x), tiny.asarray(w))
    with pytest.raises(BackendMismatchError, match=r"^nn\.conv2d: got a .*OpenCLArray"):
        tiny.nn.conv2d(x_tiny, w_cl)
    with pytest.raises(BackendMismatchError, match=r"from_dlpack"):
        tiny.asarray(w_cl)  # moving it to another backend is never implicit
    with pytest.raises(BackendMismatchError, match=r"to_numpy"):
        numpy_xp.asarray(w_cl)
    with pytest.raises(TypeError):
        numpy_xp.matmul(x.reshape(8, 4), w_cl)  # NumPy's own function: refused, not converted
    moved = tiny.from_dlpack(w_cl)  # the explicit move
    np.testing.assert_array_equal(tiny.to_numpy(moved), w)


def test_arrays_made_inside_use_opencl_run_the_opencl_kernels() -> None:
    x, w, *_ = _host_arrays()
    with arraycore.use("opencl", device=0) as xp:
        y = arraycore.nn.conv2d(arraycore.asarray(x), arraycore.asarray(w), padding=1)
        assert isinstance(y, OpenCLArray)
        want = arraycore.namespace("numpy").nn.conv2d(x, w, padding=1)
        np.testing.assert_allclose(xp.to_numpy(y), want, rtol=2e-5, atol=1e-5)


# -- DLPack --------------------------------------------------------------------------------------------
def _capsule_name(capsule: Any) -> str:
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype = ctypes.c_char_p
    get_name.argtypes = [ctypes.py_object]
    return str(get_name(capsule).decode())


def test_dlpack_exports_host_copies(xp: Any) -> None:
    host = np.arange(24, dtype=F32).reshape(2, 3, 4)
    x = xp.asarray(host)
    assert x.__dlpack_device__() == (4, 0)  # kDLOpenCL, the first device
    views: dict[str, tuple[Any, np.ndarray]] = {
        "contiguous": (x, host),
        "strided": (x[1, ::-2, 1:], host[1, ::-2, 1:]),
        "transposed": (xp.permute_dims(x, (2, 0, 1)), host.transpose(2, 0, 1)),
        "broadcast": (xp.broadcast_to(x[0, :1], (5, 4)), np.broadcast_to(host[0, :1], (5, 4))),
        "0-d": (x[1, 2, 3], host[1, 2, 3]),
        "empty": (xp.zeros((0, 3), dtype=F32), np.zeros((0, 3), F32)),
        "bool": (xp.less(x, 10.0), host < 10),
    }
    for label, (view, want) in views.items():
        got = np.from_dlpack(view, device="cpu", copy=True)
        np.testing.assert_array_equal(got, want, err_msg=label)
        assert got.dtype == want.dtype, label
    capsule = x.__dlpack__(max_version=(1, 0), dl_device=(1, 0), copy=True)
    assert _capsule_name(capsule) == "dltensor_versioned"
    legacy = x.__dlpack__(dl_device=(1, 0))
    assert _capsule_name(legacy) == "dltensor"


def test_dlpack_refuses_device_memory_and_copy_false(xp: Any) -> None:
    x = xp.ones((2, 2), dtype=F32)
    refusals: dict[str, Callable[[], Any]] = {
        "device='cpu', copy=True": lambda: np.from_dlpack(x),
        "copy=False": lambda: np.from_dlpack(x, device="cpu", copy=False),
        "exports only to the host": lambda: x.__dlpack__(dl_device=(2, 0)),
    }
    for expected, refuse in refusals.items():
        with pytest.raises(BufferError, match=expected.replace("(", r"\(")):
            refuse()
    with pytest.raises(BufferError, match=r"device='cpu', copy=True"):
        arraycore.namespace("numpy").from_dlpack(x)
    host = arraycore.namespace("numpy").from_dlpack(x, device="cpu", copy=True)
    np.testing.assert_array_equal(host, np.ones((2, 2), F32))


# -- memory statistics ----------------------------------------------------------------------------------
def test_uploaded_arrays_count_until_their_last_view_is_gone(xp: Any) -> None:
    info = xp.__array_namespace_info__()
    gc.collect()
    info.reset_memory_stats()
    before = info.memory_stats()
    size = 4 << 20
    x = xp.asarray(np.ones(size // 4, dtype=F32))
    stats = info.memory_stats()
    assert stats["upload_bytes"] >= before["upload_bytes"] + size
    assert stats["used_bytes"] >= before["used_bytes"] + size
    view = x[::2]
    del x
    assert info.memory_stats()["used_bytes"] >= before["used_bytes"] + size  # the view holds it
    np.testing.assert_array_equal(xp.to_numpy(view * 2)[:3], [2.0, 2.0, 2.0])
    del view
    after = info.memory_stats()
    assert after["upload_bytes"] == before["upload_bytes"]
    assert after["peak_bytes"] >= before["used_bytes"] + size
    info.reset_memory_stats()
    assert info.memory_stats()["peak_bytes"] == info.memory_stats()["used_bytes"]


def test_a_capture_records_its_own_thread_only() -> None:
    """While one thread records a step, another thread's uploads, kernels and host copies run
    as they come (they are neither refused as inside the capture nor recorded into it)."""
    import threading

    xp = arraycore.namespace("opencl")
    backend = xp._backend
    if backend.capture_support() is not None:
        pytest.skip(backend.capture_support())
    a = xp.asarray(np.arange(6, dtype=np.float32))
    out = xp.zeros((6,), dtype=xp.float32)

    def step() -> None:
        out[:] = a * 2.0

    step()  # run eagerly first, as capture asks
    inside, other, done = threading.Event(), {}, threading.Event()

    def recorded() -> None:
        step()
        inside.set()
        done.wait(30)

    def elsewhere() -> None:
        inside.wait(30)
        b = xp.asarray(np.ones(4, dtype=np.float32))  # an upload
        other["value"] = xp.to_numpy(b + 1.0)  # a kernel and a host copy
        done.set()

    thread = threading.Thread(target=elsewhere)
    thread.start()
    captured = backend.capture(recorded)
    thread.join(30)
    np.testing.assert_array_equal(other["value"], np.full(4, 2.0, np.float32))
    out[:] = 0.0
    captured.replay()
    np.testing.assert_array_equal(xp.to_numpy(out), np.arange(6) * 2.0)
