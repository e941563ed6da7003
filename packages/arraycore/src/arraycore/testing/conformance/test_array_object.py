"""Conformance of the array objects a backend hands out: the operators (``+ - * / // % ** @``,
comparisons, unary ``- + abs``, ``& | ~`` on bools), reflected operators with Python scalars,
in-place operators, ``.T``/``.mT``, ``.shape/.dtype/.ndim/.size/.device``, ``to_device``,
``__array_namespace__`` and ``bool``/``int``/``float``/``index`` conversion of 0-d arrays.

The bitwise operators ``& | ~`` are checked on bool arrays only: arraycore has no bitwise
functions, so arrays built on :class:`arraycore.ArrayBase` reject integer operands, while NumPy
and CuPy arrays compute bitwise results for them.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import arraycore
from arraycore import ArrayBase
from arraycore.testing import assert_close, to_host, tolerance
from arraycore.testing import strategies as acst

SETTINGS = settings(max_examples=15, deadline=None)

# operator -> (dtype kind, domain of the left operand, domain of the right operand)
OPERATORS: dict[str, tuple[Any, str, str]] = {
    "add": ("numeric", "any", "any"),
    "sub": ("numeric", "any", "any"),
    "mul": ("numeric", "any", "any"),
    "truediv": ("real floating", "any", "nonzero"),
    "floordiv": ("numeric", "any", "nonzero"),
    "mod": ("numeric", "any", "nonzero"),
    "pow": ("numeric", "base", "exponent"),
    "lt": (None, "any", "any"),
    "le": (None, "any", "any"),
    "gt": (None, "any", "any"),
    "ge": (None, "any", "any"),
    "eq": (None, "any", "any"),
    "ne": (None, "any", "any"),
    "and_": ("bool", "any", "any"),
    "or_": ("bool", "any", "any"),
}
INPLACE = {
    "add": "iadd",
    "sub": "isub",
    "mul": "imul",
    "truediv": "itruediv",
    "floordiv": "ifloordiv",
    "mod": "imod",
    "pow": "ipow",
    "and_": "iand",
    "or_": "ior",
}


def _operator_result(xp: Any, name: str, result: Any, h1: Any, h2: Any) -> Any:
    """The NumPy result of ``h1 op h2`` that ``result`` (the backend array's operator) must match.

    Arrays of another library (CuPy's, where the backend hands them out) carry that library's
    own operators, which arraycore cannot change. CuPy's ``//`` and ``%`` of floats divide
    first and floor the rounded quotient (``q = floor(x / y)``, ``x - q * y``), where NumPy
    takes ``fmod``: ``1 % 0.33333334`` (float32) is -3e-8 there, 0.3333333 in NumPy, and a
    quotient below the smallest normal number becomes 0 (``-1.2e-38 // 2`` is -0.0, not -1).
    For such arrays, an element may match either; ``xp.floor_divide`` and ``xp.remainder``
    must still give NumPy's (their own tests)."""
    left = np.array(h1, copy=True)  # in-place operators overwrite h1
    with np.errstate(all="ignore"):
        want = np.asarray(getattr(operator, name)(h1, h2))
        dtype = want.dtype
        if (
            name not in ("floordiv", "mod", "ifloordiv", "imod")
            or dtype.kind != "f"
            or isinstance(result, ArrayBase | np.ndarray)
        ):
            return want
        wide = np.promote_types(dtype, np.float32)  # half floats divide in float32
        x, y = left.astype(wide), np.asarray(h2).astype(wide)
        quotient = x / y
        quotient = np.where(np.abs(quotient) < np.finfo(wide).tiny, 0 * quotient, quotient)
        floor = np.floor(quotient)
        exact = np.longdouble  # x - q * y rounded once, as a fused multiply-add
        divide_first = floor if "floordiv" in name else x.astype(exact) - floor.astype(exact) * y
        divide_first = np.asarray(divide_first).astype(dtype)
        rtol, atol = tolerance(dtype)
        takes_it = np.isclose(to_host(result), divide_first, rtol=rtol, atol=atol, equal_nan=True)
        return np.where(takes_it, divide_first, want).astype(dtype)


@pytest.mark.parametrize("name", sorted(OPERATORS))
@SETTINGS
@given(data=st.data())
def test_binary_operator(xp: Any, name: str, data: st.DataObject) -> None:
    kind, domain1, domain2 = OPERATORS[name]
    op = getattr(operator, name)
    dtype = data.draw(acst.dtypes(xp, kind), label="dtype")
    (s1, s2), _ = data.draw(acst.broadcastable_shapes(2), label="shapes")
    h1 = data.draw(acst.arrays(dtype, s1, domain1), label="x1")
    h2 = data.draw(acst.arrays(dtype, s2, domain2), label="x2")
    x1 = acst.on_device(xp, h1, data.draw(acst.layouts(), label="layout1"))
    x2 = acst.on_device(xp, h2, data.draw(acst.layouts(), label="layout2"))
    got = op(x1, x2)
    assert_close(got, _operator_result(xp, name, got, h1, h2), err_msg=name)
    # Python scalars on the right and (reflected operators) on the left.
    right = data.draw(acst.scalars(dtype, domain2), label="right scalar")
    left = data.draw(acst.scalars(dtype, domain1), label="left scalar")
    got = op(x1, right)
    assert_close(got, _operator_result(xp, name, got, h1, right), err_msg=f"x {name} {right!r}")
    got = op(left, x2)
    assert_close(got, _operator_result(xp, name, got, left, h2), err_msg=f"{left!r} {name} x")


@pytest.mark.parametrize("name", sorted(INPLACE))
@SETTINGS
@given(data=st.data())
def test_inplace_operator(xp: Any, name: str, data: st.DataObject) -> None:
    """``x op= y`` updates x itself (views of it see the change) and keeps its dtype and shape."""
    kind, domain1, domain2 = OPERATORS[name]
    dtype = data.draw(acst.dtypes(xp, kind), label="dtype")
    (shape, other_shape), _ = data.draw(acst.broadcastable_shapes(2), label="shapes")
    shape = np.broadcast_shapes(shape, other_shape)  # x keeps its shape, so it must be the result
    h1 = data.draw(acst.arrays(dtype, shape, domain1), label="x")
    use_scalar = data.draw(st.booleans(), label="scalar operand")
    h2: Any = (
        data.draw(acst.scalars(dtype, domain2), label="y")
        if use_scalar
        else data.draw(acst.arrays(dtype, other_shape, domain2), label="y")
    )
    x = xp.asarray(h1.copy())
    alias = x
    y = h2 if use_scalar else xp.asarray(h2)
    x = getattr(operator, INPLACE[name])(x, y)
    assert x is alias, f"x {name}= y made a new array instead of updating x"
    expected = _operator_result(xp, INPLACE[name], x, h1.copy(), h2)
    assert_close(x, expected, err_msg=f"{name}=")


def test_unary_operators(xp: Any) -> None:
    for dtype in acst.supported_dtypes(xp, ("signed integer", "real floating")):
        host = np.array([[1, -2, 0], [3, 4, -5]], dtype=dtype)
        x = xp.asarray(host)
        assert_close(-x, -host)
        assert_close(+x, +host)
        assert_close(abs(x), abs(host))
    flags = np.array([True, False])
    f = xp.asarray(flags)
    assert_close(~f, ~flags)
    assert_close(f & True, flags & True)
    assert_close(False | f, False | flags)
    assert_close(f ^ flags[::-1].tolist()[0], flags ^ flags[::-1][0])


@pytest.mark.parametrize(
    "op",
    [operator.and_, operator.or_, operator.xor, operator.lshift, operator.rshift],
    ids=lambda op: op.__name__,
)
def test_bitwise_operators(xp: Any, op: Any) -> None:
    """``& | ^ << >>`` and ``~`` are the standard's bitwise functions on integer arrays (bool
    for ``& | ^ ~``), with Python ints on either side and in place."""
    for dtype in acst.supported_dtypes(xp, "integral"):
        host = np.array([[1, 6, 0], [3, 4, 5]], dtype=dtype)
        other = np.array([2, 1, 3], dtype=dtype)
        x, y = xp.asarray(host), xp.asarray(other)
        assert_close(op(x, y), op(host, other), err_msg=f"{op.__name__} {dtype}")
        assert_close(op(x, 2), op(host, 2), err_msg=f"{op.__name__} {dtype} int")
        assert_close(op(3, y), op(3, other), err_msg=f"{op.__name__} int {dtype}")
        assert_close(~x, ~host)
        if isinstance(x, ArrayBase):  # in place on arraycore's own array classes
            z = xp.asarray(host)
            inplace = {"and_": "__iand__", "or_": "__ior__", "xor": "__ixor__"}
            name = inplace.get(op.__name__, f"__i{op.__name__}__")
            assert getattr(z, name)(y) is z
            assert_close(z, op(host, other))
    flags = xp.asarray(np.array([True, False]))
    if op in (operator.lshift, operator.rshift):
        if not isinstance(flags, ArrayBase):  # NumPy's own ndarray shifts bool as int8
            return
        with pytest.raises(TypeError):
            op(flags, flags)
    else:
        assert_close(op(flags, flags), op(np.array([True, False]), np.array([True, False])))


def test_matmul_operator(xp: Any) -> None:
    for dtype in acst.supported_dtypes(xp, "real floating"):
        a = np.arange(6, dtype=dtype).reshape(2, 3)
        b = np.arange(12, dtype=dtype).reshape(3, 4)
        v = np.arange(3, dtype=dtype)
        assert_close(xp.asarray(a) @ xp.asarray(b), a @ b)
        assert_close(xp.asarray(a) @ xp.asarray(v), a @ v)
        assert_close(xp.asarray(v) @ xp.asarray(b), v @ b)


def test_attributes(xp: Any) -> None:
    host = np.zeros((2, 3, 4), dtype=np.float32)
    x = xp.asarray(host)
    assert tuple(x.shape) == (2, 3, 4) and all(type(s) is int for s in x.shape)
    assert x.dtype == xp.float32
    assert x.ndim == 3
    assert x.size == 24
    assert x.device == xp.__array_namespace_info__().default_device()
    empty = xp.asarray(np.zeros((0, 5), dtype=np.int8))
    assert empty.size == 0 and empty.ndim == 2
    scalar = xp.asarray(np.float32(1.0))
    assert tuple(scalar.shape) == () and scalar.ndim == 0 and scalar.size == 1


@SETTINGS
@given(data=st.data())
def test_transposes(xp: Any, data: st.DataObject) -> None:
    dtype = data.draw(acst.dtypes(xp), label="dtype")
    host = data.draw(acst.arrays(dtype, acst.shapes(min_dims=2)), label="x")
    x = acst.on_device(xp, host, data.draw(acst.layouts(), label="layout"))
    assert_close(x.mT, np.matrix_transpose(host))
    if host.ndim == 2:
        assert_close(x.T, host.T)


def test_namespace_and_device(xp: Any) -> None:
    host = np.array([1.0, 2.0], dtype=np.float32)
    x = xp.asarray(host)
    if isinstance(x, ArrayBase) or hasattr(x, "__array_namespace__"):
        ns = x.__array_namespace__()
        # arraycore's arrays give the namespace; NumPy's arrays give NumPy.
        assert ns is xp or hasattr(ns, "__array_api_version__"), ns
    else:  # CuPy 14's arrays have none: arraycore names the namespace for them
        ns = arraycore.namespace_of(x)
        assert ns.name == xp.name, ns
    assert_close(ns.add(x, x), host + host)
    if isinstance(x, ArrayBase) or hasattr(x, "to_device"):
        assert_close(x.to_device(x.device), host)


def test_scalar_conversions(xp: Any) -> None:
    x = xp.asarray(np.float32(2.75))
    assert float(x) == 2.75 and isinstance(float(x), float)
    assert int(x) == 2
    assert bool(x) is True
    assert bool(xp.asarray(np.float32(0.0))) is False
    i = xp.asarray(np.int64(-3))
    assert int(i) == -3 and float(i) == -3.0
    if isinstance(i, ArrayBase) or hasattr(type(i), "__index__"):  # not CuPy's arrays
        assert operator.index(i) == -3
        assert [10, 20, 30, 40][xp.asarray(np.int8(2))] == 30
    assert bool(xp.asarray(True)) is True
    with pytest.raises(TypeError):
        operator.index(x)  # floats are not indices
    with pytest.raises((TypeError, ValueError)):
        bool(xp.asarray(np.array([True, False])))  # ambiguous truth value


def test_comparisons_give_bool_arrays(xp: Any) -> None:
    host = np.array([1, 2, 3], dtype=np.int16)
    x = xp.asarray(host)
    for name in ("lt", "le", "gt", "ge", "eq", "ne"):
        op = getattr(operator, name)
        result = op(x, 2)
        assert result.dtype == np.bool_
        assert_close(result, op(host, 2))
        assert_close(op(2, x), op(2, host), err_msg=f"reflected {name}")
