"""CLBlast GEMM for the OpenCL backend's ``matmul`` (floats, above ``_SMALL_GEMM``, where
arraycore's kernels of :mod:`._cpu_gemm` do not run it: ``ARRAYCORE_OPENCL_GEMM``), with the
kernel parameters :mod:`._gemm_tuning` chose for the shape."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from arraycore.backend import dtype_name

from . import _cpu_gemm, _runtime
from ._array import OpenCLArray
from ._gemm_tuning import shape_key

if TYPE_CHECKING:
    from ._backend import OpenCLBackend


_LIGHT: list[bool] = []
#: A product with a reduction this long (and a small output) is split into ``_SPLIT_K`` slices
#: of ``k`` run as one strided batch, then summed: CLBlast's kernels on PoCL parallelise over
#: the output, which a filter gradient has little of (16 x 144 from k = 32768: 16.2 -> 9.9
#: ms; 32 x 288 x 8192: 5.1 -> 3.4 ms).
_SPLIT_K = 8
_SPLIT_MIN_K = 8192
_SPLIT_MAX_OUTPUT = 1 << 16


def split_k(rows: int, n: int, k: int) -> int:
    """How many slices of ``k`` the product ``(rows, k) @ (k, n)`` runs as (1: no split)."""
    if k < _SPLIT_MIN_K or rows * n > _SPLIT_MAX_OUTPUT or k % _SPLIT_K or k < 8 * max(rows, n):
        return 1
    return _SPLIT_K


def operand_view(cla: Any, queue: Any, buf: Any, dtype: Any) -> Any:
    """A ``pyopencl.array.Array`` over the whole of ``buf`` as pyclblast reads it (its
    ``shape``, ``dtype`` and ``base_data``; offsets and leading dimensions go separately).

    ``Array(...)`` validates and sets up far more than that: 30 us a call on PoCL, three per
    GEMM, about 6 ms of an LSTM step's 70 GEMMs. The view sets the three attributes on a bare
    instance (1 us), and falls back to the constructor for good if a pyopencl version refuses.
    """
    shape = (1, buf.size // dtype.itemsize)
    if not _LIGHT or _LIGHT[0]:
        try:
            view = cla.Array.__new__(cla.Array)
            view.shape, view.dtype, view.base_data = shape, dtype, buf
            if not _LIGHT:
                _LIGHT.append(view.base_data is buf and view.shape == shape)
            if _LIGHT[0]:
                return view
        except (AttributeError, TypeError):
            _LIGHT[:] = [False]
    return cla.Array(queue, shape, dtype, data=buf)


def gemm_operand(bk: OpenCLBackend, x: OpenCLArray) -> tuple[OpenCLArray, bool, int]:
    """(array, transposed, leading dimension) of a 2-D operand, copying only if needed."""
    found = _cpu_gemm.layout(x, *x.shape)
    if found is not None:
        return x, *found
    return bk.astype(x, x.dtype), False, max(x.shape[1], 1)


def gemm(
    bk: OpenCLBackend,
    x1: OpenCLArray,
    x2: OpenCLArray,
    out: OpenCLArray,
    batch: tuple[int, ...],
    m: int,
    n: int,
    k: int,
) -> None:
    """``out = x1 @ x2`` with CLBlast: one GEMM when ``x2`` has no batch, else a strided batch
    (``matmul`` sends products to :func:`._cpu_gemm.gemm` instead where those kernels run)."""
    import pyclblast

    cla = _runtime._cl().array
    dt = out.dtype
    name = dtype_name(dt)
    q = bk.rt.queue
    tuner = bk.rt.gemm_tuner()

    def wrap(x: OpenCLArray) -> Any:
        return operand_view(cla, q, x._buf, dt)

    if math.prod(x2.shape[:-2]) == 1:
        # One GEMM: the batch axes of x1 fold into its rows.
        b2 = bk.reshape(x2, (k, n)) if x2.ndim != 2 else x2
        rows = math.prod(batch) * m
        a2 = x1
        if x1.ndim != 2:
            a2 = bk.reshape(bk.broadcast_to(x1, (*batch, m, k)), (rows, k))
        a2, at, lda = gemm_operand(bk, a2)
        b2, bt, ldb = gemm_operand(bk, b2)
        args = (q, rows, n, k, wrap(a2), wrap(b2), wrap(out))
        opts = dict(
            a_ld=lda, b_ld=ldb, c_ld=n, a_transp=at, b_transp=bt, a_offset=a2._offset,
            b_offset=b2._offset,
        )  # fmt: skip
        parts = split_k(rows, n, k)
        if parts > 1:
            _split_gemm(bk, (a2, at, lda), (b2, bt, ldb), out, rows, n, k, parts)
            return
        key = shape_key(name, rows, n, k, at, bt)
        bk.rt.queued(
            lambda: tuner.run(key, name, lambda: pyclblast.gemm(*args, **opts), q.finish),
            a2._buf,
            b2._buf,
            out._buf,
        )
        return
    a = bk._contiguous(bk.broadcast_to(x1, (*batch, m, k)))
    b = bk._contiguous(bk.broadcast_to(x2, (*batch, k, n)))
    opts = dict(a_ld=k, b_ld=n, c_ld=n, a_stride=m * k, b_stride=k * n, c_stride=m * n)
    _strided_batch(bk, (m, n, k, math.prod(batch)), (a, False), (b, False), out, opts)


def _strided_batch(
    bk: OpenCLBackend,
    sizes: tuple[int, int, int, int],
    a: tuple[OpenCLArray, bool],
    b: tuple[OpenCLArray, bool],
    c: OpenCLArray,
    opts: dict[str, int],
) -> None:
    """CLBlast's ``gemmStridedBatched`` of ``sizes = (m, n, k, batch)`` on ``a`` and ``b``
    (each with its transpose flag) into ``c``, leading dimensions and strides in ``opts``,
    under the tuner's choice for the shape."""
    import pyclblast

    (a2, at), (b2, bt) = a, b
    m, n, k, nb = sizes
    cla = _runtime._cl().array
    dt = c.dtype
    name = dtype_name(dt)
    q = bk.rt.queue
    args = [q, m, n, k, nb, *(operand_view(cla, q, x._buf, dt) for x in (a2, b2, c))]
    kw = dict(opts, a_transp=at, b_transp=bt)
    kw.update(a_offset=a2._offset, b_offset=b2._offset, c_offset=c._offset)
    key = shape_key(name, m, n, k, at, bt, nb)
    tuner = bk.rt.gemm_tuner()
    bk.rt.queued(
        lambda: tuner.run(key, name, lambda: pyclblast.gemmStridedBatched(*args, **kw), q.finish),
        a2._buf,
        b2._buf,
        c._buf,
    )


def _split_gemm(
    bk: OpenCLBackend,
    a: tuple[OpenCLArray, bool, int],
    b: tuple[OpenCLArray, bool, int],
    out: OpenCLArray,
    rows: int,
    n: int,
    k: int,
    parts: int,
) -> None:
    """``out = A @ B`` as ``parts`` products over consecutive slices of ``k`` (one strided
    batch: slice ``p`` of A starts ``p * kc`` columns in, of B ``p * kc`` rows down), summed."""
    (a2, at, lda), (b2, bt, ldb) = a, b
    dt = out.dtype
    kc = k // parts
    partial = bk._empty((parts, rows, n), dt)
    opts = dict(
        a_ld=lda, b_ld=ldb, c_ld=n, c_stride=rows * n,
        a_stride=kc * lda if at else kc, b_stride=kc if bt else kc * ldb,
    )  # fmt: skip
    _strided_batch(bk, (rows, n, kc, parts), (a2, at), (b2, bt), partial, opts)
    _cpu_gemm.sum_slices(bk, partial, out)
