"""Conformance of the inspection utilities, ``xp.__array_namespace_info__()``: capabilities,
default_device, default_dtypes, dtypes (with ``kind=`` filters) and devices, and their agreement
with the arrays the namespace creates.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from arraycore.testing import assert_close
from arraycore.testing import strategies as acst

KINDS: list[Any] = [
    "bool",
    "signed integer",
    "unsigned integer",
    "integral",
    "real floating",
    "complex floating",
    "numeric",
    ("bool", "integral"),
    ("real floating", "unsigned integer"),
]
#: Every device has the kit's dtypes but float64.
ALWAYS = tuple(name for name in acst.KIT_DTYPES if name != "float64")


def test_capabilities(xp: Any) -> None:
    caps = xp.__array_namespace_info__().capabilities()
    assert isinstance(caps, dict)
    assert isinstance(caps["boolean indexing"], bool)
    assert isinstance(caps["data-dependent shapes"], bool)
    max_dims = caps["max dimensions"]
    assert max_dims is None or (isinstance(max_dims, int) and max_dims >= 4), max_dims


def test_devices_and_default_device(xp: Any) -> None:
    info = xp.__array_namespace_info__()
    devices = info.devices()
    assert isinstance(devices, list) and devices
    default = info.default_device()
    assert default in devices
    for x in (xp.asarray([1.0]), xp.zeros(3), xp.arange(4), xp.random.default_rng(0).uniform()):
        assert x.device == default
    real = info.default_dtypes(device=default)["real floating"]
    assert_close(xp.zeros(2, device=default), np.zeros(2, real))
    assert_close(xp.asarray([1, 2], device=default), np.array([1, 2]))


def test_other_devices_are_refused(xp: Any) -> None:
    with pytest.raises(ValueError):
        xp.zeros(2, device="no-such-device")
    with pytest.raises(ValueError):
        xp.asarray([1.0], device="no-such-device")


def test_default_dtypes(xp: Any) -> None:
    info = xp.__array_namespace_info__()
    defaults = info.default_dtypes()
    assert set(defaults) >= {"real floating", "complex floating", "integral", "indexing"}
    expected_float = "float64" if "float64" in info.dtypes() else "float32"
    assert defaults["real floating"] == np.dtype(expected_float)
    assert defaults["integral"] == np.dtype("int64")
    assert defaults["indexing"] == np.dtype("int64")
    assert info.default_dtypes(device=info.default_device()) == defaults
    # The defaults are what the namespace actually uses.
    assert xp.asarray(1.0).dtype == defaults["real floating"]
    assert xp.zeros(1).dtype == defaults["real floating"]
    assert xp.asarray(1).dtype == defaults["integral"]
    assert xp.argmax(xp.asarray([1.0, 2.0])).dtype == defaults["indexing"]


def test_dtypes(xp: Any) -> None:
    info = xp.__array_namespace_info__()
    found = info.dtypes()
    assert isinstance(found, dict)
    for name, dtype in found.items():
        assert np.dtype(dtype).name == name
        assert getattr(xp, name) == dtype
    for name in ALWAYS:
        assert name in found, f"every device has {name}"
    assert info.dtypes(device=info.default_device()) == found
    for kind in KINDS:
        subset = info.dtypes(kind=kind)
        expected = {n: d for n, d in found.items() if np.isdtype(np.dtype(d), kind)}
        assert subset == expected, kind


def test_float16_is_listed_only_when_asked_for(xp: Any) -> None:
    """The standard has no float16: ``dtypes()`` leaves it out; ``dtypes(kind="float16")`` (or
    the dtype) says whether the device has it."""
    info = xp.__array_namespace_info__()
    assert "float16" not in info.dtypes()
    assert "float16" not in info.dtypes(kind="real floating")
    half = info.dtypes(kind="float16")
    assert half == info.dtypes(kind=np.dtype("float16"))
    assert half in ({}, {"float16": np.dtype("float16")})
    if half:
        assert xp.ones(2, dtype=xp.float16).dtype == np.float16
    else:
        with pytest.raises(TypeError, match="float16"):
            xp.ones(2, dtype=xp.float16)


def test_declared_dtypes_work(xp: Any) -> None:
    """Every dtype the device declares can be created, computed with and copied back."""
    for name, dtype in xp.__array_namespace_info__().dtypes().items():
        x = xp.ones((2, 2), dtype=dtype)
        assert x.dtype == dtype, name
        assert_close(xp.to_numpy(xp.add(x, x)), np.ones((2, 2), dtype) + np.ones((2, 2), dtype))


def test_memory_stats(xp: Any) -> None:
    """``memory_stats()`` is None (not tracked) or byte counts: ``used_bytes`` grows while an
    array is alive, ``peak_bytes`` never falls below it."""
    info = xp.__array_namespace_info__()
    before = info.memory_stats()
    if before is None:
        info.reset_memory_stats()  # a no-op that must not fail
        pytest.skip(f"backend {getattr(xp, 'name', xp)!r} does not track device memory")
    assert all(isinstance(v, int) and v >= 0 for v in before.values()), before
    size = 8 << 20
    big = xp.ones((size // 4,), dtype=xp.float32)
    during = info.memory_stats()
    assert during is not None
    assert during["used_bytes"] >= before["used_bytes"] + size // 2, (before, during)
    assert during["peak_bytes"] >= during["used_bytes"]
    del big
    info.reset_memory_stats()
    after = info.memory_stats()
    assert after is not None and after["peak_bytes"] >= after["used_bytes"]


def test_memory_stats_count_uploaded_arrays(xp: Any) -> None:
    """Arrays copied from the host (``asarray``, ``from_numpy``) count like the ones the device
    makes: ``used_bytes`` holds them while they live, and ``peak_bytes`` saw them."""
    info = xp.__array_namespace_info__()
    if info.memory_stats() is None:
        pytest.skip(f"backend {getattr(xp, 'name', xp)!r} does not track device memory")
    size = 8 << 20
    host = np.ones(size // 4, dtype=np.float32)
    for upload in (xp.asarray, xp.from_numpy):
        info.reset_memory_stats()
        before = info.memory_stats()
        assert before is not None
        x = upload(host)
        during = info.memory_stats()
        assert during is not None
        assert during["used_bytes"] >= before["used_bytes"] + size // 2, (upload, before, during)
        assert during["peak_bytes"] >= during["used_bytes"]
        del x
        after = info.memory_stats()
        assert after is not None
        assert after["used_bytes"] <= during["used_bytes"] - size // 2, (upload, during, after)
        assert after["peak_bytes"] >= before["used_bytes"] + size // 2


def test_synchronize_waits_for_queued_work(xp: Any) -> None:
    """``synchronize()`` returns None once the work queued before it is done, with nothing
    queued too, and leaves every result as it was."""
    info = xp.__array_namespace_info__()
    assert info.synchronize() is None  # nothing queued
    host = np.arange(4096, dtype=np.float32).reshape(64, 64) / 4096
    x = xp.asarray(host)
    y = x
    for _ in range(8):
        y = xp.add(xp.matmul(y, x), 1.0)
    assert info.synchronize() is None
    want = host
    for _ in range(8):
        want = want @ host + np.float32(1.0)
    assert_close(y, want, scale=64)
