"""Matrix products that a CUDA graph can capture: cuBLAS called through ctypes.

CuPy 14 refuses every cuBLAS call while a stream captures (its wrappers set the handle's stream
first, and that raises ``NotImplementedError`` on a capturing stream: cupy/cupy#6290), so
``cupy.matmul`` cannot be part of a captured step. cuBLAS itself captures its GEMMs (the CUDA
graphs section of the cuBLAS documentation); what it needs is a handle bound to the capturing
stream and a workspace of its own that outlives the graph, since a workspace cuBLAS allocates
lazily inside a capture is freed under the replay (pytorch/pytorch#83461).

This module binds the ``libcublas`` that CuPy has loaded into the process (found in
``/proc/self/maps``, so the same library and version CuPy uses) with ctypes: one handle per
device, set to the capture stream, with a fixed workspace (:data:`WORKSPACE_BYTES`, 32 MiB, the
size cuBLAS recommends on Hopper), and ``cublasGemmEx`` / ``cublasGemmStridedBatchedEx`` with the
compute types CuPy uses (``CUBLAS_COMPUTE_32F`` for float32 and half precision, TF32 only where
``CUPY_TF32`` allows it; ``CUBLAS_COMPUTE_64F`` for float64). Row-major products are the usual
column-major identity ``C^T = B^T A^T``; an operand that is the transpose of a contiguous matrix
is passed with ``CUBLAS_OP_T``, any other layout is copied contiguous first (a captured kernel).

Only :class:`arraycore_cuda._graphs.Graphs` uses it, while a capture is under way: eager steps
keep ``cupy.matmul``. ``verify.py --only capture`` checks it against ``cupy.matmul`` on a GPU.
"""

from __future__ import annotations

import ctypes
import itertools
import os
from typing import Any

import numpy as np

#: The workspace each handle is given (cuBLAS's recommendation for Hopper; 4 MiB elsewhere).
WORKSPACE_BYTES = 32 << 20

_OP_N, _OP_T = 0, 1
_CUDA_R_32F, _CUDA_R_64F, _CUDA_R_16F, _CUDA_R_16BF = 0, 1, 2, 14
_COMPUTE_32F, _COMPUTE_64F, _COMPUTE_32F_FAST_TF32 = 68, 70, 77
_GEMM_DEFAULT = -1

_DATA_TYPES = {"float32": _CUDA_R_32F, "float64": _CUDA_R_64F, "float16": _CUDA_R_16F}


class CublasError(RuntimeError):
    """A cuBLAS call returned a status other than CUBLAS_STATUS_SUCCESS."""


def find_library() -> str:
    """The path of the ``libcublas`` mapped into this process (CuPy's), or an error saying so."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.rstrip("\n").split(" ", 5)[-1].strip()
                name = os.path.basename(path)
                if name.startswith("libcublas.so"):
                    return path
    except OSError as exc:
        raise CublasError(f"cannot read /proc/self/maps to find libcublas: {exc}") from exc
    raise CublasError(
        "libcublas is not loaded in this process (CuPy loads it at its first matrix product)"
    )


class Library:
    """The cuBLAS functions this module calls, with their ctypes signatures."""

    def __init__(self, path: str) -> None:
        self.path = path
        lib = ctypes.CDLL(path)
        vp, c_int, ll = ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong
        self.create = lib.cublasCreate_v2
        self.create.argtypes = [ctypes.POINTER(vp)]
        self.destroy = lib.cublasDestroy_v2
        self.destroy.argtypes = [vp]
        self.set_stream = lib.cublasSetStream_v2
        self.set_stream.argtypes = [vp, vp]
        self.set_workspace = lib.cublasSetWorkspace_v2
        self.set_workspace.argtypes = [vp, vp, ctypes.c_size_t]
        self.gemm = lib.cublasGemmEx
        self.gemm.argtypes = [
            vp, c_int, c_int, c_int, c_int, c_int,  # handle, transa, transb, m, n, k
            vp, vp, c_int, c_int,  # alpha, A, Atype, lda
            vp, c_int, c_int,  # B, Btype, ldb
            vp, vp, c_int, c_int,  # beta, C, Ctype, ldc
            c_int, c_int,  # computeType, algo
        ]  # fmt: skip
        self.gemm_batched = lib.cublasGemmStridedBatchedEx
        self.gemm_batched.argtypes = [
            vp, c_int, c_int, c_int, c_int, c_int,
            vp, vp, c_int, c_int, ll,  # alpha, A, Atype, lda, strideA
            vp, c_int, c_int, ll,  # B, Btype, ldb, strideB
            vp, vp, c_int, c_int, ll,  # beta, C, Ctype, ldc, strideC
            c_int, c_int, c_int,  # batchCount, computeType, algo
        ]  # fmt: skip
        for fn in (self.create, self.destroy, self.set_stream, self.set_workspace, self.gemm):
            fn.restype = c_int
        self.gemm_batched.restype = c_int


def _check(status: int, what: str) -> None:
    if status != 0:
        raise CublasError(f"{what} returned cuBLAS status {status}")


def compute_type(dtype: np.dtype) -> int:
    """The cuBLAS compute type CuPy's ``matmul`` uses for ``dtype``."""
    if dtype == np.float64:
        return _COMPUTE_64F
    tf32 = os.environ.get("CUPY_TF32", "0").strip() not in ("", "0")
    return _COMPUTE_32F_FAST_TF32 if tf32 and dtype == np.float32 else _COMPUTE_32F


class Gemm:
    """Capturable ``matmul`` on one device: a cuBLAS handle, its workspace and stream."""

    def __init__(self, cp: Any, library: Library) -> None:
        self._cp = cp
        self.lib = library
        handle = ctypes.c_void_p()
        _check(library.create(ctypes.byref(handle)), "cublasCreate")
        self.handle = handle
        self.workspace = cp.empty((WORKSPACE_BYTES,), dtype=np.uint8)
        self._stream: int | None = None

    def bind(self, stream_ptr: int) -> None:
        """Run later products on ``stream_ptr`` (then give the handle its workspace again:
        setting the stream resets it to cuBLAS's default pool)."""
        if self._stream == stream_ptr:
            return
        _check(self.lib.set_stream(self.handle, ctypes.c_void_p(stream_ptr)), "cublasSetStream")
        _check(
            self.lib.set_workspace(
                self.handle, ctypes.c_void_p(int(self.workspace.data.ptr)), WORKSPACE_BYTES
            ),
            "cublasSetWorkspace",
        )
        self._stream = stream_ptr

    def matmul(self, x1: Any, x2: Any) -> Any:
        """``cupy.matmul(x1, x2)`` for float16/32/64 operands of one dtype (1-D, 2-D and
        batched, broadcasting the batch axes), as cuBLAS GEMMs on the bound stream."""
        cp = self._cp
        dtype = np.dtype(x1.dtype)
        if dtype != x2.dtype or dtype.name not in _DATA_TYPES:
            raise CublasError(
                f"matmul of {x1.dtype} and {x2.dtype} has no capturable cuBLAS product here"
            )
        a, b = x1, x2
        if a.ndim == 0 or b.ndim == 0:
            raise ValueError("matmul: operands must have at least one dimension")
        vector_a, vector_b = a.ndim == 1, b.ndim == 1
        if vector_a:
            a = a.reshape(1, a.shape[0])
        if vector_b:
            b = b.reshape(b.shape[0], 1)
        m, k = a.shape[-2:]
        k2, n = b.shape[-2:]
        if k != k2:
            raise ValueError(f"matmul: shapes {x1.shape} and {x2.shape} do not align")
        batch = tuple(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
        out = cp.empty((*batch, m, n), dtype=dtype)
        count = int(np.prod(batch, dtype=np.int64)) if batch else 1
        if out.size and k == 0:
            out.fill(0)
        elif out.size:
            self._products(a, b, out, batch, count, m, n, k)
        shape = out.shape
        if vector_a:
            shape = shape[:-2] + shape[-1:]
        if vector_b:
            shape = shape[:-1]
        return out.reshape(shape) if shape != out.shape else out

    def _operand(self, x: Any, batch: tuple[int, ...]) -> tuple[Any, int, int, int]:
        """``(array, op, ld, batch stride)`` of one operand of a product, its last two axes a
        matrix of rows (op N) or the transpose of one (op T); copied contiguous otherwise."""
        cp, item = self._cp, x.dtype.itemsize
        rows, cols = x.shape[-2:]
        lead = x.shape[:-2]
        if lead != batch and lead:  # a batch axis broadcast other than wholesale: copy it out
            x = cp.ascontiguousarray(cp.broadcast_to(x, (*batch, rows, cols)))
            lead = batch
        s_rows, s_cols = x.strides[-2:]
        if s_cols == item and (s_rows == cols * item or rows == 1):
            op, ld = _OP_N, cols
        elif s_rows == item and (s_cols == rows * item or cols == 1):
            op, ld = _OP_T, rows
        else:
            x = cp.ascontiguousarray(x)
            op, ld = _OP_N, cols
        if not lead:
            return x, op, max(ld, 1), 0
        # the batch axes (those longer than 1) must step through memory as one axis
        dims = [(size, st // item) for size, st in zip(lead, x.strides[:-2]) if size > 1]
        uniform = all(
            outer[1] == inner[1] * inner[0] for outer, inner in itertools.pairwise(dims)
        ) and all(st >= 0 for _, st in dims)
        if not uniform:
            x = cp.ascontiguousarray(x)
            op, ld = _OP_N, cols
            dims = [(size, st // item) for size, st in zip(lead, x.strides[:-2]) if size > 1]
        return x, op, max(ld, 1), dims[-1][1] if dims else 0

    def _products(
        self, a: Any, b: Any, out: Any, batch: tuple[int, ...], count: int, m: int, n: int, k: int
    ) -> None:
        dtype = np.dtype(out.dtype)
        a, op_a, lda, stride_a = self._operand(a, batch)
        b, op_b, ldb, stride_b = self._operand(b, batch)
        data = _DATA_TYPES[dtype.name]
        compute = compute_type(dtype)
        scalar = ctypes.c_double if compute == _COMPUTE_64F else ctypes.c_float
        one, zero = scalar(1.0), scalar(0.0)
        vp = ctypes.c_void_p
        ptr_a, ptr_b, ptr_c = (vp(int(x.data.ptr)) for x in (a, b, out))
        # row-major C = A @ B is column-major C^T = B^T @ A^T: B first, then A
        if count == 1:
            status = self.lib.gemm(
                self.handle, op_b, op_a, n, m, k, ctypes.byref(one),
                ptr_b, data, ldb, ptr_a, data, lda,
                ctypes.byref(zero), ptr_c, data, n, compute, _GEMM_DEFAULT,
            )  # fmt: skip
            _check(status, "cublasGemmEx")
            return
        status = self.lib.gemm_batched(
            self.handle, op_b, op_a, n, m, k, ctypes.byref(one),
            ptr_b, data, ldb, stride_b, ptr_a, data, lda, stride_a,
            ctypes.byref(zero), ptr_c, data, n, m * n, count, compute, _GEMM_DEFAULT,
        )  # fmt: skip
        _check(status, "cublasGemmStridedBatchedEx")

    def close(self) -> None:
        if self.handle.value:
            self.lib.destroy(self.handle)
            self.handle = ctypes.c_void_p()
