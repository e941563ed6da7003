"""arraycore's own GEMM kernels for CPU OpenCL devices (PoCL): register tiles, no local sharing.

CLBlast's kernels are written for GPUs: work-groups sharing tiles through local memory, each
work-item a few outputs. PoCL runs a work-group's items one after another on one core, so its
best tuned tilings reached 17-65 GFLOP/s on the suite's products (2-core Xeon with AVX-512,
2026-11-28), against 140-270 for NumPy's BLAS. The kernels here are written the way CPU BLAS
micro-kernels are: a work-group of one work-item computes register tiles of the output over the
whole ``k``, its accumulators named variables (an array would stay in memory under PoCL), with
vector loads of ``W`` consecutive items where the operand has them:

* ``gemm_nn``, ``gemm_tn``, ``gemm_nt``, ``gemm_tt`` (``A``, then ``B``, stored transposed or
  not): a work-item owns two vectors' worth of columns (a panel) and a block of ``mb`` rows.
  For each ``KC`` steps of ``k`` it packs its panel of ``B`` into local memory, consecutive
  whatever ``B``'s layout (rows of ``B`` copied as vectors; a transposed ``B``'s rows copied
  into the panel's columns), so that a power-of-two row stride, as a convolution's columns
  have, cannot map every row to the same cache sets. Then it runs each ``MR``-row tile of its
  block over them: two vector loads from the panel and ``MR`` items of ``A`` broadcast (from
  ``MR`` rows of ``A``, or ``MR`` consecutive items of a column of a transposed ``A``) for ``2 *
  MR`` vector FMAs per step, the tile's sums carried in ``C`` between blocks of ``k``. Blocks of
  rows are as tall as leaves at least ``_ITEMS_PER_UNIT`` work-items per compute unit.

* ``conv_nn``: the forward convolution as an implicit GEMM, image ``z`` of the batch at a
  time: the weights are ``A``, and each row of a packed panel is one tap ``(c, kh, kw)`` at
  ``2W`` consecutive output pixels, read straight from the image (no columns array is
  written, nor read back). Where stride and dilation are 1, the image's rows contiguous and
  the output's rows whole vectors, each half-panel row is a run of one image row, one vector
  load where it lies inside the row; otherwise pixel by pixel, zero outside the image. On
  PoCL it took the VGG-BN step from 104.9 to 89.5 ms and ResNet's from 48.1 to 40.8
  (alternating blocks in one process, 2026-11-28); the pixel-by-pixel path alone was slower
  than im2col and the GEMM (108.7 and 56.1 ms).

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
from ._runtime import DTYPE_NAME, _cl

if TYPE_CHECKING:
    from ._backend import OpenCLBackend

_CTYPE = {"float32": "float", "float64": "double"}
#: Steps of ``k`` whose columns of ``B`` a work-item packs at a time (KC x 2W items: 16 KB of
#: float32 with AVX-512, within L1).
KC = 128
#: Work-items to aim for per compute unit: a product with fewer column panels than that splits
#: its rows into more blocks.
_ITEMS_PER_UNIT = 4


def shape_for(device: Any, dtype: str) -> tuple[int, int]:
    """``(W, MR)`` for ``dtype`` on ``device``: the vector width (the device's native width, 4
    to 16 items) and the rows of a register tile (its ``2 * MR`` accumulators, two loaded
    vectors and a broadcast fit 32 registers of 64 bytes with AVX-512, 16 of 32 bytes with
    AVX2)."""
    native = (
        device.native_vector_width_double
        if dtype == "float64"
        else device.native_vector_width_float
    )
    width = 16 if native >= 16 else 8 if native >= 8 else 4
    return width, (8 if width * np.dtype(dtype).itemsize >= 64 else 4)


def source(dtype: str, width: int, mr: int) -> str:
    """OpenCL C of the four kernels for ``dtype`` (``gemm_nn``, ``gemm_tn``, ``gemm_nt``,
    ``gemm_tt``: ``A`` then ``B`` transposed in memory or not)."""
    t = _CTYPE[dtype]
    v = f"{t}{width}"
    w = width
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
"""
    kernels = [_kernel(t, w, mr, at, bt) for at in (False, True) for bt in (False, True)]
    return (
        helpers
        + "".join(kernels)
        + _kernel(t, w, mr, False, False, conv=True)
        + _lstm_steps(t, w, max(mr // 2, 1), mr)
    )


def _lstm_steps(t: str, w: int, mf: int, mb: int) -> str:
    """``lstm_step_fw`` and ``lstm_step_bw``: one LSTM time step each, the recurrent product
    and the cell in one launch (arraycore.device_kernels' ``lstm_cell_forward`` and
    ``lstm_cell_backward``, same arithmetic, ``W`` units of a row at a time). A work-item owns
    ``W`` units of ``mf`` (``mb``) rows: forward, their four gates' pre-activations
    ``h_{t-1} @ u`` (``u`` packed per block of units as ``(H / W, H, 4, W)``, ``h_{t-1}`` read
    from ``y[:, t-1]`` or ``h0``) then the cell; backward, ``dh = dz[:, t+1] @ u.T`` for its
    units (``u.T`` packed as ``(H / W, 4H, W)``) then the cell's gradient into ``dz[:, t]``.
    Work-items read whole rows of the previous step's values and write only their own units of
    this step's, so one launch per step needs no synchronisation between them."""
    v = f"{t}{w}"
    fw_decl = "\n".join(f"    {v} s{r}_{g} = ({v})(0);" for r in range(mf) for g in range(4))
    fw_rows = "\n".join(
        f"    const __global {t} *a{r} = A + min(i0 + {r}, N - 1) * lda;" for r in range(mf)
    )
    fw_fma = "\n".join(
        f"            {{ const {v} a = ({v})(a{r}[p]);"
        + "".join(f" s{r}_{g} = fma(a, b{g}, s{r}_{g});" for g in range(4))
        + " }"
        for r in range(mf)
    )
    fw_cells = "\n".join(
        f"    if (i0 + {r} < N) LSTM_FW_CELL(i0 + {r}, s{r}_0, s{r}_1, s{r}_2, s{r}_3)"
        for r in range(mf)
    )
    bw_decl = "\n".join(f"    {v} s{r} = ({v})(0);" for r in range(mb))
    bw_rows = "\n".join(
        f"        const __global {t} *a{r} = A + min(i0 + {r}, N - 1) * lda;" for r in range(mb)
    )
    bw_fma = "\n".join(f"            s{r} = fma(({v})(a{r}[k]), b, s{r});" for r in range(mb))
    bw_cells = "\n".join(f"    if (i0 + {r} < N) LSTM_BW_CELL(i0 + {r}, s{r})" for r in range(mb))
    return f"""
#define LD(p) vload{w}(0, (p))
#define ST(x, p) vstore{w}((x), 0, (p))
#define LSTM_FW_CELL(row, z0, z1, z2, z3) {{                                              \
    const long gb = ((row) * S + t) * 4 * H + j0, at = ((row) * S + t) * H + j0;            \
    const long st = (row) * H + j0;                                                         \
    const {v} a0 = tanh((z0) + LD(xs + gb)) * ({t})0.5 + ({t})0.5;                          \
    const {v} a1 = tanh((z1) + LD(xs + gb + H)) * ({t})0.5 + ({t})0.5;                      \
    const {v} a2 = tanh((z2) + LD(xs + gb + 2 * H));                                        \
    const {v} a3 = tanh((z3) + LD(xs + gb + 3 * H)) * ({t})0.5 + ({t})0.5;                  \
    ST(a0, gates + gb); ST(a1, gates + gb + H); ST(a2, gates + gb + 2 * H);                 \
    ST(a3, gates + gb + 3 * H);                                                             \
    {v} cell = a0 * a2;                                                                     \
    if (has_c) cell = a1 * LD(c + st) + cell;                                               \
    const {v} tc = tanh(cell), out = a3 * tc;                                               \
    ST(cell, cs + at); ST(tc, tanh_c + at); ST(out, y + at); ST(cell, c + st); ST(out, h + st); \
}}

/* one LSTM step t forward: A is h_(t-1) (rows lda apart from a_off), U the packed u */
__kernel void lstm_step_fw(__global const {t} *A, __global const {t} *U, __global const {t} *xs,
                           __global {t} *c, __global {t} *h, __global {t} *gates,
                           __global {t} *cs, __global {t} *tanh_c, __global {t} *y,
                           __global const long *meta) {{
    const long N = meta[0], H = meta[1], S = meta[2], t = meta[3], a_off = meta[4];
    const long lda = meta[5], has_h = meta[6], has_c = meta[7];
    const long jb = get_global_id(0), i0 = get_global_id(1) * {mf}, j0 = jb * {w};
    A += a_off;
{fw_decl}
    if (has_h) {{
        const __global {t} *up = U + jb * H * {4 * w};
{fw_rows}
        for (long p = 0; p < H; p++) {{
            const __global {t} *bp = up + p * {4 * w};
            const {v} b0 = vload{w}(0, bp), b1 = vload{w}(1, bp), b2 = vload{w}(2, bp);
            const {v} b3 = vload{w}(3, bp);
{fw_fma}
        }}
    }}
{fw_cells}
}}

#define LSTM_BW_CELL(row, acc) {{                                                         \
    const long gb = ((row) * S + t) * 4 * H + j0, at = ((row) * S + t) * H + j0;            \
    const long st = (row) * H + j0;                                                         \
    const {v} i = LD(gates + gb), f = LD(gates + gb + H), g = LD(gates + gb + 2 * H);       \
    const {v} o = LD(gates + gb + 3 * H), tc = LD(tanh_c + at);                             \
    {v} dh = ({v})(0);                                                                      \
    if (has_prod) dh = (acc); else if (has_dh) dh = LD(dh_n + st);                          \
    if (has_dy) dh = dh + LD(dy + at);                                                      \
    {v} dcell = dh * (o * (({t})1 - tc * tc));                                              \
    if (has_dc) dcell = dcell + LD(dc + st);                                                \
    {v} c_prev = ({v})(0);                                                                  \
    if (t > 0) c_prev = LD(cs + at - H); else if (has_c0) c_prev = LD(c0 + st);             \
    ST(g * (i * (({t})1 - i)) * dcell, dz + gb);                                            \
    ST(c_prev * (f * (({t})1 - f)) * dcell, dz + gb + H);                                   \
    ST(i * (g * (({t})0 - g) + ({t})1) * dcell, dz + gb + 2 * H);                           \
    ST(tc * (o * (({t})1 - o)) * dh, dz + gb + 3 * H);                                      \
    ST(dcell * f, dc + st);                                                                 \
}}

/* one LSTM step t backward: dh from dz[:, t+1] @ u.T (has_prod; UT the packed u.T), or dh_n */
__kernel void lstm_step_bw(__global const {t} *UT, __global const {t} *dy,
                           __global const {t} *dh_n, __global {t} *dc, __global const {t} *c0,
                           __global const {t} *gates, __global const {t} *cs,
                           __global const {t} *tanh_c, __global {t} *dz,
                           __global const long *meta) {{
    const long N = meta[0], H = meta[1], S = meta[2], t = meta[3], has_prod = meta[4];
    const long has_dh = meta[5], has_dy = meta[6], has_dc = meta[7], has_c0 = meta[8];
    const long jb = get_global_id(0), i0 = get_global_id(1) * {mb}, j0 = jb * {w};
{bw_decl}
    if (has_prod) {{
        const __global {t} *A = dz + (t + 1) * 4 * H;
        const long lda = S * 4 * H;
        const __global {t} *ut = UT + jb * 4 * H * {w};
{bw_rows}
        for (long k = 0; k < 4 * H; k++) {{
            const {v} b = vload{w}(0, ut + k * {w});
{bw_fma}
        }}
    }}
{bw_cells}
}}
#undef LD
#undef ST
"""


def _kernel(t: str, w: int, mr: int, at: bool, bt: bool, conv: bool = False) -> str:
    """One kernel: ``A`` (``at``: stored (K, M)) times ``B`` (``bt``: stored (N, K)); with
    ``conv``, ``B`` is the im2col columns of image ``z`` of an NCHW batch, read from the image
    as the panel is packed (an implicit GEMM: no columns written)."""
    v, nr, rows = f"{t}{w}", 2 * w, range(mr)
    if at:  # MR consecutive items of column p
        arow = "\n".join(f"            const long q{r} = min(i0 + {r}, M - 1);" for r in rows)
        a_at = "A[(kc + p) * lda + q{r}]"
    else:
        arow = "\n".join(
            f"            const __global {t} *a{r} = A + min(i0 + {r}, M - 1) * lda + kc;"
            for r in rows
        )
        a_at = "a{r}[p]"
    if bt:  # each column of the panel is kn consecutive items of a row of B
        pack = f"""        for (long j = 0; j < {nr}; j++) {{
            const __global {t} *bj = B + (j0 + min(j, cols - 1)) * ldb + kc;
            for (long p = 0; p < kn; p++) panel[p * {nr} + j] = j < cols ? bj[p] : ({t})0;
        }}"""
    elif conv:  # each row of the panel: one tap (c, kh, kw) at 2W consecutive output pixels
        halves = "\n".join(
            f"""            {{ /* half {h}: W pixels of one output row, shifted by the tap */
                {v} x = ({v})(0);
                const long ih = oh{h} + kh, iw = ow{h} + kw;
                if (j0 + {h * w} < N && ih >= 0 && ih < IH) {{
                    const __global {t} *row = B + c * XC + ih * XH;
                    if (iw >= 0 && iw + {w} <= IW) x = vload{w}(0, row + iw);
                    else {{
                        {t} tmp[{w}];
                        for (int l = 0; l < {w}; l++)
                            tmp[l] = iw + l >= 0 && iw + l < IW ? row[iw + l] : ({t})0;
                        x = vload{w}(0, tmp);
                    }}
                }}
                vstore{w}(x, {h}, panel + p * {nr});
            }}"""
            for h in range(2)
        )
        pack = f"""        if (rows_fast) {{
            for (long p = 0; p < kn; p++) {{
                const long tap = kc + p, c = tap / (KH * KW), kh = tap % (KH * KW) / KW;
                const long kw = tap % KW;
{halves}
            }}
        }} else for (long p = 0; p < kn; p++) {{
            const long tap = kc + p, c = tap / (KH * KW), kh = tap % (KH * KW) / KW;
            const long dih = kh * DH, diw = (tap % KW) * DW;
            const __global {t} *xc = B + c * XC + dih * XH + diw * XW;
            for (int l = 0; l < {nr}; l++) {{
                const long ih = ih0[l] + dih, iw = iw0[l] + diw;
                panel[p * {nr} + l] = (l < cols && ih >= 0 && ih < IH && iw >= 0 && iw < IW)
                    ? xc[at0[l]] : ({t})0;
            }}
        }}"""
    else:  # each row of the panel is 2W consecutive items of a row of B
        pack = f"""        if (cols == {nr}) {{
            for (long p = 0; p < kn; p++) {{
                const __global {t} *bp = B + (kc + p) * ldb + j0;
                vstore{w}(vload{w}(0, bp), 0, panel + p * {nr});
                vstore{w}(vload{w}(1, bp), 1, panel + p * {nr});
            }}
        }} else {{
            for (long p = 0; p < kn; p++) {{
                const __global {t} *bp = B + (kc + p) * ldb + j0;
                vstore{w}(load_tail(bp, cols), 0, panel + p * {nr});
                vstore{w}(load_tail(bp + {w}, cols - {w}), 1, panel + p * {nr});
            }}
        }}"""
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
    decl = "\n".join(f"    {v} c{r}0, c{r}1;" for r in rows)
    name = "conv_nn" if conv else "gemm_" + ("t" if at else "n") + ("t" if bt else "n")
    geometry = (
        f"""
    /* the image's geometry: B is image z, each pixel's offset before the tap's shift */
    const long KH = meta[13], KW = meta[14], DH = meta[15], DW = meta[16], IH = meta[17];
    const long IW = meta[18], XC = meta[19], XH = meta[20], XW = meta[21], OW = meta[22];
    const long SH = meta[23], SW = meta[24], TOP = meta[25], LEFT = meta[26];
    long ih0[{nr}], iw0[{nr}], at0[{nr}];
    for (int l = 0; l < {nr}; l++) {{
        const long j = min(j0 + l, N - 1);
        ih0[l] = j / OW * SH - TOP;
        iw0[l] = j % OW * SW - LEFT;
        at0[l] = ih0[l] * XH + iw0[l] * XW;
    }}
    /* stride and dilation 1, rows of the image contiguous, output rows whole vectors: each
       half panel is a run of one image row, read as a vector where it lies inside the row */
    const int rows_fast = meta[27];
    const long oh0 = j0 / OW - TOP, ow0 = j0 % OW - LEFT;
    const long oh1 = (j0 + {w}) / OW - TOP, ow1 = (j0 + {w}) % OW - LEFT;"""
        if conv
        else ""
    )
    return f"""
__kernel void {name}(__global const {t} *A, __global const {t} *B, __global {t} *C,
                     __global const long *meta) {{
    /* the sizes, offsets, leading dimensions and batch strides (one cached buffer: a launch
       with four arguments costs PoCL and pyopencl a third of one with sixteen) */
    const long M = meta[0], N = meta[1], K = meta[2], mb = meta[12];
    const long a_off = meta[3], lda = meta[4], a_bs = meta[5];
    const long b_off = meta[6], ldb = meta[7], b_bs = meta[8];
    const long c_off = meta[9], ldc = meta[10], c_bs = meta[11];
    __local {t} panel[{KC * nr}];
    const long blocks_m = (M + mb - 1) / mb;
    const long t = get_global_id(0), z = get_global_id(1);
    const long i_lo = (t % blocks_m) * mb, j0 = (t / blocks_m) * {nr};
    const long i_hi = min(M, i_lo + mb), cols = min((long){nr}, N - j0);
    A += a_off + z * a_bs; B += b_off + z * b_bs; C += c_off + z * c_bs;{geometry}
{decl}
    for (long kc = 0; kc < K; kc += {KC}) {{
        const long kn = min((long){KC}, K - kc);
        /* this work-item's columns of B for the next KC steps of k, packed */
{pack}
        for (long i0 = i_lo; i0 < i_hi; i0 += {mr}) {{
{arow}
            if (kc == 0) {{
{zero}
            }} else {{
{load}
            }}
            for (long p = 0; p < kn; p++) {{
                const {v} b0 = vload{w}(0, panel + p * {nr}), b1 = vload{w}(1, panel + p * {nr});
{fmas}
            }}
{stores}
        }}
    }}
}}
"""


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
    whose layout the kernels cannot read (neither axis contiguous, or batch axes that do not
    collapse into one stride) is copied first."""
    rt = bk.rt
    dt = out.dtype
    name = DTYPE_NAME[dt]
    nb = math.prod(batch)
    a = bk.broadcast_to(x1, (*batch, m, k))
    b = bk.broadcast_to(x2, (*batch, k, n))
    a_lay, b_lay = layout(a, m, k), layout(b, k, n)
    a_bs, b_bs = _batch_stride(a, batch), _batch_stride(b, batch)
    if a_lay is None or a_bs is None:
        a = bk._contiguous(a)
        a_lay, a_bs = (False, k), m * k
    if b_lay is None or b_bs is None:
        b = bk._contiguous(b)
        b_lay, b_bs = (False, n), k * n
    (at, lda), (bt, ldb) = a_lay, b_lay
    kernel, (w, mr) = rt.gemm_kernel(name, "gemm_" + ("t" if at else "n") + ("t" if bt else "n"))
    panels, tiles_m = -(-n // (2 * w)), -(-m // mr)
    want = _ITEMS_PER_UNIT * rt.compute_units
    parts = _split(panels, tiles_m, k, want) if nb == 1 else 1
    if parts > 1:
        # Few column panels, few rows and a long k (a filter gradient): slices of k, each a
        # work-item per panel with every row, into partial products summed after.
        ks = k // parts
        partial = bk._empty((parts, m, n), out.dtype)
        meta = (
            m, n, ks,
            a._offset, lda, ks * (lda if at else 1),
            b._offset, ldb, ks * (1 if bt else ldb),
            partial._offset, n, m * n, mr * tiles_m,
        )  # fmt: skip
        rt.launch_tiles(kernel, (panels, parts), a._buf, b._buf, partial._buf, rt.meta(meta))
        sum_slices(bk, partial, out)
        return
    blocks = min(tiles_m, -(-want // (panels * nb)))
    mb = mr * -(-tiles_m // blocks)
    meta = (
        m, n, k, a._offset, lda, a_bs, b._offset, ldb, b_bs, out._offset, n, m * n, mb
    )  # fmt: skip
    rt.launch_tiles(kernel, (-(-m // mb) * panels, nb), a._buf, b._buf, out._buf, rt.meta(meta))


def sum_slices(bk: OpenCLBackend, partial: OpenCLArray, out: OpenCLArray) -> None:
    """``out[...] = partial.sum(0)`` for a contiguous ``out`` (split-k products' last step)."""
    total = bk.reduce("sum", partial, (0,), False)  # contiguous, as ``out`` is
    size = out.dtype.itemsize
    queue, dst, src = bk.rt.queue, out._buf, total._buf
    offsets = dict(
        dst_offset=out._offset * size, src_offset=total._offset * size, byte_count=out.size * size
    )
    bk.rt.queued(lambda: _cl().enqueue_copy(queue, dst, src, **offsets), dst, src)


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


def conv2d(bk: OpenCLBackend, x: OpenCLArray, w: OpenCLArray, win: Any) -> OpenCLArray:
    """The convolution of the NCHW ``x`` (any strides) with the ``(O, C, KH, KW)`` weights
    ``w`` as an implicit GEMM per image (``conv_nn``): the weights as ``A``, the input's columns
    packed straight from the image as ``B``, the output written NCHW; no columns array."""
    rt = bk.rt
    name = DTYPE_NAME[x.dtype]
    o, taps, pixels = int(w.shape[0]), win.c * win.kh * win.kw, win.out_h * win.out_w
    a = bk._contiguous(w)
    out = bk._empty((win.n, o, win.out_h, win.out_w), x.dtype)
    if out.size == 0:
        return out
    if taps == 0:
        return bk.full(out.shape, 0, x.dtype)
    kernel, (width, mr) = rt.gemm_kernel(name, "conv_nn")
    panels, tiles_m = -(-pixels // (2 * width)), -(-o // mr)
    want = _ITEMS_PER_UNIT * rt.compute_units
    blocks = min(tiles_m, -(-want // (panels * win.n)))
    mb = mr * -(-tiles_m // blocks)
    (top, _), (left, _) = win.pads
    xn, xc, xh, xw = x.strides
    fast = (
        tuple(win.stride) == (1, 1) and tuple(win.dilation) == (1, 1) and xw == 1
        and win.out_w % width == 0
    )  # fmt: skip
    meta = (
        o, pixels, taps, a._offset, taps, 0, x._offset, 0, xn, out._offset, pixels, o * pixels,
        mb, win.kh, win.kw, *win.dilation, win.h, win.w, xc, xh, xw, win.out_w, *win.stride,
        top, left, int(fast),
    )  # fmt: skip
    rt.launch_tiles(kernel, (-(-o // mb) * panels, win.n), a._buf, x._buf, out._buf, rt.meta(meta))
    return out
