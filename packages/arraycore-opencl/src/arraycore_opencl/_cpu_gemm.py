"""arraycore's own GEMM kernels for CPU OpenCL devices (PoCL): register tiles, no local sharing.

CLBlast's kernels are written for GPUs: work-groups sharing tiles through local memory, each
work-item a few outputs. PoCL runs a work-group's items one after another on one core, so its
best tuned tilings reached 17-65 GFLOP/s on the suite's products (2-core Xeon with AVX-512,
2026-11-28), against 140-270 for NumPy's BLAS. The kernels here are written the way CPU BLAS
micro-kernels are: a work-group of one work-item computes register tiles of the output over the
whole ``k``, its accumulators named variables (an array would stay in memory under PoCL), with
vector loads of ``W`` consecutive items where the operand has them:

* ``gemm_nn`` and ``gemm_tn`` (rows of ``B`` contiguous): a work-item owns two vectors' worth of
  columns (a panel) and a block of ``mb`` rows. For each ``KC`` steps of ``k`` it packs its
  panel of ``B`` into local memory (consecutive, so a power-of-two row stride, as a
  convolution's columns have, cannot map every row to the same cache sets), then runs each
  ``MR``-row tile of its block over them: two vector loads from the panel and ``MR`` items of
  ``A`` broadcast (from ``MR`` rows of ``A``, or ``MR`` consecutive items of a column of a
  transposed ``A``) for ``2 * MR`` vector FMAs per step, the tile's sums carried in ``C``
  between blocks of ``k``. Blocks of rows are as tall as leaves at least ``_ITEMS_PER_UNIT``
  work-items per compute unit.
* ``gemm_nt`` (``B`` transposed in memory: a column of ``B`` is contiguous, as a row of ``A``
  is): a work-item computes ``DR x DS`` dot products, each a vector of ``k`` at a time, summed
  across the vector at the end.

Edge tiles read clamped rows and masked columns and store only what is inside the output. A
batch of products is the second dimension of the launch, with a stride per operand (0 for one
the batch shares). A single product with few panels and rows and a long ``k`` (a convolution's
filter gradient) runs its slices of ``k`` as that batch, into partial products summed after.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from ._array import OpenCLArray
from ._runtime import _cl

if TYPE_CHECKING:
    from ._backend import OpenCLBackend

_CTYPE = {"float32": "float", "float64": "double"}
#: The dtypes these kernels compute (half precision goes to CLBlast).
DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
#: Steps of ``k`` whose columns of ``B`` a work-item packs at a time (KC x 2W items: 16 KB of
#: float32 with AVX-512, within L1).
KC = 128
#: Work-items to aim for per compute unit: a product with fewer column panels than that splits
#: its rows into more blocks.
_ITEMS_PER_UNIT = 4


def shape_for(device: Any, dtype: str) -> tuple[int, int, int, int]:
    """``(W, MR, DR, DS)`` for ``dtype`` on ``device``: the vector width (the device's native
    width, 4 to 16 items) and the tile sizes its vector registers hold (32 of 64 bytes with
    AVX-512; 16 of 32 bytes with AVX2)."""
    native = (
        device.native_vector_width_double
        if dtype == "float64"
        else device.native_vector_width_float
    )
    width = 16 if native >= 16 else 8 if native >= 8 else 4
    wide = width * np.dtype(dtype).itemsize >= 64
    return width, (8 if wide else 4), 4, (4 if wide else 2)


def source(dtype: str, width: int, mr: int, dr: int, ds: int) -> str:
    """OpenCL C of the three kernels for ``dtype``."""
    t = _CTYPE[dtype]
    v = f"{t}{width}"
    w = width
    params = (
        "const long M, const long N, const long K,"
        f" __global const {t} *A, const long a_off, const long lda, const long a_bs,"
        f" __global const {t} *B, const long b_off, const long ldb, const long b_bs,"
        f" __global {t} *C, const long c_off, const long ldc, const long c_bs"
    )
    fp64 = "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n" if dtype == "float64" else ""
    helpers = f"""{fp64}
/* W items from p, those at or past rem read as zero */
inline {v} load_tail(const __global {t} *p, const long rem) {{
    {t} tmp[{w}];
    for (int l = 0; l < {w}; l++) tmp[l] = l < rem ? p[l] : ({t})0;
    return vload{w}(0, tmp);
}}
/* store the first rem (<= W) items of x at p */
inline void store_part(__global {t} *p, const {v} x, const long rem) {{
    if (rem >= {w}) {{ vstore{w}(x, 0, p); return; }}
    {t} tmp[{w}];
    vstore{w}(x, 0, tmp);
    for (int l = 0; l < rem; l++) p[l] = tmp[l];
}}
inline {t} hsum(const {v} x) {{
{_hsum(t, w)}
}}
"""
    rows = range(mr)
    decl = "\n".join(f"    {v} c{r}0, c{r}1;" for r in rows)

    def outer(transposed_a: bool) -> str:
        if transposed_a:  # A stored (K, M): MR consecutive items of column p
            arow = "\n".join(f"            const long q{r} = min(i0 + {r}, M - 1);" for r in rows)
            a_at = "A[(kc + p) * lda + q{r}]"
        else:
            arow = "\n".join(
                f"            const __global {t} *a{r} = A + min(i0 + {r}, M - 1) * lda + kc;"
                for r in rows
            )
            a_at = "a{r}[p]"
        fmas = "\n".join(
            f"                {{ const {v} a = ({v})({a_at.format(r=r)});"
            f" c{r}0 = fma(a, b0, c{r}0); c{r}1 = fma(a, b1, c{r}1); }}"
            for r in rows
        )
        load = "\n".join(
            f"                const __global {t} *o{r} = C + min(i0 + {r}, M - 1) * ldc + j0;\n"
            f"                c{r}0 = load_tail(o{r}, cols); c{r}1 = load_tail(o{r} + {w}, cols - {w});"
            for r in rows
        )
        zero = "\n".join(f"                c{r}0 = ({v})(0); c{r}1 = ({v})(0);" for r in rows)
        stores = "\n".join(
            f"            if (i0 + {r} < M) {{ store_part(C + (i0 + {r}) * ldc + j0, c{r}0, cols);"
            f" if (cols > {w}) store_part(C + (i0 + {r}) * ldc + j0 + {w}, c{r}1, cols - {w}); }}"
            for r in rows
        )
        name = "gemm_tn" if transposed_a else "gemm_nn"
        return f"""
__kernel void {name}({params}, const long mb) {{
    __local {t} panel[{KC * 2 * w}];
    const long blocks_m = (M + mb - 1) / mb;
    const long t = get_global_id(0), z = get_global_id(1);
    const long i_lo = (t % blocks_m) * mb, j0 = (t / blocks_m) * {2 * w};
    const long i_hi = min(M, i_lo + mb), cols = min((long){2 * w}, N - j0);
    A += a_off + z * a_bs; B += b_off + z * b_bs; C += c_off + z * c_bs;
{decl}
    for (long kc = 0; kc < K; kc += {KC}) {{
        const long kn = min((long){KC}, K - kc);
        /* this work-item's columns of B for the next KC steps of k, packed */
        if (cols == {2 * w}) {{
            for (long p = 0; p < kn; p++) {{
                const __global {t} *bp = B + (kc + p) * ldb + j0;
                vstore{w}(vload{w}(0, bp), 0, panel + p * {2 * w});
                vstore{w}(vload{w}(1, bp), 1, panel + p * {2 * w});
            }}
        }} else {{
            for (long p = 0; p < kn; p++) {{
                const __global {t} *bp = B + (kc + p) * ldb + j0;
                vstore{w}(load_tail(bp, cols), 0, panel + p * {2 * w});
                vstore{w}(load_tail(bp + {w}, cols - {w}), 1, panel + p * {2 * w});
            }}
        }}
        for (long i0 = i_lo; i0 < i_hi; i0 += {mr}) {{
{arow}
            if (kc == 0) {{
{zero}
            }} else {{
{load}
            }}
            for (long p = 0; p < kn; p++) {{
                const {v} b0 = vload{w}(0, panel + p * {2 * w}), b1 = vload{w}(1, panel + p * {2 * w});
{fmas}
            }}
{stores}
        }}
    }}
}}
"""

    pairs = [(r, s) for r in range(dr) for s in range(ds)]
    nt_rows = "\n".join(
        f"    const __global {t} *a{r} = A + min(i0 + {r}, M - 1) * lda;" for r in range(dr)
    )
    nt_cols = "\n".join(
        f"    const __global {t} *b{s} = B + min(j0 + {s}, N - 1) * ldb;" for s in range(ds)
    )
    nt_decl = "\n".join(f"    {v} d{r}{s} = ({v})(0);" for r, s in pairs)

    def nt_step(load: str) -> str:
        la = "\n".join(f"        const {v} x{r} = {load.format(p=f'a{r}')};" for r in range(dr))
        lb = "\n".join(f"        const {v} y{s} = {load.format(p=f'b{s}')};" for s in range(ds))
        f = "\n".join(f"        d{r}{s} = fma(x{r}, y{s}, d{r}{s});" for r, s in pairs)
        return f"{la}\n{lb}\n{f}"

    nt_store = "\n".join(
        f"    if (i0 + {r} < M && j0 + {s} < N) C[(i0 + {r}) * ldc + j0 + {s}] = hsum(d{r}{s});"
        for r, s in pairs
    )
    nt = f"""
__kernel void gemm_nt({params}) {{
    const long tiles_m = (M + {dr - 1}) / {dr};
    const long t = get_global_id(0), z = get_global_id(1);
    const long i0 = (t % tiles_m) * {dr}, j0 = (t / tiles_m) * {ds};
    A += a_off + z * a_bs; B += b_off + z * b_bs; C += c_off + z * c_bs;
{nt_rows}
{nt_cols}
{nt_decl}
    long p = 0;
    for (; p + {w} <= K; p += {w}) {{
{nt_step(f"vload{w}(0, {{p}} + p)")}
    }}
    if (p < K) {{
{nt_step("load_tail({p} + p, K - p)")}
    }}
{nt_store}
}}
"""
    return helpers + outer(False) + outer(True) + nt


def _hsum(t: str, w: int) -> str:
    lines, width, name = [], w, "x"
    while width > 2:
        half = width // 2
        lines.append(f"    const {t}{half} s{half} = {name}.lo + {name}.hi;")
        width, name = half, f"s{half}"
    lines.append(f"    return {name}.x + {name}.y;")
    return "\n".join(lines)


def layout(x: OpenCLArray, rows: int, cols: int) -> tuple[bool, int] | None:
    """(transposed, leading dimension) of a strided 2-D layout, or None if neither axis is
    contiguous."""
    rs, cs = x.strides[-2:]
    if (cs == 1 or cols == 1) and rs >= max(cols, 1):
        return False, rs
    if (rs == 1 or rows == 1) and cs >= max(rows, 1):
        return True, cs
    return None


def _batch_stride(x: OpenCLArray, batch: tuple[int, ...]) -> int | None:
    """The single stride that walks ``x``'s batch axes (already broadcast to ``batch``) in
    C order, or None if they do not collapse into one (0 for an operand shared by the batch)."""
    lead = [(n, s) for n, s in zip(batch, x.strides[:-2], strict=True) if n != 1]
    if not lead:
        return 0
    stride = lead[-1][1]
    step = stride
    for n, s in reversed(lead):
        if s != step:
            return None
        step = s * n
    return stride


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
    """``out = x1 @ x2`` (``out`` contiguous, of shape ``batch + (m, n)``) with the kernels
    above: one launch, whatever the operands' transposes, offsets and batch strides; an operand
    whose layout the kernels cannot read (neither axis contiguous, batch axes that do not
    collapse, both operands transposed) is copied first."""
    rt = bk.rt
    dt = out.dtype
    name = "float64" if dt == np.float64 else "float32"
    nb = math.prod(batch)
    a = bk.broadcast_to(x1, (*batch, m, k))
    b = bk.broadcast_to(x2, (*batch, k, n))
    a_lay, b_lay = layout(a, m, k), layout(b, k, n)
    a_bs, b_bs = _batch_stride(a, batch), _batch_stride(b, batch)
    if a_lay is None or a_bs is None or (a_lay[0] and b_lay is not None and b_lay[0]):
        a = bk._contiguous(a)
        a_lay, a_bs = (False, k), m * k
    if b_lay is None or b_bs is None:
        b = bk._contiguous(b)
        b_lay, b_bs = (False, n), k * n
    (at, lda), (bt, ldb) = a_lay, b_lay
    kernel, (w, mr, dr, ds) = rt.gemm_kernel(
        name, "gemm_nt" if bt else "gemm_tn" if at else "gemm_nn"
    )
    i64 = np.int64
    args = (
        i64(m), i64(n), i64(k),
        a._buf, i64(a._offset), i64(lda), i64(a_bs),
        b._buf, i64(b._offset), i64(ldb), i64(b_bs),
        out._buf, i64(out._offset), i64(n), i64(m * n),
    )  # fmt: skip
    if bt:
        rt.launch_tiles(kernel, (-(-m // dr) * -(-n // ds), nb), *args)
        return
    panels, tiles_m = -(-n // (2 * w)), -(-m // mr)
    want = _ITEMS_PER_UNIT * rt.cl_device.max_compute_units
    parts = _split(panels, tiles_m, k, want) if nb == 1 else 1
    if parts > 1:
        # Few column panels, few rows and a long k (a filter gradient): slices of k, each a
        # work-item per panel with every row, into partial products summed after.
        ks = k // parts
        partial = bk._empty((parts, m, n), out.dtype)
        split = (
            i64(m), i64(n), i64(ks),
            a._buf, i64(a._offset), i64(lda), i64(ks * (lda if at else 1)),
            b._buf, i64(b._offset), i64(ldb), i64(ks * ldb),
            partial._buf, i64(partial._offset), i64(n), i64(m * n),
        )  # fmt: skip
        rt.launch_tiles(kernel, (panels, parts), *split, i64(mr * tiles_m))
        sum_slices(bk, partial, out)
        return
    blocks = min(tiles_m, -(-want // (panels * nb)))
    mb = mr * -(-tiles_m // blocks)
    rt.launch_tiles(kernel, (-(-m // mb) * panels, nb), *args, i64(mb))


def sum_slices(bk: OpenCLBackend, partial: OpenCLArray, out: OpenCLArray) -> None:
    """``out[...] = partial.sum(0)`` for a contiguous ``out`` (split-k products' last step)."""
    total = bk.reduce("sum", partial, (0,), False)  # contiguous, as ``out`` is
    size = out.dtype.itemsize
    _cl().enqueue_copy(
        bk.rt.queue,
        out._buf,
        total._buf,
        dst_offset=out._offset * size,
        src_offset=total._offset * size,
        byte_count=out.size * size,
    )


def _split(panels: int, tiles_m: int, k: int, want: int) -> int:
    """Slices of ``k`` for a single product of ``panels`` column panels and ``tiles_m`` row
    tiles: 1 unless the panels alone are fewer than ``want`` work-items, the rows few (up to
    eight tiles, which a work-item then takes all of) and ``k`` long (16 packed steps a slice
    at least) and divisible."""
    if panels >= want or tiles_m > 8:
        return 1
    for parts in (8, 4, 2):
        if panels * parts <= 2 * want and k % parts == 0 and k // parts >= 16 * KC:
            return parts
    return 1
