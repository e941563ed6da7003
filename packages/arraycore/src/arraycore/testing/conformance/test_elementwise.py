"""Conformance of the element-wise functions: every unary and binary function, clip and where.

Each function is compared with the NumPy function of the same name on host copies of the same
values, over generated shapes (broadcasting, size-1 and empty axes), dtypes, layouts
(contiguous, strided, reversed and transposed views) and Python scalars on either side.

Values are drawn where the function is defined without overflow (see
:data:`arraycore.testing.strategies.DOMAINS`). Integer and bool inputs of the floating-point
functions, the bool cases NumPy answers by accident (``square`` of bool is ``int8`` there),
integer ``pow`` with negative exponents, integer division by zero and Python ints out of an
array's range follow arraycore's dtype rules (``docs/dtypes.md``), not NumPy, and are checked
for every function and dtype in :mod:`.test_dtype_rules`. What the kit leaves out on purpose:

- Integer overflow inside an operation, which the standard leaves unspecified (NumPy wraps
  around). Unsigned subtraction below zero wraps in NumPy and is kept, since every device
  computes it the same way.
- ``where`` with two scalars and ``clip`` with ``min > max`` (unspecified by the standard).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arraycore._optable import BY_NAME, ELEMENTWISE, Elementwise
from arraycore.testing import assert_close, to_host
from arraycore.testing import strategies as acst

SETTINGS = settings(max_examples=15, deadline=None)

#: Entries where NumPy's answer for bool input is not arraycore's rule (``square`` of bool is
#: int8 in NumPy, ``floor`` of bool float16, ...): the kit draws them without bool here and
#: checks bool in :mod:`.test_dtype_rules`.
NUMPY_DIFFERS_ON_BOOL = frozenset(
    {"square", "floor", "ceil", "round", "trunc", "maximum", "minimum", "signbit", "conj"}
)


def _kit_kind(op: Elementwise) -> Any:
    """The dtypes the kit draws for an op-table entry (see the module docstring)."""
    if op.result == "float":
        return "real floating"  # integer inputs: the default float, in test_dtype_rules
    if op.accepts == "integer":
        return "integral"
    if op.accepts == "integer or bool":
        return ("bool", "integral")
    if op.accepts == "numeric" or op.name in NUMPY_DIFFERS_ON_BOOL:
        return "numeric"
    return None


# name -> (dtype kind, value domain): every unary entry of the op table
UNARY: dict[str, tuple[Any, str]] = {
    op.name: (_kit_kind(op), op.domain[0]) for op in ELEMENTWISE if op.arity == 1
}

# name -> (dtype kind, domain of x1, domain of x2): every binary entry of the op table
BINARY: dict[str, tuple[Any, str, str]] = {
    op.name: (_kit_kind(op), *op.domain) for op in ELEMENTWISE if op.arity == 2
}
COMPARISONS = ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal")


def _numpy(name: str) -> Any:
    return getattr(np, BY_NAME[name].reference)


@pytest.mark.parametrize("name", sorted(UNARY))
@SETTINGS
@given(data=st.data())
def test_unary(xp: Any, name: str, data: st.DataObject) -> None:
    kind, domain = UNARY[name]
    dtype = data.draw(acst.dtypes(xp, kind), label="dtype")
    host = data.draw(acst.arrays(dtype, acst.shapes(), domain), label="x")
    x = acst.on_device(xp, host, data.draw(acst.layouts(), label="layout"))
    assert_close(getattr(xp, name)(x), _numpy(name)(host), err_msg=name)
    assert_close(x, host, err_msg=f"{name} changed its input")


@pytest.mark.parametrize("name", sorted(BINARY))
@SETTINGS
@given(data=st.data())
def test_binary_broadcasting(xp: Any, name: str, data: st.DataObject) -> None:
    kind, domain1, domain2 = BINARY[name]
    dtype = data.draw(acst.dtypes(xp, kind), label="dtype")
    (shape1, shape2), _ = data.draw(acst.broadcastable_shapes(2), label="shapes")
    h1 = data.draw(acst.arrays(dtype, shape1, domain1), label="x1")
    h2 = data.draw(acst.arrays(dtype, shape2, domain2), label="x2")
    x1 = acst.on_device(xp, h1, data.draw(acst.layouts(), label="layout1"))
    x2 = acst.on_device(xp, h2, data.draw(acst.layouts(), label="layout2"))
    result = getattr(xp, name)(x1, x2)
    expected = _numpy(name)(h1, h2)
    assert_close(result, expected, err_msg=name)
    if BY_NAME[name].result == "bool":
        assert np.asarray(expected).dtype == np.bool_


@pytest.mark.parametrize("name", sorted(BINARY))
@SETTINGS
@given(data=st.data())
def test_binary_mixed_dtypes(xp: Any, name: str, data: st.DataObject) -> None:
    """Two dtypes meet: the result has NumPy 2's promoted dtype (the standard's where defined)."""
    kind, domain1, domain2 = BINARY[name]
    dt1 = data.draw(acst.dtypes(xp, kind), label="dtype1")
    dt2 = data.draw(acst.dtypes(xp, kind), label="dtype2")
    promoted = np.result_type(dt1, dt2)
    if promoted.name not in acst.device_dtypes(xp):
        return
    if promoted.kind == "f" and kind in ("integral", ("bool", "integral")):
        # a signed integer with uint64 promotes to float64 (NumPy 2; the standard leaves it
        # undefined): an integer-only function refuses it
        with pytest.raises(TypeError, match=name):
            getattr(xp, name)(xp.asarray(np.zeros(1, dt1)), xp.asarray(np.zeros(1, dt2)))
        return
    if name == "pow" and promoted.kind == "f" and dt1.kind != "f":
        domain1 = "positive"  # an integer base 0 with a negative float exponent is inf
    (shape1, shape2), _ = data.draw(acst.broadcastable_shapes(2), label="shapes")
    h1 = data.draw(acst.arrays(dt1, shape1, domain1), label="x1")
    h2 = data.draw(acst.arrays(dt2, shape2, domain2), label="x2")
    result = getattr(xp, name)(xp.asarray(h1), xp.asarray(h2))
    assert_close(result, _numpy(name)(h1, h2), err_msg=f"{name}({dt1}, {dt2})")


@pytest.mark.parametrize("name", sorted(BINARY))
@SETTINGS
@given(data=st.data())
def test_binary_python_scalars(xp: Any, name: str, data: st.DataObject) -> None:
    """A Python scalar on either side takes the array's dtype (NEP 50 / the standard)."""
    kind, domain1, domain2 = BINARY[name]
    dtype = data.draw(acst.dtypes(xp, kind), label="dtype")
    host = data.draw(acst.arrays(dtype, acst.shapes(), domain1), label="x")
    x = acst.on_device(xp, host, data.draw(acst.layouts(), label="layout"))
    fn, ref = getattr(xp, name), _numpy(name)
    scalar = data.draw(acst.scalars(dtype, domain2), label="right")
    assert_close(fn(x, scalar), ref(host, scalar), err_msg=f"{name}(x, {scalar!r})")
    # On the left, the scalar takes the first domain and the array the second one.
    host2 = data.draw(acst.arrays(dtype, acst.shapes(), domain2), label="x2")
    scalar2 = data.draw(acst.scalars(dtype, domain1), label="left")
    x2 = acst.on_device(xp, host2, data.draw(acst.layouts(), label="layout2"))
    assert_close(fn(scalar2, x2), ref(scalar2, host2), err_msg=f"{name}({scalar2!r}, x)")


@pytest.mark.parametrize("name", ["add", "multiply", "subtract", "less", "divide"])
def test_python_int_with_float_array_and_bool_with_any(xp: Any, name: str) -> None:
    """The standard's scalar mixing: int scalars with float arrays, bool scalars with bool."""
    for dtype in acst.supported_dtypes(xp, "real floating"):
        host = np.array([1.5, -2.0, 3.25], dtype=dtype)
        assert_close(getattr(xp, name)(xp.asarray(host), 2), _numpy(name)(host, 2))
        assert_close(getattr(xp, name)(3, xp.asarray(host)), _numpy(name)(3, host))
    if name in ("add", "multiply", "less"):
        flags = np.array([True, False])
        assert_close(getattr(xp, name)(xp.asarray(flags), True), _numpy(name)(flags, True))


def test_bool_negative_and_subtract_raise(xp: Any) -> None:
    """NumPy and the standard reject arithmetic negation and subtraction of bools."""
    flags = xp.asarray(np.array([True, False]))
    with pytest.raises(TypeError):
        xp.negative(flags)
    with pytest.raises(TypeError):
        xp.subtract(flags, flags)


def test_special_float_values(xp: Any) -> None:
    """NaN and infinities through isnan/isinf/isfinite, sign, maximum/minimum and comparisons."""
    for dtype in acst.supported_dtypes(xp, "real floating"):
        with np.errstate(all="ignore"):
            _check_special_values(xp, dtype)


def _check_special_values(xp: Any, dtype: np.dtype) -> None:
    host = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.5, -2.5], dtype=dtype)
    other = np.array([1.0, np.nan, 2.0, -0.0, np.inf, np.nan, -np.inf], dtype=dtype)
    x, y = xp.asarray(host), xp.asarray(other)
    unary = ("isnan", "isinf", "isfinite", "sign", "abs", "negative", "floor", "round")
    for name in (*unary, "exp", "log", "sqrt", "tanh"):
        assert_close(getattr(xp, name)(x), getattr(np, name)(host), err_msg=name)
    for name in ("maximum", "minimum", "add", "multiply", "divide", *COMPARISONS):
        assert_close(getattr(xp, name)(x, y), getattr(np, name)(host, other), err_msg=name)
    zero = np.zeros_like(host)
    assert_close(xp.divide(x, xp.asarray(zero)), np.divide(host, zero), err_msg="x / 0")


def test_integer_division_and_remainder_signs(xp: Any) -> None:
    """``//`` rounds towards minus infinity and ``%`` takes the sign of the divisor."""
    a = np.array([7, -7, 7, -7, 0, 6, -6, 1, -1], dtype=np.int64)
    b = np.array([2, 2, -2, -2, 3, -4, 4, 5, -5], dtype=np.int64)
    for dtype in acst.supported_dtypes(xp, ("signed integer", "real floating")):
        ha, hb = a.astype(dtype), b.astype(dtype)
        x1, x2 = xp.asarray(ha), xp.asarray(hb)
        assert_close(xp.floor_divide(x1, x2), np.floor_divide(ha, hb), err_msg=str(dtype))
        assert_close(xp.remainder(x1, x2), np.remainder(ha, hb), err_msg=str(dtype))
    assert_close(
        xp.floor_divide(xp.asarray(np.array([-7, 7], np.int8)), -2),
        np.array([3, -4], np.int8),
    )
    assert_close(xp.remainder(xp.asarray(np.array([-7, 7], np.int8)), 3), np.array([2, 1], np.int8))


def test_float_division_remainder_and_copysign_at_the_edges(xp: Any) -> None:
    """NumPy's ``npy_divmod`` results where dividing first and flooring goes wrong: quotients
    below the smallest normal float (an H200's CuPy gave ``-tiny // 2 == -0.0``), quotients that
    round up to an integer (``1 // 0.1 == 9``), signed zeros, infinities and NaN; and the sign
    ``copysign`` takes from -0.0 (CuPy gave ``copysign(1, -0.0) == 1``). In place too."""
    for dtype in acst.supported_dtypes(xp, "real floating"):
        info = np.finfo(dtype)
        tiny, big = float(info.tiny), float(info.max)
        a = np.array(
            [-tiny, tiny, tiny, -tiny, 1.0, -1.0, 0.0, -0.0, 5.0, -5.0, np.inf, 3.0, np.nan, big],
            dtype=dtype,
        )  # fmt: skip
        b = np.array(
            [2.0, -2.0, 2.0, -2.0, 0.1, 0.1, -3.0, 3.0, np.inf, np.inf, 2.0, -0.0, 1.0, 0.5],
            dtype=dtype,
        )  # fmt: skip
        x1, x2 = xp.asarray(a), xp.asarray(b)
        with np.errstate(all="ignore"):
            for name in ("floor_divide", "remainder", "copysign"):
                want = getattr(np, name)(a, b)
                got = getattr(xp, name)(x1, x2)
                assert_close(got, want, err_msg=f"{name} {dtype}")
                numbers = ~np.isnan(want)  # a NaN's sign bit means nothing
                signs = np.signbit(to_host(got))[numbers], np.signbit(want)[numbers]
                assert np.array_equal(*signs), (name, dtype)
                out = xp.asarray(a)
                getattr(xp.inplace, name)(out, x2, out=out)
                assert_close(out, want, err_msg=f"inplace.{name} {dtype}")
            ones = xp.asarray(np.ones(3, dtype))
            signs = xp.asarray(np.array([-0.0, 0.0, -2.0], dtype))
            assert np.signbit(to_host(xp.copysign(ones, signs))).tolist() == [True, False, True]


@SETTINGS
@given(data=st.data())
def test_round_half_to_even(xp: Any, data: st.DataObject) -> None:
    dtype = data.draw(acst.dtypes(xp, "real floating"), label="dtype")
    host = data.draw(acst.arrays(dtype, acst.shapes(), "halves"), label="x")
    x = acst.on_device(xp, host, data.draw(acst.layouts(), label="layout"))
    assert_close(xp.round(x), np.round(host))
    fixed = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.5, 1e6 + 0.5], dtype=dtype)
    assert_close(xp.round(xp.asarray(fixed)), np.round(fixed))
    assert_close(xp.round(xp.asarray(fixed)), np.array([0, 2, 2, -0, -2, -2, 4, 1e6], dtype=dtype))


# -- clip ------------------------------------------------------------------------------------------
@SETTINGS
@given(data=st.data())
def test_clip(xp: Any, data: st.DataObject) -> None:
    """clip with scalar, array (broadcast) or None bounds keeps the dtype of x."""
    dtype = data.draw(acst.dtypes(xp, "numeric"), label="dtype")
    shape = data.draw(acst.shapes(), label="shape")
    host = data.draw(acst.arrays(dtype, shape), label="x")
    # The result shape is x's: bounds must broadcast to it, so bound shapes come from x's axes.
    kinds = data.draw(st.tuples(*[st.sampled_from(["none", "scalar", "array"])] * 2))
    lo_val, hi_val = sorted(data.draw(st.lists(acst.scalars(dtype), min_size=2, max_size=2)))
    bounds: list[Any] = []
    host_bounds: list[Any] = []
    for which, scalar in zip(kinds, (lo_val, hi_val), strict=True):
        if which == "none":
            bounds.append(None)
            host_bounds.append(None)
        elif which == "scalar":
            bounds.append(scalar)
            host_bounds.append(scalar)
        else:
            bshape = data.draw(_sub_shape(shape), label="bound shape")
            hb = np.full(bshape, scalar, dtype=dtype)
            bounds.append(xp.asarray(hb))
            host_bounds.append(hb)
    x = acst.on_device(xp, host, data.draw(acst.layouts(), label="layout"))
    result = xp.clip(x, *bounds)
    expected = np.clip(host, *host_bounds)
    assert_close(result, np.asarray(expected).astype(dtype))
    assert_close(x, host, err_msg="clip changed its input")
    # Keyword bounds, and bounds given as arrays with per-element values.
    if host.size:
        lo = data.draw(acst.arrays(dtype, shape), label="lo")
        hi = np.maximum(lo, data.draw(acst.arrays(dtype, shape), label="hi"))
        assert_close(xp.clip(x, min=xp.asarray(lo), max=xp.asarray(hi)), np.clip(host, lo, hi))


@st.composite
def _sub_shape(draw: st.DrawFn, shape: tuple[int, ...]) -> tuple[int, ...]:
    """A shape that broadcasts to ``shape`` (a trailing part, some axes of size 1)."""
    ndim = draw(st.integers(0, len(shape)))
    return tuple(1 if draw(st.booleans()) else s for s in shape[len(shape) - ndim :])


# -- where -----------------------------------------------------------------------------------------
@SETTINGS
@given(data=st.data())
def test_where(xp: Any, data: st.DataObject) -> None:
    dtype1 = data.draw(acst.dtypes(xp), label="dtype1")
    dtype2 = data.draw(st.one_of(st.just(dtype1), acst.dtypes(xp)), label="dtype2")
    if np.result_type(dtype1, dtype2).name not in acst.device_dtypes(xp):
        return
    (sc, s1, s2), _ = data.draw(acst.broadcastable_shapes(3), label="shapes")
    hc = data.draw(acst.arrays(np.bool_, sc), label="condition")
    h1 = data.draw(acst.arrays(dtype1, s1), label="x1")
    h2 = data.draw(acst.arrays(dtype2, s2), label="x2")
    c = acst.on_device(xp, hc, data.draw(acst.layouts(), label="layout"))
    x1, x2 = xp.asarray(h1), acst.on_device(xp, h2, data.draw(acst.layouts(), label="layout2"))
    assert_close(xp.where(c, x1, x2), np.where(hc, h1, h2))
    # A Python scalar on either side takes the dtype of the array on the other side.
    s = data.draw(acst.scalars(dtype1), label="scalar")
    assert_close(xp.where(c, x1, s), np.where(hc, h1, s))
    assert_close(xp.where(c, s, x1), np.where(hc, s, h1))
