"""Conformance of unique_all, unique_counts, unique_inverse and unique_values: the standard's
namedtuples and int64 indices, sorted values, every NaN distinct, 0-d and empty inputs, every
dtype (float16 included where the device has it), checked against NumPy and the standard's
invariants (``values[inverse_indices] == x``, ``x.flat[indices] == values``)."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from arraycore.testing import assert_close, to_host
from arraycore.testing import strategies as acst

from .test_sorting import ALL_DTYPES, tied_arrays

SETTINGS = settings(max_examples=40, deadline=None)
FIELDS = {
    "unique_all": ("values", "indices", "inverse_indices", "counts"),
    "unique_counts": ("values", "counts"),
    "unique_inverse": ("values", "inverse_indices"),
}


def _reference(host: np.ndarray) -> dict[str, np.ndarray]:
    values, indices, inverse, counts = np.unique(
        host.reshape(-1), return_index=True, return_inverse=True, return_counts=True,
        equal_nan=False,
    )  # fmt: skip
    return {
        "values": values,
        "indices": indices.astype(np.int64),
        "inverse_indices": inverse.reshape(host.shape).astype(np.int64),
        "counts": counts.astype(np.int64),
    }


def _check(xp: Any, x: Any, host: np.ndarray) -> None:
    want = _reference(host)
    for name, fields in FIELDS.items():
        got = getattr(xp, name)(x)
        assert tuple(got._fields) == fields, name
        for field in fields:
            assert_close(getattr(got, field), want[field], err_msg=f"{name}.{field} {host.dtype}")
    assert_close(xp.unique_values(x), want["values"], err_msg=f"unique_values {host.dtype}")
    values, indices, inverse, counts = (to_host(a) for a in xp.unique_all(x))
    same = (values[inverse] == host) | (np.isnan(host) if host.dtype.kind == "f" else False)
    assert same.all(), "values[inverse_indices] != x"
    first = host.reshape(-1)[indices]
    assert ((first == values) | (first != first)).all(), "x.flat[indices] != values"
    assert counts.sum() == host.size and (counts > 0).all()


@SETTINGS
@given(data=st.data())
def test_unique_functions(xp: Any, data: st.DataObject) -> None:
    dtype = data.draw(acst.dtypes(xp, names=ALL_DTYPES), label="dtype")
    shape = data.draw(acst.shapes(max_dims=3, max_side=5), label="shape")  # 0-d included
    host = data.draw(tied_arrays(dtype, shape), label="x")
    _check(xp, acst.on_device(xp, host, data.draw(acst.layouts(), label="layout")), host)


def test_every_nan_is_distinct(xp: Any) -> None:
    dtype = acst.supported_dtypes(xp, "real floating")[0]
    host = np.array([np.nan, 1.0, np.nan, -0.0, 0.0, np.nan], dtype=dtype)
    x = xp.asarray(host)
    got = xp.unique_all(x)
    assert_close(got.values, np.array([0.0, 1.0, np.nan, np.nan, np.nan], dtype=dtype))
    assert_close(got.counts, np.array([2, 1, 1, 1, 1]))  # -0.0 == 0.0: one value
    assert_close(got.indices, np.array([3, 1, 0, 2, 5]))
    assert_close(got.inverse_indices, np.array([2, 1, 3, 0, 0, 4]))
    _check(xp, x, host)


def test_zero_dimensional_and_empty_inputs(xp: Any) -> None:
    scalar = xp.asarray(np.array(7, dtype=np.int32))
    got = xp.unique_all(scalar)
    assert tuple(got.inverse_indices.shape) == ()  # the shape of x
    assert_close(got.values, np.array([7], dtype=np.int32))
    assert_close(got.indices, np.array([0]))
    assert_close(got.counts, np.array([1]))
    for shape in ((0,), (2, 0)):
        host = np.zeros(shape, np.float32)
        empty = xp.unique_all(xp.asarray(host))
        assert_close(empty.values, np.zeros(0, np.float32))
        assert_close(empty.indices, np.zeros(0, np.int64))
        assert_close(empty.inverse_indices, np.zeros(shape, np.int64))
        assert_close(empty.counts, np.zeros(0, np.int64))
