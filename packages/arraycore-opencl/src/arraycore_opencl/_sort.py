"""``sort`` and ``argsort`` on the OpenCL device: a bitonic sorting network over (value, index)
pairs, so that arraycore's derived versions (which run on the host) are not needed here.

Every lane along the sorted axis is padded to a power of two ``p`` and sorted by ``p``'s
``log2(p) * (log2(p) + 1) / 2`` launches of one compare-and-swap kernel, each over all lanes at
once. The order compares values and then the original index, so it is a strict total order and
the result is the stable sort the standard asks for, also when ``descending`` (equal elements
keep their order; ``-0.0`` and ``0.0`` are equal). NaNs go last ascending and first descending,
as arraycore's other backends put them; padding goes last either way.

The program is the ``"sort"`` family of :mod:`arraycore_opencl._codegen` (registered here), built
per dtype on first use.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

import arraycore
from arraycore.backend import normalize_axes

from . import _codegen
from ._runtime import _cl

if TYPE_CHECKING:
    from ._backend import OpenCLBackend

_INT64 = np.dtype("int64")

_SOURCE = """
inline int sorts_before(const T a, const long ia, const T b, const long ib, const long n,
                        const long descending) {
    if (ia >= n) return 0;  /* padding goes last */
    if (ib >= n) return 1;
    const int nan_a = NAN_A, nan_b = NAN_B;
    if (nan_a != nan_b) return descending ? nan_a : nan_b;
    if (nan_a || a == b) return ia < ib;  /* equal values keep their order */
    return descending ? (a > b) : (a < b);
}

__kernel void init_index(const long total, const long p, __global long* idx) {
    const long g = get_global_id(0);
    if (g < total) idx[g] = g % p;
}

/* The stages of distance j < chunk / 2, in local memory: each work-group holds a chunk of one
   lane (a power of two of elements, from 2 per work-item up); stages k_first .. k_last, with j
   from j_first in the first of them, from k / 2 in the others. */
__kernel void bitonic_local(const long p, const long chunk, const long k_first,
                            const long k_last, const long j_first, const long n,
                            const long descending, __global T* key, __global long* idx,
                            __local T* lkey, __local long* lidx) {
    const long lid = get_local_id(0);
    const long ls = get_local_size(0);
    const long start = get_group_id(0) * chunk;
    const long lane_start = start % p;
    for (long q = lid; q < chunk; q += ls) {
        lkey[q] = key[start + q];
        lidx[q] = idx[start + q];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (long k = k_first; k <= k_last; k <<= 1) {
        for (long j = k == k_first ? j_first : k >> 1; j > 0; j >>= 1) {
            for (long q = lid; q < chunk / 2; q += ls) {
                const long low = q & (j - 1);
                const long i = ((q - low) << 1) | low;
                const T a = lkey[i];
                const T b = lkey[i | j];
                const long ia = lidx[i];
                const long ib = lidx[i | j];
                const int swap = ((lane_start + i) & k) == 0
                    ? sorts_before(b, ib, a, ia, n, descending)
                    : sorts_before(a, ia, b, ib, n, descending);
                if (swap) {
                    lkey[i] = b;
                    lkey[i | j] = a;
                    lidx[i] = ib;
                    lidx[i | j] = ia;
                }
            }
            barrier(CLK_LOCAL_MEM_FENCE);
        }
    }
    for (long q = lid; q < chunk; q += ls) {
        key[start + q] = lkey[q];
        idx[start + q] = lidx[q];
    }
}

/* One compare-and-swap stage (block size k, distance j) over every lane of p elements. */
__kernel void bitonic_step(const long pairs, const long half_p, const long j, const long k,
                           const long n, const long descending,
                           __global T* key, __global long* idx) {
    const long g = get_global_id(0);
    if (g >= pairs) return;
    const long lane = g / half_p;
    const long t = g - lane * half_p;
    const long low = t & (j - 1);
    const long i = ((t - low) << 1) | low;  /* the element of the pair with bit j clear */
    const long base = lane * 2 * half_p;
    const T a = key[base + i];
    const T b = key[base + (i | j)];
    const long ia = idx[base + i];
    const long ib = idx[base + (i | j)];
    const int swap = (i & k) == 0 ? sorts_before(b, ib, a, ia, n, descending)
                                  : sorts_before(a, ia, b, ib, n, descending);
    if (swap) {
        key[base + i] = b;
        key[base + (i | j)] = a;
        idx[base + i] = ib;
        idx[base + (i | j)] = ia;
    }
}
"""


def sort_program(dt: str, all_dtypes: list[str]) -> str:
    """``init_index`` and ``bitonic_step`` for values of dtype ``dt``."""
    floating = dt in ("float16", "float32", "float64")
    return (
        f"#define T {_codegen.CTYPES[dt]}\n"
        f"#define NAN_A {'isnan(a)' if floating else '0'}\n"
        f"#define NAN_B {'isnan(b)' if floating else '0'}\n" + _SOURCE
    )


_codegen.FAMILIES.setdefault("sort", sort_program)


#: Most elements one work-group sorts in local memory.
MAX_CHUNK = 4096


def local_chunk(rt: Any, dtype: np.dtype, p: int) -> int:
    """Elements per work-group of the local-memory stages for lanes of ``p`` (a power of two),
    or 0 to run every stage from global memory (lanes shorter than two per work-item)."""
    budget = int(rt.cl_device.local_mem_size) // 2 // (dtype.itemsize + 8)
    chunk = min(p, MAX_CHUNK, 1 << max(budget.bit_length() - 1, 0))
    return chunk if chunk >= 2 * rt.local_size else 0


def namespace(bk: OpenCLBackend) -> Any:
    """The arraycore namespace of ``bk``'s arrays (whose checks the overrides run first)."""
    found = getattr(bk, "_sort_namespace", None)
    if found is None:
        found = arraycore.namespace_of(bk._empty((0,), _INT64))
        bk._sort_namespace = found  # type: ignore[attr-defined]
    return found


def sorted_lanes(bk: OpenCLBackend, op: str, x: Any, axis: int, descending: bool) -> Any:
    """``(sorted values, int64 order)`` of ``x`` along ``axis``, each of ``x``'s shape."""
    namespace(bk)._check(op, x)  # arrays of another backend or device: arraycore's error
    if len(x.shape) == 0:
        raise ValueError(f"{op}: x must have at least one dimension, got a 0-d array")
    (ax,) = normalize_axes(axis, len(x.shape), op)
    perm = (*(a for a in range(len(x.shape)) if a != ax), ax)
    back = tuple(int(a) for a in np.argsort(perm))
    moved = bk.permute_dims(x, perm)
    n, lanes = x.shape[ax], math.prod(moved.shape[:-1])
    if n == 0 or lanes == 0:
        return bk.astype(x, x.dtype), bk.full(tuple(x.shape), 0, _INT64)
    p = 1 << (n - 1).bit_length()
    keys = bk._empty((lanes, p), x.dtype)
    bk.setitem(keys, (slice(None), slice(0, n)), bk.reshape(moved, (lanes, n)))
    idx = bk._empty((lanes, p), _INT64)
    rt, name = bk.rt, x.dtype.name
    rt.launch(rt.kernel("sort", name, "init_index"), lanes * p, np.int64(lanes * p), np.int64(p),
              idx._buf)  # fmt: skip
    step, pairs = rt.kernel("sort", name, "bitonic_step"), lanes * p // 2
    chunk = local_chunk(rt, x.dtype, p)  # what one work-group sorts in local memory
    local = rt.kernel("sort", name, "bitonic_local") if chunk else None

    def in_local(k_first: int, k_last: int, j_first: int) -> None:
        cl = _cl()
        rt.launch(local, lanes * p // chunk * rt.local_size, np.int64(p), np.int64(chunk),
                  np.int64(k_first), np.int64(k_last), np.int64(j_first), np.int64(n),
                  np.int64(bool(descending)), keys._buf, idx._buf,
                  cl.LocalMemory(chunk * x.dtype.itemsize), cl.LocalMemory(chunk * 8))  # fmt: skip

    k = 2
    if local is not None:  # every block of up to `chunk` elements, in one launch
        in_local(2, chunk, 1)
        k = 2 * chunk
    while k <= p:
        j = k // 2
        while j and (local is None or j >= chunk):
            rt.launch(step, pairs, np.int64(pairs), np.int64(p // 2), np.int64(j), np.int64(k),
                      np.int64(n), np.int64(bool(descending)), keys._buf, idx._buf)  # fmt: skip
            j //= 2
        if j:
            in_local(k, k, j)
        k *= 2
    whole = (slice(None), slice(0, n))
    return tuple(
        bk.permute_dims(bk.reshape(bk.getitem(a, whole), tuple(moved.shape)), back)
        for a in (keys, idx)
    )


def overrides(bk: OpenCLBackend) -> dict[str, Callable[..., Any]]:
    """``sort`` and ``argsort`` of the namespace, on ``bk``'s device."""

    def sort(x: Any, /, *, axis: int = -1, descending: bool = False, stable: bool = True) -> Any:
        """``x`` sorted along ``axis`` on the device (stable; NaNs last, first descending)."""
        return sorted_lanes(bk, "sort", x, axis, descending)[0]

    def argsort(x: Any, /, *, axis: int = -1, descending: bool = False, stable: bool = True) -> Any:
        """Indices (int64) that sort ``x`` along ``axis``, computed on the device (stable)."""
        return sorted_lanes(bk, "argsort", x, axis, descending)[1]

    return {"sort": sort, "argsort": argsort}
