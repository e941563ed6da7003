"""Conformance of the border between host (NumPy) and device arrays: they never mix silently.

- NumPy's operators and ufuncs given host and device arrays together refuse them
  (``__array_ufunc__ = None`` on :class:`arraycore.ArrayBase` arrays; CuPy's arrays refuse host
  operands themselves), NumPy's functions given a device array refuse it or defer to the
  backend (``__array_ufunc__``, ``__array_function__``), and implicit
  conversion (``numpy.asarray(x)``) is a ``TypeError`` that names the explicit call
  (``to_numpy``, or the array library's own, like CuPy's ``.get()``). Backends whose arrays are
  NumPy arrays (the NumPy backend) skip these: their arrays are host arrays.
- DLPack: ``__dlpack_device__``, ``from_dlpack`` of the backend's own arrays, and a host export
  for ``numpy.from_dlpack(x, device="cpu", copy=True)`` (or a clear ``BufferError``).
- New arrays live on the active backend: inside ``with arraycore.use(backend)``,
  ``arraycore.asarray`` of a NumPy array (or scalar) makes an array of that backend.
- Host data in non-native byte order comes in as native, with the right values.
"""

from __future__ import annotations

import re
import warnings
from typing import Any

import numpy as np
import pytest

import arraycore
from arraycore.errors import BackendMismatchError
from arraycore.testing import assert_close, to_host
from arraycore.testing import strategies as acst

EXPLICIT = re.compile(r"to_numpy|\.get\(\)")


def _device_array(xp: Any) -> tuple[Any, np.ndarray]:
    host = np.arange(6, dtype=np.float32).reshape(2, 3)
    x = xp.asarray(host)
    if isinstance(x, np.ndarray | np.generic):
        pytest.skip(f"backend {xp.name!r} hands out NumPy arrays: they are host arrays")
    return x, host


def test_numpy_operators_and_ufuncs_refuse_device_arrays(xp: Any) -> None:
    x, host = _device_array(xp)
    mixes = {
        "host + x": lambda: host + x,
        "host * x": lambda: host * x,
        "host < x": lambda: host < x,
        "x - host": lambda: x - host,
        "numpy.add(host, x)": lambda: np.add(host, x),
    }
    for label, mix in mixes.items():
        with pytest.raises((TypeError, BackendMismatchError)):
            result = mix()
            pytest.fail(f"{label} gave a {type(result).__name__} instead of an error")


def test_implicit_conversion_to_numpy_is_refused(xp: Any) -> None:
    x, _ = _device_array(xp)
    for convert in (np.asarray, np.array, lambda a: np.asarray([a, a])):
        with pytest.raises(TypeError) as info, warnings.catch_warnings():
            # NumPy 2 warns first where a foreign class's __array__ has no copy keyword
            # (CuPy 14's ndarray); what counts is that the conversion is refused
            warnings.filterwarnings("ignore", "__array__ implementation", DeprecationWarning)
            convert(x)
        assert EXPLICIT.search(str(info.value)), f"the error names no explicit call: {info.value}"


def test_numpy_functions_refuse_or_defer(xp: Any) -> None:
    """Never a NumPy result computed from device data: a TypeError, or the backend's array."""
    x, _ = _device_array(xp)
    calls = {
        "numpy.concatenate": lambda: np.concatenate([x, x]),
        "numpy.reshape": lambda: np.reshape(x, (3, 2)),
        "numpy.sum": lambda: np.sum(x),
        "numpy.mean": lambda: np.mean(x, axis=0),
        "numpy.exp": lambda: np.exp(x),
    }
    for label, call in calls.items():
        try:
            result = call()
        except TypeError:
            continue
        assert not isinstance(result, np.ndarray | np.generic), f"{label} computed on the host"
        assert arraycore.namespace_of(result) is xp, f"{label} left the backend"


def test_dlpack_device_and_own_arrays(xp: Any) -> None:
    host = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = xp.asarray(host)
    device = x.__dlpack_device__()
    assert isinstance(device, tuple) and len(device) == 2, device
    assert all(isinstance(int(v), int) for v in device)
    assert_close(xp.from_dlpack(x), host)
    assert_close(xp.from_dlpack(x[1:, ::2]), host[1:, ::2])


def test_dlpack_export_to_the_host(xp: Any) -> None:
    """``numpy.from_dlpack(x, device="cpu", copy=True)`` gives a host copy, or a BufferError."""
    for dtype in acst.supported_dtypes(xp):
        host = np.arange(12).reshape(3, 4).astype(dtype)
        for x, want in ((xp.asarray(host), host), (xp.asarray(host)[::2, 1:], host[::2, 1:])):
            try:
                got = np.from_dlpack(x, device="cpu", copy=True)
            except BufferError as exc:
                assert str(exc), "a BufferError without a message"
                return
            assert isinstance(got, np.ndarray)
            assert_close(got, want, err_msg=f"{dtype}")
            if got.size and got.flags.writeable:
                got[...] = 0
                assert_close(x, want, err_msg="the host copy shares memory with the array")
    zero_d = xp.asarray(np.array(2.5, dtype=np.float32))
    assert_close(np.from_dlpack(zero_d, device="cpu", copy=True), np.array(2.5, np.float32))


def test_new_arrays_live_on_the_active_backend(xp: Any) -> None:
    """The kit runs inside ``with arraycore.use(backend)``: host data comes to this backend."""
    assert arraycore.namespace() is xp, "the kit's xp fixture is not the active namespace"
    host = np.arange(6, dtype=np.int32).reshape(2, 3)
    for made in (arraycore.asarray(host), arraycore.from_numpy(host), arraycore.from_dlpack(host)):
        assert arraycore.namespace_of(made) is xp, type(made)
        assert_close(made, host)
    scalar = arraycore.asarray(np.float32(1.5))
    assert arraycore.namespace_of(scalar) is xp
    assert tuple(scalar.shape) == () and scalar.dtype == np.float32
    assert arraycore.namespace_of(arraycore.asarray([1.0, 2.0])) is xp


def test_non_native_byte_order_is_normalised(xp: Any) -> None:
    for dtype in acst.supported_dtypes(xp):
        native = np.arange(6).reshape(2, 3).astype(dtype)
        swapped = native.astype(native.dtype.newbyteorder("S"))
        made = [xp.asarray(swapped), xp.from_numpy(swapped), xp.asarray(swapped, dtype=dtype)]
        made.append(xp.asarray(native, dtype=native.dtype.newbyteorder("S")))
        for x in made:
            assert x.dtype == np.dtype(dtype) and x.dtype.isnative, (dtype, x.dtype)
            assert_close(x, native)
            assert_close(xp.add(x, x), native + native, err_msg=f"{dtype}: wrong values")
        assert to_host(xp.asarray(swapped)).dtype.isnative
