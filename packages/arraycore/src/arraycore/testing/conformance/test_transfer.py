"""Conformance of host transfer: ``to_numpy``, ``from_numpy`` and ``from_dlpack`` of NumPy arrays.

Every dtype, shape and layout (views made on the device included) round-trips exactly.
``from_numpy`` always copies; ``to_numpy`` gives a host array that does not share memory with
the device array, except on the NumPy backend, where the array already is on the host and
``to_numpy`` and ``from_dlpack`` are zero-copy.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arraycore.testing import assert_close, to_host
from arraycore.testing import strategies as acst

SETTINGS = settings(max_examples=20, deadline=None)


@SETTINGS
@given(data=st.data())
def test_round_trip(xp: Any, data: st.DataObject) -> None:
    dtype = data.draw(acst.dtypes(xp), label="dtype")
    host = data.draw(acst.arrays(dtype, acst.shapes()), label="x")
    x = acst.on_device(xp, host, data.draw(acst.layouts(), label="layout"))
    back = xp.to_numpy(x)
    assert isinstance(back, np.ndarray), type(back)
    assert_close(back, host)
    assert_close(xp.to_numpy(xp.from_numpy(host)), host)


@SETTINGS
@given(data=st.data())
def test_from_numpy_of_host_views(xp: Any, data: st.DataObject) -> None:
    """Non-contiguous host input (negative strides, transposes, broadcast views) is copied right."""
    dtype = data.draw(acst.dtypes(xp), label="dtype")
    host = data.draw(acst.arrays(dtype, acst.shapes(min_dims=1)), label="x")
    views = [
        host[::-1],
        host.T,
        host[..., ::2],
        np.broadcast_to(host, (2, *host.shape)),
        np.asfortranarray(host),
    ]
    for view in views:
        assert_close(xp.from_numpy(view), view)
        assert_close(xp.asarray(view), view)


def test_from_numpy_copies(xp: Any) -> None:
    host = np.arange(6, dtype=np.float32)
    x = xp.from_numpy(host)
    host[0] = 100.0
    assert_close(x, np.arange(6, dtype=np.float32), err_msg="from_numpy shares the source")


def test_to_numpy_zero_copy_on_numpy_only(xp: Any) -> None:
    x = xp.asarray(np.arange(6, dtype=np.float32).reshape(2, 3))
    host = xp.to_numpy(x)
    if xp.name == "numpy":
        assert np.shares_memory(host, x), "to_numpy copied on the NumPy backend"
    else:
        host[0, 0] = -1.0
        assert float(xp.to_numpy(x)[0, 0]) == 0.0, "to_numpy shares memory with the device array"


def test_to_numpy_of_scalars_and_empty(xp: Any) -> None:
    for host in (np.float32(2.5), np.array(True), np.zeros((0, 3), np.int16), np.int8(-4)):
        back = xp.to_numpy(xp.asarray(host))
        assert isinstance(back, np.ndarray)
        assert_close(back, np.asarray(host))
    reduced = xp.sum(xp.asarray(np.ones(3, dtype=np.float32)))  # a 0-d result
    assert isinstance(xp.to_numpy(reduced), np.ndarray)
    assert_close(xp.to_numpy(reduced), np.float32(3.0))


def test_from_dlpack_of_numpy_arrays(xp: Any) -> None:
    for dtype in acst.supported_dtypes(xp):
        host = np.arange(12).reshape(3, 4).astype(dtype)
        x = xp.from_dlpack(host)
        assert_close(x, host)
        if xp.name == "numpy":
            assert np.shares_memory(to_host(x), host), "from_dlpack copied on the NumPy backend"
    strided = np.arange(20, dtype=np.float32).reshape(4, 5)[::2, 1:]
    assert_close(xp.from_dlpack(strided), strided)
    assert_close(xp.from_dlpack(np.array(1.5, np.float32)), np.float32(1.5))  # 0-d
    if "float64" in xp.__array_namespace_info__().dtypes():
        assert_close(xp.from_dlpack(np.array(1.5)), np.float64(1.5))
    else:  # a dtype the device lacks is an error, as with asarray
        with pytest.raises(TypeError, match="float64"):
            xp.from_dlpack(np.array(1.5))
