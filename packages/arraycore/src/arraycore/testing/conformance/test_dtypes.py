"""Conformance of the data-type functions and constants: result_type, can_cast, finfo, iinfo,
isdtype, astype (values and copy semantics), the dtype objects and constants, and the error for
a dtype the device lacks.

Promotion is NumPy 2's (NEP 50), which agrees with the standard wherever the standard defines a
result and extends it to mixed kinds (``int8`` with ``float32`` gives ``float32``). Casts are
compared on values the target dtype holds: integer overflow and out-of-range float-to-integer
casts are unspecified by the standard.

Dtypes outside arraycore's set (complex, ``uint16``, ...) are outside the kit: the NumPy backend
binds most functions straight to NumPy's, which accept them, while the generic path raises
``TypeError``. A dtype that arraycore knows but the device lacks (``float64`` on many GPUs) must
raise ``TypeError`` naming the dtype and the backend or device.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arraycore.testing import assert_close, to_host
from arraycore.testing import strategies as acst

SETTINGS = settings(max_examples=20, deadline=None)

ALL_NAMES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
             "float16", "float32", "float64")  # fmt: skip
KINDS = (
    "bool",
    "signed integer",
    "unsigned integer",
    "integral",
    "real floating",
    "complex floating",
    "numeric",
)


def test_dtype_objects_and_constants(xp: Any) -> None:
    for name in ALL_NAMES:
        assert getattr(xp, name) == np.dtype(name), name
    assert xp.e == math.e and xp.pi == math.pi
    assert xp.inf == math.inf and math.isnan(xp.nan)
    assert xp.newaxis is None
    assert xp.__array_api_version__ == "2024.12"


def test_result_type(xp: Any) -> None:
    names = [d.name for d in acst.supported_dtypes(xp, names=ALL_NAMES)]
    for a in names:
        for b in names:
            assert xp.result_type(a, b) == np.result_type(a, b), (a, b)
            assert xp.result_type(getattr(xp, a), getattr(xp, b)) == np.result_type(a, b)
        # Python scalars are weak: they take the array's dtype where the kinds allow it.
        for scalar in (True, 1, 1.5):
            allowed = (
                isinstance(scalar, bool)
                or (isinstance(scalar, int) and a != "bool")
                or a.startswith("float")
            )
            if allowed:
                assert xp.result_type(a, scalar) == np.result_type(a, scalar), (a, scalar)
    x = xp.asarray(np.zeros(2, np.int8))
    y = xp.asarray(np.zeros(2, np.float32))
    assert xp.result_type(x, y) == np.float32
    assert xp.result_type(x, np.int16, np.uint8) == np.int16


def test_can_cast(xp: Any) -> None:
    names = [d.name for d in acst.supported_dtypes(xp, names=ALL_NAMES)]
    for a in names:
        for b in names:
            assert xp.can_cast(a, b) == np.can_cast(a, b), (a, b)
    x = xp.asarray(np.zeros(2, np.int16))
    assert xp.can_cast(x, xp.int32) and not xp.can_cast(x, xp.int8)


@pytest.mark.parametrize("name", ["float16", "float32", "float64"])
def test_finfo(xp: Any, name: str) -> None:
    if name not in acst.device_dtypes(xp):
        pytest.skip(f"the device of backend {xp.name!r} has no {name}")
    got, want = xp.finfo(name), np.finfo(name)
    for attr in ("bits", "eps", "max", "min", "smallest_normal", "dtype"):
        assert getattr(got, attr) == getattr(want, attr), attr
    for attr in ("eps", "max", "min", "smallest_normal"):  # Python floats, not NumPy scalars
        assert type(getattr(got, attr)) is float, attr
    assert type(got.bits) is int
    assert xp.finfo(xp.asarray(np.zeros(1, name))).bits == want.bits
    x = xp.ones(2, dtype=name)  # the fields mix with arrays as any Python float does
    assert (x + got.eps).dtype == x.dtype
    with pytest.raises(TypeError, match="finfo"):
        xp.finfo(xp.int32)


@pytest.mark.parametrize(
    "name", ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
)
def test_iinfo(xp: Any, name: str) -> None:
    got, want = xp.iinfo(name), np.iinfo(name)
    for attr in ("bits", "max", "min", "dtype"):
        assert getattr(got, attr) == getattr(want, attr), attr
    assert all(type(getattr(got, attr)) is int for attr in ("bits", "max", "min"))
    with pytest.raises(TypeError, match="iinfo"):
        xp.iinfo(xp.float32)
    assert xp.iinfo(xp.asarray(np.zeros(1, name))).max == want.max


def test_isdtype(xp: Any) -> None:
    for name in ALL_NAMES:
        dtype = getattr(xp, name)
        for kind in KINDS:
            assert xp.isdtype(dtype, kind) == np.isdtype(np.dtype(name), kind), (name, kind)
        assert xp.isdtype(dtype, ("bool", "real floating")) == np.isdtype(
            np.dtype(name), ("bool", "real floating")
        )
        assert xp.isdtype(dtype, dtype)
    assert not xp.isdtype(xp.int8, xp.int16)


# -- astype ----------------------------------------------------------------------------------------
def _representable(host: np.ndarray, target: np.dtype) -> np.ndarray:
    """``host`` limited to values ``target`` holds (casts out of range are unspecified)."""
    if target.kind in "iu" and host.dtype.kind in "iuf":
        info = np.iinfo(target)
        clipped: np.ndarray = np.clip(host, max(info.min, -1000), min(info.max, 1000))
        return clipped.astype(host.dtype)
    return host


@SETTINGS
@given(data=st.data())
def test_astype_values(xp: Any, data: st.DataObject) -> None:
    src = data.draw(acst.dtypes(xp), label="from")
    dst = data.draw(acst.dtypes(xp), label="to")
    host = data.draw(acst.arrays(src, acst.shapes()), label="x")
    host = _representable(host, dst)
    x = acst.on_device(xp, host, data.draw(acst.layouts(), label="layout"))
    result = xp.astype(x, dst)
    assert_close(result, host.astype(dst), err_msg=f"{src} -> {dst}")
    assert_close(x, host, err_msg="astype changed its input")


def test_astype_rounding_rules(xp: Any) -> None:
    """Float to int truncates towards zero; anything to bool is ``!= 0``; bool to numbers 0/1."""
    for src in acst.supported_dtypes(xp, "real floating"):
        host = np.array([2.7, -2.7, 0.5, -0.5, 0.0, 100.9], dtype=src)
        for dst in acst.supported_dtypes(xp, ("signed integer", "bool")):
            assert_close(xp.astype(xp.asarray(host), dst), host.astype(dst))
    flags = np.array([True, False, True])
    for dst in acst.supported_dtypes(xp, "numeric"):
        assert_close(xp.astype(xp.asarray(flags), dst), flags.astype(dst))


def test_astype_copy_semantics(xp: Any) -> None:
    host = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    x = xp.asarray(host)
    assert xp.astype(x, xp.float32, copy=False) is x, "copy=False with the same dtype copied"
    copied = xp.astype(x, xp.float32)
    assert copied is not x
    copied[0] = 10.0
    assert_close(x, host, err_msg="astype(copy=True) shares memory with its input")
    converted = xp.astype(x, xp.int32, copy=False)  # a conversion copies whatever copy says
    assert_close(converted, host.astype(np.int32))
    assert float(to_host(x)[0]) == 1.0


# -- dtypes a device lacks -------------------------------------------------------------------------
def test_a_dtype_the_device_lacks_is_a_type_error_naming_the_device(xp: Any) -> None:
    available = acst.device_dtypes(xp)
    missing = [name for name in ALL_NAMES if name not in available]
    if not missing:
        pytest.skip(f"the device of backend {xp.name!r} has every arraycore dtype")
    x = xp.zeros(3, dtype=xp.float32)
    calls = {
        "zeros": lambda dt: xp.zeros(2, dtype=dt),
        "full": lambda dt: xp.full(2, 1, dtype=dt),
        "asarray": lambda dt: xp.asarray([1, 2], dtype=dt),
        "astype": lambda dt: xp.astype(x, dt),
        "arange": lambda dt: xp.arange(3, dtype=dt),
    }
    for name in missing:
        for op, call in calls.items():
            with pytest.raises(TypeError) as info:
                call(getattr(xp, name))
            message = str(info.value)
            assert name in message, f"{op}: {message!r} does not name the dtype {name}"
            assert xp.name in message or str(xp.device) in message, (
                f"{op}: {message!r} does not name the backend or device"
            )
