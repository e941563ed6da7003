"""Conformance of ``xp.inplace``: every element-wise function as ``xp.inplace.<name>(..., out=)``
(writing into ``out`` and returning it, with broadcasting, Python scalars, ``out`` aliasing an
input and ``out`` a non-contiguous view), plus ``copy``, ``fill`` and ``scatter_add`` (repeated
indices accumulate, as ``numpy.add.at`` does).

``out`` must already have the result's shape and dtype; the kit does not ask for a dtype
conversion through ``out``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arraycore.testing import assert_close, to_host
from arraycore.testing import strategies as acst

from .test_elementwise import BINARY, UNARY

SETTINGS = settings(max_examples=10, deadline=None)

# Unary functions that exist in xp.inplace (the element-wise primitives of the backend protocol).
INPLACE_UNARY = sorted(set(UNARY) - {"positive", "square", "isfinite"})
INPLACE_BINARY = sorted(BINARY)
BOOL_RESULT = {
    "isnan",
    "isinf",
    "logical_not",
    "logical_and",
    "logical_or",
    "equal",
    "not_equal",
    "less",
    "less_equal",
    "greater",
    "greater_equal",
}


def _numpy(name: str) -> Any:
    return np.power if name == "pow" else getattr(np, name)


@pytest.mark.parametrize("name", INPLACE_UNARY)
@SETTINGS
@given(data=st.data())
def test_inplace_unary(xp: Any, name: str, data: st.DataObject) -> None:
    kind, domain = UNARY[name]
    if name == "logical_not":
        kind = "bool"
    dtype = data.draw(acst.dtypes(xp, kind), label="dtype")
    host = data.draw(acst.arrays(dtype, acst.shapes(), domain), label="x")
    expected = _numpy(name)(host)
    out_dtype = np.asarray(expected).dtype
    x = acst.on_device(xp, host, data.draw(acst.layouts(), label="layout"))
    alias = out_dtype == dtype and data.draw(st.booleans(), label="out is x")
    out = (
        x
        if alias
        else acst.on_device(xp, np.zeros(host.shape, out_dtype), data.draw(acst.layouts()))
    )
    result = getattr(xp.inplace, name)(x, out=out)
    assert result is out, f"inplace.{name} did not return out"
    assert_close(out, expected, err_msg=f"inplace.{name}")


@pytest.mark.parametrize("name", INPLACE_BINARY)
@SETTINGS
@given(data=st.data())
def test_inplace_binary(xp: Any, name: str, data: st.DataObject) -> None:
    kind, domain1, domain2 = BINARY[name]
    if name.startswith("logical"):
        kind = "bool"
    dtype = data.draw(acst.dtypes(xp, kind), label="dtype")
    (s1, s2), shape = data.draw(acst.broadcastable_shapes(2), label="shapes")
    alias = data.draw(st.sampled_from(["none", "x1", "x2"]), label="out aliases")
    if name in BOOL_RESULT and dtype != np.bool_:
        alias = "none"
    if alias == "x1":
        s1 = shape
    elif alias == "x2":
        s2 = shape
    h1 = data.draw(acst.arrays(dtype, s1, domain1), label="x1")
    use_scalar = data.draw(st.booleans(), label="x2 scalar") and alias != "x2"
    h2: Any = (
        data.draw(acst.scalars(dtype, domain2), label="x2")
        if use_scalar
        else data.draw(acst.arrays(dtype, s2, domain2), label="x2")
    )
    expected = np.asarray(_numpy(name)(h1, h2))
    out_dtype, shape = expected.dtype, expected.shape
    x1 = acst.on_device(xp, h1, data.draw(acst.layouts(), label="layout1"))
    x2 = h2 if use_scalar else acst.on_device(xp, h2, data.draw(acst.layouts(), label="layout2"))
    if alias == "x1":
        out = x1
    elif alias == "x2":
        out = x2
    else:
        out = acst.on_device(xp, np.zeros(shape, out_dtype), data.draw(acst.layouts()))
    result = getattr(xp.inplace, name)(x1, x2, out=out)
    assert result is out, f"inplace.{name} did not return out"
    assert_close(out, expected, err_msg=f"inplace.{name}, out={alias}")


def test_inplace_scalar_on_the_left(xp: Any) -> None:
    host = np.array([1.0, 2.0, 4.0], dtype=np.float32)
    out = xp.asarray(np.zeros(3, np.float32))
    assert xp.inplace.subtract(10.0, xp.asarray(host), out=out) is out
    assert_close(out, 10.0 - host)
    x = xp.asarray(host.copy())
    xp.inplace.divide(1.0, x, out=x)
    assert_close(x, 1.0 / host)


def test_inplace_shape_errors(xp: Any) -> None:
    x = xp.asarray(np.ones((2, 3), np.float32))
    with pytest.raises(ValueError):
        xp.inplace.add(x, x, out=xp.asarray(np.zeros((3, 2), np.float32)))
    with pytest.raises(ValueError):
        xp.inplace.add(x, x, out=xp.asarray(np.zeros((3,), np.float32)))
    with pytest.raises(ValueError):
        xp.inplace.exp(x, out=xp.asarray(np.zeros((2, 3, 1), np.float32)))
    with pytest.raises(ValueError):  # the broadcast result (2, 3) is bigger than out
        xp.inplace.multiply(x, xp.asarray(np.ones((1, 3), np.float32)), out=x[:1])


# -- copy, fill, scatter_add -----------------------------------------------------------------------
@SETTINGS
@given(data=st.data())
def test_copy_and_fill(xp: Any, data: st.DataObject) -> None:
    dtype = data.draw(acst.dtypes(xp), label="dtype")
    (src_shape,), shape = data.draw(acst.broadcastable_shapes(1), label="shapes")
    base = data.draw(acst.arrays(dtype, shape), label="out")
    out = acst.on_device(xp, base, data.draw(acst.layouts(), label="out layout"))
    src_dtype = data.draw(
        st.sampled_from([d for d in acst.supported_dtypes(xp) if np.can_cast(d, dtype)]),
        label="src dtype",
    )
    src = data.draw(acst.arrays(src_dtype, src_shape), label="src")
    result = xp.inplace.copy(acst.on_device(xp, src, data.draw(acst.layouts())), out=out)
    assert result is out
    assert_close(out, np.broadcast_to(src, shape).astype(dtype), err_msg="inplace.copy")
    value = data.draw(acst.scalars(dtype), label="fill value")
    assert xp.inplace.fill(value, out=out) is out
    assert_close(out, np.full(shape, value, dtype=dtype), err_msg="inplace.fill")
    assert xp.inplace.copy(value, out=out) is out
    assert_close(out, np.full(shape, value, dtype=dtype), err_msg="inplace.copy of a scalar")


@SETTINGS
@given(data=st.data())
def test_scatter_add(xp: Any, data: st.DataObject) -> None:
    dtype = data.draw(acst.dtypes(xp, "numeric"), label="dtype")
    shape = data.draw(acst.shapes(min_dims=1, min_side=1, allow_empty=False), label="out shape")
    axis = data.draw(st.integers(-len(shape), len(shape) - 1), label="axis")
    size = shape[axis]
    # Few distinct indices, so repeats are frequent; negative indices count from the end.
    picked = data.draw(st.lists(st.integers(-size, size - 1), max_size=6), label="indices")
    indices = np.asarray(picked, dtype=np.int64)
    values_shape = list(shape)
    values_shape[axis] = len(picked)
    base = data.draw(acst.arrays(dtype, shape), label="out")
    values = data.draw(acst.arrays(dtype, tuple(values_shape)), label="values")
    expected = base.copy()
    np.add.at(expected, (slice(None),) * (axis % len(shape)) + (indices,), values)  # type: ignore[arg-type]
    out = acst.on_device(xp, base, data.draw(acst.layouts(), label="out layout"))
    vals = acst.on_device(xp, values, data.draw(acst.layouts(), label="values layout"))
    result = xp.inplace.scatter_add(out, xp.asarray(indices), vals, axis=axis)
    assert result is out
    assert_close(out, expected, scale=len(picked) + 1)


def test_scatter_add_repeated_indices_accumulate(xp: Any) -> None:
    out = xp.asarray(np.zeros((4, 2), np.float32))
    indices = xp.asarray(np.array([1, 1, 3, 1, -1], dtype=np.int64))
    values = xp.asarray(np.ones((5, 2), np.float32))
    xp.inplace.scatter_add(out, indices, values)
    assert_close(out, np.array([[0, 0], [3, 3], [0, 0], [2, 2]], np.float32))
    ints = xp.asarray(np.zeros(3, np.int32))
    xp.inplace.scatter_add(
        ints, xp.asarray(np.array([0, 0, 2])), xp.asarray(np.array([5, 6, 7], np.int32))
    )
    assert_close(ints, np.array([11, 0, 7], np.int32))


def test_scatter_add_shape_errors(xp: Any) -> None:
    out = xp.asarray(np.zeros((4, 2), np.float32))
    indices = xp.asarray(np.array([0, 1], dtype=np.int64))
    with pytest.raises(ValueError):
        xp.inplace.scatter_add(out, indices, xp.asarray(np.ones((3, 2), np.float32)))
    with pytest.raises(ValueError):
        xp.inplace.scatter_add(out, indices, xp.asarray(np.ones((2, 3), np.float32)))
    assert_close(to_host(out), np.zeros((4, 2), np.float32))


# -- fuse ---------------------------------------------------------------------------------------
def _adam_like(xp: Any) -> Any:
    """An optimiser-style chain: two in-place state updates, a returned step, scalars."""

    def update(value: Any, grad: Any, m: Any, v: Any, b1: float, b2: float, lr: float) -> Any:
        ip = xp.inplace
        ip.multiply(m, b1, out=m)
        ip.add(m, grad * (1.0 - b1), out=m)
        ip.multiply(v, b2, out=v)
        ip.add(v, grad * grad * (1.0 - b2), out=v)
        step = m / (xp.sqrt(v) + 1e-8) * lr
        ip.subtract(value, step, out=value)
        return step

    return update


@pytest.mark.parametrize("dtype_name", ["float32", "float64"])
def test_fuse_runs_the_chain(xp: Any, dtype_name: str) -> None:
    """A fused function updates its array arguments in place and returns what ``fn`` returns,
    the same numbers as ``fn`` called eagerly (to rounding), call after call with new scalars."""
    if dtype_name not in acst.device_dtypes(xp):
        pytest.skip(f"the device of backend {getattr(xp, 'name', xp)!r} has no {dtype_name}")
    dtype = np.dtype(dtype_name)
    rng = np.random.default_rng(5)
    host = {k: rng.standard_normal((3, 17)).astype(dtype) for k in ("value", "grad", "m")}
    host["v"] = np.abs(rng.standard_normal((3, 17))).astype(dtype)
    # copies: asarray may share memory with the host array (NumPy does)
    fused_args = {k: xp.asarray(a.copy()) for k, a in host.items()}
    eager_args = {k: xp.asarray(a.copy()) for k, a in host.items()}
    fused, eager = xp.inplace.fuse(_adam_like(xp)), _adam_like(xp)
    for lr in (0.1, 0.01):  # a second call with another scalar must not reuse the first
        names = ("value", "grad", "m", "v")
        got = fused(*(fused_args[k] for k in names), 0.9, 0.999, lr)
        want = eager(*(eager_args[k] for k in names), 0.9, 0.999, lr)
        assert_close(got, to_host(want), scale=10)
        for k in ("value", "m", "v"):
            assert_close(fused_args[k], to_host(eager_args[k]), scale=10, err_msg=k)
    assert not np.allclose(to_host(fused_args["value"]), host["value"])  # it did update


def test_fuse_rejects_a_non_function(xp: Any) -> None:
    with pytest.raises(TypeError, match=r"inplace.fuse: expected a function, got int"):
        xp.inplace.fuse(3)
    with pytest.raises(TypeError, match=r"scalar_operands must be True or False, got 'yes'"):
        xp.inplace.fuse(_adam_like(xp), scalar_operands="yes")


def _momentum_chain(xp: Any) -> Any:
    """An update chain that keeps ``scalar_operands``'s promise: its scalars (``one_minus_mu``
    passed in, not computed) only ever meet arrays."""

    def update(value: Any, grad: Any, v: Any, mu: float, one_minus_mu: float, lr: float) -> None:
        ip = xp.inplace
        ip.multiply(v, mu, out=v)
        ip.multiply(grad, one_minus_mu, out=grad)
        ip.add(v, grad, out=v)
        ip.multiply(grad, 0.0, out=grad)
        ip.add(grad, v, out=grad)
        ip.multiply(grad, lr, out=grad)
        ip.subtract(value, grad, out=value)

    return update


@pytest.mark.parametrize("scalars", ["python", "0-d arrays"])
@pytest.mark.parametrize("dtype_name", ["float32", "float64"])
def test_fuse_with_scalar_operands_equals_the_eager_chain(
    xp: Any, dtype_name: str, scalars: str
) -> None:
    """What the CUDA backend fuses into one kernel: the same numbers as the plain calls, call
    after call with new scalars (the promise kept). The scalars are Python numbers, or 0-d
    arrays of the chain's dtype (an optimiser's learning rate kept on the device) with new
    values written into the same arrays, which the chain leaves as they were."""
    if dtype_name not in acst.device_dtypes(xp):
        pytest.skip(f"the device of backend {getattr(xp, 'name', xp)!r} has no {dtype_name}")
    rng = np.random.default_rng(3)
    host = {k: rng.standard_normal((4, 33)).astype(dtype_name) for k in ("value", "grad", "v")}
    names = ("value", "grad", "v")
    fused_args = {k: xp.asarray(a.copy()) for k, a in host.items()}
    eager_args = {k: xp.asarray(a.copy()) for k, a in host.items()}
    fused = xp.inplace.fuse(_momentum_chain(xp), scalar_operands=True)
    eager = _momentum_chain(xp)
    held = [xp.asarray(np.asarray(0.0, dtype=dtype_name)) for _ in range(2)]
    for mu, lr in ((0.9, 0.1), (0.5, 0.01), (0.25, 0.3)):
        given: tuple[Any, Any] = (mu, lr)
        if scalars != "python":
            for value, array in zip(given, held, strict=True):
                xp.inplace.fill(value, out=array)
            given = (held[0], held[1])
        fused(*(fused_args[k] for k in names), given[0], 1.0 - mu, given[1])
        eager(*(eager_args[k] for k in names), given[0], 1.0 - mu, given[1])
        for k in names:
            assert_close(fused_args[k], to_host(eager_args[k]), scale=4, err_msg=k)
        if scalars != "python":
            for value, array in zip((mu, lr), held, strict=True):
                assert float(to_host(array)) == float(np.asarray(value, dtype=dtype_name))
