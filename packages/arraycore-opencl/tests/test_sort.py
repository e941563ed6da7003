"""The device sort (``arraycore_opencl._sort``): lanes longer than the conformance kit's (so that
the global stages, the local-memory stages and their hand-over all run), every dtype, both
directions, and arrays of another backend refused before any launch."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import arraycore
from arraycore.backend import BackendUnavailable
from arraycore.errors import BackendMismatchError
from arraycore_opencl import OpenCLBackend
from arraycore_opencl._sort import local_chunk

try:
    OpenCLBackend.probe()
except BackendUnavailable as exc:  # pragma: no cover - only where OpenCL is absent
    pytest.skip(f"no usable OpenCL device here: {exc}", allow_module_level=True)


@pytest.fixture(scope="module")
def xp() -> Any:
    return arraycore.namespace("opencl", device=0)


def _stable_order(host: np.ndarray, axis: int, descending: bool) -> np.ndarray:
    """NumPy's stable argsort; descending keeps equal elements in order (NaNs first)."""
    if not descending:
        return np.argsort(host, axis=axis, kind="stable")
    n = host.shape[axis]
    flipped = np.argsort(np.flip(host, axis=axis), axis=axis, kind="stable")
    return n - 1 - np.flip(flipped, axis=axis)


def test_the_namespace_sorts_on_the_device(xp: Any) -> None:
    assert not {"sort", "argsort"} & set(xp.__array_namespace_info__().host_functions())
    assert xp.sort.__module__ == "arraycore_opencl._sort"


@pytest.mark.parametrize("shape", [(3, 4097), (9000,), (2, 3, 300)])
def test_long_lanes_every_dtype(xp: Any, shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(len(shape))
    for name in xp.__array_namespace_info__().dtypes():
        dtype = np.dtype(name)
        host = rng.integers(0, 40, shape).astype(dtype)  # many ties
        if dtype.kind == "f":
            host.flat[::97] = np.nan
            host.flat[::89] = -0.0
        x = xp.asarray(host)
        for axis in range(-len(shape), len(shape)):
            for descending in (False, True):
                order = _stable_order(host, axis, descending)
                got = xp.to_numpy(xp.argsort(x, axis=axis, descending=descending))
                np.testing.assert_array_equal(got, order, err_msg=f"{name} {axis} {descending}")
                values = xp.to_numpy(xp.sort(x, axis=axis, descending=descending))
                want = np.take_along_axis(host, order, axis=axis)
                np.testing.assert_array_equal(values, want)
                if dtype.kind == "f":
                    np.testing.assert_array_equal(np.signbit(values), np.signbit(want))


def test_the_local_chunk_fits_the_device(xp: Any) -> None:
    rt = xp._backend.rt
    for dtype in (np.dtype("uint8"), np.dtype("int64")):
        assert local_chunk(rt, dtype, 2) == 0  # shorter than two elements per work-item
        chunk = local_chunk(rt, dtype, 1 << 20)
        assert chunk >= 2 * rt.local_size and chunk & (chunk - 1) == 0
        assert chunk * (dtype.itemsize + 8) <= rt.cl_device.local_mem_size


def test_arrays_of_another_backend_are_refused(xp: Any) -> None:
    for name in ("sort", "argsort"):
        with pytest.raises(BackendMismatchError, match=f"^{name}: got a numpy.ndarray"):
            getattr(xp, name)(np.arange(3))
        other = arraycore.namespace("numpy").asarray(np.arange(3))
        with pytest.raises(BackendMismatchError, match=f"^{name}: "):
            getattr(xp, name)(other)
