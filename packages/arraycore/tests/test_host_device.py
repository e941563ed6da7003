"""Host and device arrays never mix silently: where new arrays live, and the errors of mixes.

The tiny test backend stands for any device backend here (its arrays are ``ArrayBase`` arrays,
like a third party's); the conformance kit checks the same rules on every backend.
"""

from __future__ import annotations

import numpy as np
import pytest

import arraycore
from arraycore.errors import BackendMismatchError

pytestmark = pytest.mark.usefixtures("clean_env")


def _is_tiny(x: object, device: str = "tiny0") -> bool:
    return type(x).__name__ == "TinyArray" and getattr(x, "device", None) == device


# -- the active backend decides where new arrays live ---------------------------------------------
def test_asarray_of_host_data_inside_use_lands_on_the_active_backend() -> None:
    host = np.arange(6, dtype=np.float32).reshape(2, 3)
    with arraycore.use("tiny") as xp:
        for made in (arraycore.asarray(host), arraycore.from_numpy(host)):
            assert _is_tiny(made), type(made)
            assert made.dtype == np.float32
            np.testing.assert_array_equal(xp.to_numpy(made), host)
        assert _is_tiny(arraycore.from_dlpack(host))
        scalar = arraycore.asarray(np.float32(2.5))  # a NumPy scalar is host data too
        assert _is_tiny(scalar) and scalar.shape == () and scalar.dtype == np.float32
        assert arraycore.asarray(2.0).dtype == np.float64 and _is_tiny(arraycore.asarray(2.0))
        assert arraycore.asarray([1, 2]).dtype == np.int64
        assert arraycore.asarray(host, dtype=np.int16).dtype == np.int16
    with arraycore.use("tiny", device="tiny1"):
        assert _is_tiny(arraycore.asarray(np.ones(2, np.float32)), "tiny1")
    assert isinstance(arraycore.asarray(host), np.ndarray)  # outside: NumPy, the default


def test_asarray_follows_the_environment_too(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("ARRAYCORE_BACKEND", "tiny")
    assert _is_tiny(arraycore.asarray(np.ones(3)))


def test_asarray_never_moves_a_device_array() -> None:
    on1 = arraycore.namespace("tiny", device="tiny1").ones(2)
    with arraycore.use("tiny", device="tiny0"):
        assert arraycore.asarray(on1) is on1
    with arraycore.use("numpy"):
        assert arraycore.asarray(on1) is on1
        with pytest.raises(BackendMismatchError, match="from_dlpack"):
            arraycore.namespace().asarray(on1)


def test_only_creation_follows_the_active_backend() -> None:
    """Other calls still run where their arrays are; namespace_of and NumPy scalars unchanged."""
    host = np.ones(3)
    total = arraycore.namespace("numpy").sum(host)  # a NumPy scalar
    with arraycore.use("tiny"):
        assert isinstance(arraycore.add(host, 1.0), np.ndarray)
        assert isinstance(arraycore.zeros_like(host), np.ndarray)
        assert arraycore.namespace_of(host).name == "numpy"
        assert arraycore.namespace_of(total).name == "numpy"
        assert arraycore.namespace_of(1.0).name == "tiny"
        assert float(arraycore.exp(total)) == pytest.approx(np.exp(3.0))
        assert _is_tiny(arraycore.zeros(2))


# -- mixing is an error that names the op, the backends and the explicit call --------------------
def test_numpy_operands_of_device_arrays_are_refused_with_the_explicit_call() -> None:
    tiny = arraycore.namespace("tiny")
    x = tiny.ones(3)
    host = np.ones(3)
    for mix in (lambda: host + x, lambda: x + host, lambda: host * x, lambda: host < x):
        with pytest.raises(BackendMismatchError) as info:
            mix()
        message = str(info.value)
        assert "numpy.ndarray in host memory" in message and "backend 'tiny'" in message
        assert "xp.asarray(a)" in message and "to_numpy(x)" in message
    with pytest.raises(BackendMismatchError, match=r"^add: arrays of two backends.*to_numpy"):
        arraycore.add(x, host)
    with pytest.raises(TypeError, match=r"__array_ufunc__=None"):
        np.add(host, x)


def test_numpy_refuses_to_convert_device_arrays() -> None:
    x = arraycore.namespace("tiny").ones((2, 2))
    with pytest.raises(TypeError, match=r"implicit conversion.*backend 'tiny'.*to_numpy\(x\)"):
        np.asarray(x)
    with pytest.raises(TypeError, match=r"numpy\.concatenate: .*backend 'tiny'.*to_numpy\(x\)"):
        np.concatenate([x, x])
    with pytest.raises(TypeError, match=r"numpy\.sum: "):
        np.sum(x)


def test_reference_nn_kernels_refuse_host_arrays() -> None:
    """The nn kernels arraycore derives name the nn op, not the primitive that met the array."""
    tiny = arraycore.namespace("tiny")
    x, w = np.ones((1, 1, 4, 4), np.float32), np.ones((2, 1, 3, 3), np.float32)
    with pytest.raises(BackendMismatchError, match=r"^nn\.conv2d: .*backend 'tiny'.*asarray"):
        tiny.nn.conv2d(x, w)
    with pytest.raises(BackendMismatchError, match=r"^nn\.conv2d: got a numpy"):
        tiny.nn.conv2d(tiny.asarray(x), w)  # a weight left on the host
    with pytest.raises(BackendMismatchError, match=r"^nn\.softmax_cross_entropy: got a numpy"):
        tiny.nn.softmax_cross_entropy(tiny.ones((2, 3)), np.zeros(2, np.int64))
    with pytest.raises(BackendMismatchError, match=r"^nn\.one_hot: got a numpy"):
        tiny.nn.one_hot(np.zeros(2, np.int64), 3)
    other = arraycore.namespace("tiny", device="tiny1")
    with pytest.raises(BackendMismatchError, match=r"nn\.batch_norm: array on device 'tiny1'"):
        tiny.nn.batch_norm(tiny.ones((2, 3)), other.ones(3), tiny.zeros(3))


# -- DLPack and other libraries' arrays --------------------------------------------------------------
def test_dlpack_of_device_arrays_gives_host_copies_only() -> None:
    tiny = arraycore.namespace("tiny")
    x = tiny.asarray(np.arange(6, dtype=np.int16).reshape(2, 3))
    assert x.__dlpack_device__() == (12, 0)  # kDLExtDev, the backend's first device
    assert arraycore.namespace("tiny", device=1).ones(1).__dlpack_device__() == (12, 1)
    host = np.from_dlpack(x, device="cpu", copy=True)
    np.testing.assert_array_equal(host, np.arange(6, dtype=np.int16).reshape(2, 3))
    host[0, 0] = 7
    assert int(tiny.to_numpy(x)[0, 0]) == 0
    with pytest.raises(BufferError, match=r"device='cpu', copy=True"):
        np.from_dlpack(x)
    with pytest.raises(BufferError, match="copy=False"):
        np.from_dlpack(x, device="cpu", copy=False)
    assert tiny.from_dlpack(x) is x  # its own array
    copied = tiny.from_dlpack(x, copy=True)
    assert copied is not x
    np.testing.assert_array_equal(tiny.to_numpy(copied), tiny.to_numpy(x))
    moved = arraycore.namespace("tiny", device="tiny1").from_dlpack(x)  # explicit: a copy
    assert _is_tiny(moved, "tiny1")
    np.testing.assert_array_equal(tiny.to_numpy(x), moved.__array_namespace__().to_numpy(moved))


def test_asarray_and_from_dlpack_of_torch_tensors_keep_their_dtype() -> None:
    torch = pytest.importorskip("torch", reason="PyTorch is not installed (pip install torch)")
    dtypes = {
        torch.float32: np.float32,
        torch.float16: np.float16,
        torch.float64: np.float64,
        torch.int32: np.int32,
        torch.int8: np.int8,
        torch.uint8: np.uint8,
        torch.bool: np.bool_,
    }
    for name in ("numpy", "tiny"):
        xp = arraycore.namespace(name)
        for tdtype, want in dtypes.items():
            tensor = torch.arange(6).reshape(2, 3).to(tdtype)
            for made in (xp.asarray(tensor), xp.from_dlpack(tensor)):
                assert made.dtype == np.dtype(want), (name, tdtype, made.dtype)
                np.testing.assert_array_equal(
                    arraycore.to_numpy(made), tensor.numpy(), err_msg=f"{name} {tdtype}"
                )
    with arraycore.use("tiny"):
        made = arraycore.asarray(torch.ones(2, dtype=torch.float32))
        assert _is_tiny(made) and made.dtype == np.float32
    with pytest.raises(TypeError, match="has no float64"):
        arraycore.namespace("tiny", device="tiny1").asarray(torch.ones(2, dtype=torch.float64))
