"""Conformance of the linear-algebra functions: matmul (1-D operands, broadcast batch axes, empty
dimensions), tensordot (int and pair ``axes``), vecdot, matrix_transpose, and their errors.

Integers are drawn in [-3, 3] so that sums of products fit even ``int8`` (NumPy keeps the input
dtype for integer matmul and wraps on overflow, which the standard leaves unspecified). Floating
results use the dtype's tolerance scaled by the length of the contracted axes.

Shape errors are ``ValueError`` on every backend. The kit checks that the message names both
shapes only where the namespace's own (generic) function runs: the NumPy backend binds
``numpy.matmul``/``tensordot``/``vecdot`` directly, and NumPy's messages name core dimensions
instead.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arraycore.testing import assert_close
from arraycore.testing import strategies as acst

SETTINGS = settings(max_examples=20, deadline=None)


def _domain(dtype: np.dtype) -> str:
    return "any" if dtype.kind == "f" else "base"


def _generic(xp: Any, name: str) -> bool:
    """Whether ``xp.name`` is arraycore's generic function (not a backend override)."""
    return name not in vars(xp)


@st.composite
def matmul_shapes(draw: st.DrawFn) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Shapes of two matmul operands: 1-D or matrices with broadcastable batch axes."""
    m, k, n = draw(acst.shapes(min_dims=3, max_dims=3))
    (batch1, batch2), _ = draw(acst.broadcastable_shapes(2, max_dims=2, allow_empty=False))
    s1 = (k,) if draw(st.integers(0, 4)) == 0 else (*batch1, m, k)
    s2 = (k,) if draw(st.integers(0, 4)) == 0 else (*batch2, k, n)
    return s1, s2


@SETTINGS
@given(data=st.data())
def test_matmul(xp: Any, data: st.DataObject) -> None:
    dtype = data.draw(acst.dtypes(xp, "numeric"), label="dtype")
    s1, s2 = data.draw(matmul_shapes(), label="shapes")
    h1 = data.draw(acst.arrays(dtype, s1, _domain(dtype)), label="x1")
    h2 = data.draw(acst.arrays(dtype, s2, _domain(dtype)), label="x2")
    x1 = acst.on_device(xp, h1, data.draw(acst.layouts(), label="layout1"))
    x2 = acst.on_device(xp, h2, data.draw(acst.layouts(), label="layout2"))
    k = s1[-1]
    assert_close(xp.matmul(x1, x2), np.matmul(h1, h2), scale=max(k, 1))
    assert_close(x1 @ x2, np.matmul(h1, h2), scale=max(k, 1), err_msg="operator @")


@SETTINGS
@given(data=st.data())
def test_matmul_mixed_dtypes(xp: Any, data: st.DataObject) -> None:
    dt1 = data.draw(acst.dtypes(xp, "numeric"), label="dtype1")
    dt2 = data.draw(acst.dtypes(xp, "numeric"), label="dtype2")
    if np.result_type(dt1, dt2).name not in xp.__array_namespace_info__().dtypes():
        return
    h1 = data.draw(acst.arrays(dt1, (2, 3), _domain(dt1)), label="x1")
    h2 = data.draw(acst.arrays(dt2, (3, 2), _domain(dt2)), label="x2")
    assert_close(xp.matmul(xp.asarray(h1), xp.asarray(h2)), np.matmul(h1, h2), scale=3)


def test_matmul_errors(xp: Any) -> None:
    a = xp.asarray(np.ones((2, 3), np.float32))
    b = xp.asarray(np.ones((4, 5), np.float32))
    with pytest.raises(ValueError) as info:
        xp.matmul(a, b)
    if _generic(xp, "matmul"):
        assert "(2, 3)" in str(info.value) and "(4, 5)" in str(info.value), str(info.value)
    with pytest.raises(ValueError):
        xp.matmul(
            xp.asarray(np.ones((2, 2, 3), np.float32)), xp.asarray(np.ones((3, 3, 4), np.float32))
        )
    with pytest.raises(ValueError):
        xp.matmul(xp.asarray(np.ones(3, np.float32)), xp.asarray(np.ones(4, np.float32)))
    with pytest.raises((ValueError, TypeError)):
        xp.matmul(xp.asarray(np.float32(2.0)), a)  # 0-d operands are not allowed


@st.composite
def tensordot_case(draw: st.DrawFn) -> tuple[tuple[int, ...], tuple[int, ...], Any]:
    """Shapes and an ``axes`` argument (an int or a pair of axis sequences) of a tensordot."""
    contracted = draw(acst.shapes(max_dims=2))
    free1 = draw(acst.shapes(max_dims=4 - len(contracted)))
    free2 = draw(acst.shapes(max_dims=4 - len(contracted)))
    if draw(st.booleans()):
        return (*free1, *contracted), (*contracted, *free2), len(contracted)
    n1, n2 = len(free1) + len(contracted), len(free2) + len(contracted)
    perm1 = draw(st.permutations(range(n1)))
    perm2 = draw(st.permutations(range(n2)))
    shape1 = (*free1, *contracted)
    shape2 = (*contracted, *free2)
    # Axis i of the permuted array is axis perm[i] of the unpermuted one.
    s1 = tuple(shape1[p] for p in perm1)
    s2 = tuple(shape2[p] for p in perm2)
    axes1 = [perm1.index(len(free1) + i) for i in range(len(contracted))]
    axes2 = [perm2.index(i) for i in range(len(contracted))]
    if draw(st.booleans()):
        axes1 = [a - n1 for a in axes1]  # negative axes
    return s1, s2, (axes1, axes2)


@SETTINGS
@given(data=st.data())
def test_tensordot(xp: Any, data: st.DataObject) -> None:
    dtype = data.draw(acst.dtypes(xp, "numeric"), label="dtype")
    s1, s2, axes = data.draw(tensordot_case(), label="case")
    h1 = data.draw(acst.arrays(dtype, s1, _domain(dtype)), label="x1")
    h2 = data.draw(acst.arrays(dtype, s2, _domain(dtype)), label="x2")
    x1 = acst.on_device(xp, h1, data.draw(acst.layouts(), label="layout1"))
    x2 = acst.on_device(xp, h2, data.draw(acst.layouts(), label="layout2"))
    terms = math.prod(s2[:axes]) if isinstance(axes, int) else math.prod(s2[a] for a in axes[1])
    expected = np.tensordot(h1, h2, axes=axes)
    assert_close(xp.tensordot(x1, x2, axes=axes), expected, scale=max(terms, 1))


def test_tensordot_defaults_and_errors(xp: Any) -> None:
    h1 = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    h2 = np.arange(24, dtype=np.float32).reshape(3, 4, 2)
    assert_close(xp.tensordot(xp.asarray(h1), xp.asarray(h2)), np.tensordot(h1, h2))
    assert_close(xp.tensordot(xp.asarray(h1), xp.asarray(h2), axes=0), np.tensordot(h1, h2, axes=0))
    with pytest.raises(ValueError) as info:
        xp.tensordot(xp.asarray(h1), xp.asarray(h2), axes=1)
    if _generic(xp, "tensordot"):
        assert "(2, 3, 4)" in str(info.value) and "(3, 4, 2)" in str(info.value)


@SETTINGS
@given(data=st.data())
def test_vecdot(xp: Any, data: st.DataObject) -> None:
    dtype = data.draw(acst.dtypes(xp, "numeric"), label="dtype")
    (s1, s2), _ = data.draw(acst.broadcastable_shapes(2, min_dims=1), label="shapes")
    # The contracted axis must have one size in both (no broadcasting along it).
    ndim = min(len(s1), len(s2))
    if ndim == 0:
        return
    axis = data.draw(st.integers(-ndim, -1), label="axis")
    size = max(s1[axis], s2[axis])
    s1 = tuple(size if i == len(s1) + axis else s for i, s in enumerate(s1))
    s2 = tuple(size if i == len(s2) + axis else s for i, s in enumerate(s2))
    h1 = data.draw(acst.arrays(dtype, s1, _domain(dtype)), label="x1")
    h2 = data.draw(acst.arrays(dtype, s2, _domain(dtype)), label="x2")
    x1 = acst.on_device(xp, h1, data.draw(acst.layouts(), label="layout1"))
    x2 = acst.on_device(xp, h2, data.draw(acst.layouts(), label="layout2"))
    expected = np.vecdot(h1, h2, axis=axis)  # type: ignore[call-overload]
    assert_close(xp.vecdot(x1, x2, axis=axis), expected, scale=max(size, 1))


def test_vecdot_errors(xp: Any) -> None:
    with pytest.raises(ValueError) as info:
        xp.vecdot(xp.asarray(np.ones((2, 3), np.float32)), xp.asarray(np.ones((2, 4), np.float32)))
    if _generic(xp, "vecdot"):
        assert "(2, 3)" in str(info.value) and "(2, 4)" in str(info.value), str(info.value)


@SETTINGS
@given(data=st.data())
def test_matrix_transpose(xp: Any, data: st.DataObject) -> None:
    dtype = data.draw(acst.dtypes(xp), label="dtype")
    host = data.draw(acst.arrays(dtype, acst.shapes(min_dims=2)), label="x")
    x = acst.on_device(xp, host, data.draw(acst.layouts(), label="layout"))
    assert_close(xp.matrix_transpose(x), np.matrix_transpose(host))


def test_matrix_transpose_needs_two_dimensions(xp: Any) -> None:
    with pytest.raises(ValueError):
        xp.matrix_transpose(xp.asarray(np.ones(3, np.float32)))
