"""The arguments :mod:`arraycore_cuda._cublas` hands cuBLAS, checked without a GPU.

A captured step's products go through ``cublasGemmEx`` / ``cublasGemmStridedBatchedEx`` called
directly (CuPy refuses its own cuBLAS calls during a capture). What can go wrong on the host side
is the translation of a row-major, possibly transposed or batched NumPy-style product into
cuBLAS's column-major arguments: operation flags, leading dimensions, batch strides, operand
order. Here those exact calls are carried out by a column-major GEMM written from cuBLAS's
documented semantics over host memory (the pointers are host addresses), and the products must
equal ``numpy.matmul``. Whether cuBLAS on a GPU computes them, and captures them, is what
``verify.py --only capture`` checks on a GPU; nothing here claims that.
"""

from __future__ import annotations

import ctypes
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from arraycore_cuda import _cublas

_TYPES = {_cublas._CUDA_R_32F: np.float32, _cublas._CUDA_R_64F: np.float64}


class HostArray(np.ndarray):
    """A NumPy array whose ``.data.ptr`` is its address, as a CuPy array's is."""

    @property
    def data(self) -> Any:  # type: ignore[override]
        return SimpleNamespace(ptr=self.ctypes.data)


def _host(a: np.ndarray) -> HostArray:
    return np.asarray(a).view(HostArray)


class HostModule:
    """The three CuPy functions :class:`~arraycore_cuda._cublas.Gemm` uses, on host arrays."""

    float32 = np.float32

    @staticmethod
    def empty(shape: Any, dtype: Any) -> HostArray:
        return _host(np.empty(shape, dtype=dtype))

    @staticmethod
    def ascontiguousarray(a: Any) -> HostArray:
        return _host(np.ascontiguousarray(a))

    @staticmethod
    def broadcast_to(a: Any, shape: Any) -> HostArray:
        return _host(np.broadcast_to(a, shape))


def _matrix(ptr: Any, dtype: Any, op: int, rows: int, cols: int, ld: int) -> np.ndarray:
    """The column-major ``rows x cols`` operand ``op(X)`` of a GEMM at ``ptr`` with ``ld``."""
    stored_rows, stored_cols = (rows, cols) if op == _cublas._OP_N else (cols, rows)
    count = ld * (stored_cols - 1) + stored_rows if stored_cols else 0
    flat = np.ctypeslib.as_array(
        (ctypes.c_byte * (count * np.dtype(dtype).itemsize)).from_address(ptr.value)
    ).view(dtype)
    stored = np.lib.stride_tricks.as_strided(
        flat,
        (stored_rows, stored_cols),
        (np.dtype(dtype).itemsize, ld * np.dtype(dtype).itemsize),
    )
    return stored if op == _cublas._OP_N else stored.T


class HostLibrary:
    """``cublasGemmEx`` and ``cublasGemmStridedBatchedEx`` as cuBLAS documents them, on host
    memory; records every call."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def gemm(self, handle, ta, tb, m, n, k, alpha, a, at, lda, b, bt, ldb, beta, c, ct, ldc,
             compute, algo) -> int:  # fmt: skip
        self.calls.append("gemm")
        self._one(ta, tb, m, n, k, a, lda, b, ldb, c, ldc, _TYPES[ct])
        return 0

    def gemm_batched(self, handle, ta, tb, m, n, k, alpha, a, at, lda, sa, b, bt, ldb, sb, beta,
                     c, ct, ldc, sc, count, compute, algo) -> int:  # fmt: skip
        self.calls.append(f"batched x{count}")
        item = np.dtype(_TYPES[ct]).itemsize
        for i in range(count):
            self._one(
                ta, tb, m, n, k,
                ctypes.c_void_p(a.value + i * sa * item), lda,
                ctypes.c_void_p(b.value + i * sb * item), ldb,
                ctypes.c_void_p(c.value + i * sc * item), ldc, _TYPES[ct],
            )  # fmt: skip
        return 0

    @staticmethod
    def _one(ta, tb, m, n, k, a, lda, b, ldb, c, ldc, dtype) -> None:  # type: ignore[no-untyped-def]
        left = _matrix(a, dtype, ta, m, k, lda)
        right = _matrix(b, dtype, tb, k, n, ldb)
        out = _matrix(c, dtype, _cublas._OP_N, m, n, ldc)
        out[...] = left.astype(np.float64) @ right.astype(np.float64)


def _gemm() -> tuple[_cublas.Gemm, HostLibrary]:
    gemm = object.__new__(_cublas.Gemm)
    library = HostLibrary()
    gemm._cp, gemm.lib, gemm.handle = HostModule, library, ctypes.c_void_p()  # type: ignore[assignment]
    return gemm, library


RNG = np.random.default_rng(0)


def _operand(shape: tuple[int, ...], layout: str, dtype: Any) -> np.ndarray:
    """An array of ``shape`` laid out as ``layout``: contiguous, the transpose of a contiguous
    matrix, a strided slice, or a batch broadcast with stride 0."""
    if layout == "transposed":
        return np.swapaxes(RNG.standard_normal((*shape[:-2], shape[-1], shape[-2])), -1, -2).astype(
            dtype
        )
    if layout == "sliced":
        return RNG.standard_normal((*shape[:-1], 2 * shape[-1])).astype(dtype)[..., ::2]
    if layout == "broadcast":
        return np.broadcast_to(RNG.standard_normal(shape[1:]).astype(dtype), shape)
    return RNG.standard_normal(shape).astype(dtype)


CASES = [
    ((5, 7), (7, 3)),
    ((1, 7), (7, 3)),
    ((5, 1), (1, 3)),
    ((4, 5, 7), (7, 3)),
    ((4, 5, 7), (4, 7, 3)),
    ((2, 3, 5, 7), (2, 3, 7, 4)),
    ((7,), (7, 3)),
    ((5, 7), (7,)),
    ((4, 5, 7), (1, 7, 3)),
    ((6, 0), (0, 3)),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(("left", "right"), CASES)
@pytest.mark.parametrize("layouts", [("c", "c"), ("transposed", "c"), ("c", "transposed"),
                                     ("sliced", "transposed"), ("broadcast", "c")])  # fmt: skip
def test_products_equal_numpy(left: Any, right: Any, layouts: Any, dtype: Any) -> None:
    la, lb = layouts
    if (la != "c" and len(left) < 2) or (lb != "c" and len(right) < 2):
        pytest.skip("a vector has one layout")
    if "broadcast" in (la, lb) and len(left) < 3:
        pytest.skip("broadcasting needs a batch axis")
    a, b = _operand(left, la, dtype), _operand(right, lb, dtype)
    gemm, library = _gemm()
    got = gemm.matmul(_host(a), _host(b))
    expected = np.matmul(a.astype(np.float64), b.astype(np.float64))
    assert got.shape == expected.shape
    np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-5, atol=1e-5)
    if 0 not in (*left, *right):
        assert library.calls, "no cuBLAS call was made"


def test_a_contiguous_batch_is_one_strided_call() -> None:
    gemm, library = _gemm()
    gemm.matmul(
        _host(_operand((8, 5, 7), "c", np.float32)), _host(_operand((8, 7, 3), "c", np.float32))
    )
    assert library.calls == ["batched x8"]
    gemm.matmul(
        _host(_operand((5, 7), "transposed", np.float32)), _host(_operand((7, 3), "c", np.float32))
    )
    assert library.calls[-1] == "gemm"  # a transposed operand is an op flag, not a copy


def test_other_dtypes_and_bad_shapes_are_refused() -> None:
    gemm, _ = _gemm()
    with pytest.raises(_cublas.CublasError, match="int64"):
        gemm.matmul(_host(np.ones((2, 2), np.int64)), _host(np.ones((2, 2), np.int64)))
    with pytest.raises(ValueError, match="do not align"):
        gemm.matmul(_host(np.ones((2, 3), np.float32)), _host(np.ones((2, 3), np.float32)))


def test_compute_types_follow_cupy(monkeypatch: Any) -> None:
    monkeypatch.delenv("CUPY_TF32", raising=False)
    assert _cublas.compute_type(np.dtype(np.float32)) == _cublas._COMPUTE_32F
    assert _cublas.compute_type(np.dtype(np.float64)) == _cublas._COMPUTE_64F
    assert _cublas.compute_type(np.dtype(np.float16)) == _cublas._COMPUTE_32F
    monkeypatch.setenv("CUPY_TF32", "1")
    assert _cublas.compute_type(np.dtype(np.float32)) == _cublas._COMPUTE_32F_FAST_TF32


def test_no_libcublas_says_so() -> None:
    """Without CuPy's library in this process, the error names what is missing."""
    with pytest.raises(_cublas.CublasError, match="libcublas is not loaded"):
        _cublas.find_library()
