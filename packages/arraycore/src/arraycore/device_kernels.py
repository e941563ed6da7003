"""C sources of the ``nn`` kernels for device backends: CUDA (NVRTC) and OpenCL.

The kernels are written once, in C with a few placeholder words that :func:`source` replaces
for the target: ``KERNEL`` (``extern "C" __global__`` / ``__kernel``), ``GLOBAL`` (nothing /
``__global``), ``FUNC`` (a device helper), ``GID`` (the thread's global index), ``i64`` (a
64-bit integer), ``T`` (the element type), ``GEOM`` (the window geometry parameters), plus the
macros ``EXP``, ``LOG``, ``NEG_INF`` and ``NAN_T`` of the dtype's prelude. What comes out is plain
CUDA C++ or plain OpenCL C, with concrete types in every kernel signature. Neither build
contracts multiplies and adds into FMAs (``FP_CONTRACT OFF``, NVRTC's ``--fmad=false``): the
kernels round as arraycore's NumPy reference does.

arraycore-cuda builds them with NVRTC (through ``cupy.RawModule``); arraycore-opencl builds the
OpenCL version for the kernels it has no strided version of (average pooling, the softmax family,
the fused cross-entropy), so the same bodies run in the conformance kit and the nnlayers suite on
any OpenCL device, PoCL in CI. Both backends inherit :class:`KernelHost`
(:mod:`arraycore.kernel_host`, importable from here too), the host side
(argument checks, shapes, fallbacks, launches, the convolutions as im2col/col2im + matmul). A
third-party GPU backend may use both.

Every kernel reads and writes C-contiguous arrays starting at their buffer's first element and
takes its geometry as scalar arguments (no host-to-device copy, no synchronisation to launch).
One work item computes one output element (one row for the softmax family), summing in the same
order as arraycore's reference where it sums, and a kernel over ``n`` elements ignores work items
``>= n`` (launches may round up). Kernels and the arguments they take, after ``GEOM`` is expanded
(``GEOM`` = ``N, C, H, W, KH, KW, OH, OW, SH, SW, DH, DW, TOP, LEFT``, see :func:`geometry`):

- ``im2col(n, out, x, GEOM)``, ``col2im(n, out, cols, GEOM)``: columns ``(C*KH*KW, N*OH*OW)``;
- ``max_pool(n, out, x, GEOM)``, ``max_pool_backward(n, out, x, dy, GEOM)``;
- ``avg_pool(n, out, x, GEOM, include_pad)``, ``avg_pool_backward(n, out, dy, GEOM, include_pad)``;
- ``softmax_rows(rows, cols, out, x, log_mode)``;
- ``softmax_backward_rows(rows, cols, out, dy, y)``: softmax's gradient from its output,
  ``y * (dy - sum(dy * y))`` per row;
- ``softmax_xent_rows(rows, cols, dlogits, row_loss, x, labels_int64, scale)``;
- ``gelu(n, out, x)``, ``gelu_backward(n, out, dy, x)``: GELU's tanh approximation, one pass;
  ``gelu_erf(n, out, x)``, ``gelu_erf_backward(n, out, dy, x)``: exact GELU, ``x Phi(x)`` with
  ``Phi(x) = 0.5 erfc(-x / sqrt 2)`` from the device's math library;
- ``relu_backward(n, out, dy, y)``: ReLU's gradient from its output, ``dy * (y > 0)``;
- ``layer_norm_rows(rows, d, y, mean, inv_std, x, gamma, beta, eps)``,
  ``layer_norm_backward_rows(rows, d, dx, dy, x, gamma, mean, inv_std)`` (one work item per
  row) and ``layer_norm_param_grads(rows, d, dgamma, dbeta, dy, x, mean, inv_std)`` (one work
  item per column);
- ``lstm_cell_forward(n, H, steps, t, has_h, has_c, z, xs, c, h, gates, cs, tanh_c, y)`` and
  ``lstm_cell_backward(n, H, steps, t, has_dy, has_dh, has_dc, has_c0, dy, dh, dc, c0, gates, cs,
  tanh_c, dz, dz_t)``: one LSTM time step's gates and cell, one work item per ``(row, unit)``;
- ``gru_cell_forward(n, H, steps, t, has_h, hid, xw, b, h, ru, cand, rec_n, y)`` and
  ``gru_cell_backward(n, H, steps, t, has_g, has_h0, dy, g, dhz, h0, y, ru, cand, rec_n, dxw,
  dhid)``: one GRU time step, one work item per ``(row, unit)``;
- batch normalisation of ``(N, C, HW)``, three launches each way: ``bn_chunk_stats(C, N, HW, spc,
  chunks, part_mean, part_m2, x)`` (one work item per channel and chunk of ``spc`` samples),
  ``bn_merge_stats(C, N, HW, spc, chunks, mean, inv_std, part_mean, part_m2, eps)`` (one per
  channel: the chunks merged in order), ``bn_normalize(n, C, HW, relu, y, x, mean, inv_std,
  gamma, beta)`` (``relu``: a ReLU applied as ``y`` is written); ``bn_chunk_grads(C, N, HW, spc,
  chunks, has_y, part_dy, part_dyx, dy, y, x, mean)``, ``bn_merge_grads(C, chunks, dgamma, dbeta,
  part_dy, part_dyx, inv_std)``, ``bn_backward_data(n, C, HW, count, has_y, dx, dy, y, x, mean,
  inv_std, gamma, dgamma, dbeta)`` (``has_y``: ``dy`` gated by the ReLU's output ``y`` as it is
  read, ``batch_norm_relu``'s backward; ``y`` is any buffer otherwise);
- scaled dot-product attention, fused (no ``(Tq, Tk)`` array written; scores recomputed from
  ``q`` and ``k`` in each pass, as flash attention does): ``attn_forward(rows, Tq, Tk, D, Dv,
  out, lse, q, k, v, MASK, has_drop, drop, scale)`` (one work item per query row, one pass over
  the keys with flash attention's online softmax), ``attn_backward_query(rows, Tq, Tk, D, Dv,
  dq, delta, dy, out, q, k, v, lse, MASK, has_drop, drop, scale)`` (per query row) and
  ``attn_backward_key(keys, Tq, Tk, D, Dv, dk, dv, dy, q, k, v, lse, delta, MASK, has_drop,
  drop, scale)`` (per key row), ``MASK`` = ``mask_kind, mask_bool, mask_add, L1, L2, L3, MS0,
  MS1, MS2, MS3, MSQ, MSK, causal`` (see :meth:`KernelHost.shared_scaled_dot_product_attention`).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

#: The kernel functions of :func:`source`, by name.
KERNELS = (
    "im2col",
    "col2im",
    "max_pool",
    "max_pool_backward",
    "avg_pool",
    "avg_pool_backward",
    "softmax_rows",
    "softmax_backward_rows",
    "softmax_xent_rows",
    "gelu",
    "gelu_backward",
    "gelu_erf",
    "gelu_erf_backward",
    "relu_backward",
    "layer_norm_rows",
    "layer_norm_backward_rows",
    "layer_norm_param_grads",
    "lstm_cell_forward",
    "lstm_cell_backward",
    "gru_cell_forward",
    "gru_cell_backward",
    "bn_chunk_stats",
    "bn_merge_stats",
    "bn_normalize",
    "bn_chunk_grads",
    "bn_merge_grads",
    "bn_backward_data",
    "attn_forward",
    "attn_backward_query",
    "attn_backward_key",
)

#: dtypes the kernels are built for (float16 needs conversions the source does not have).
DTYPES: tuple[str, ...] = ("float32", "float64")

#: The window geometry parameters, in every pooling and im2col/col2im kernel's signature.
GEOM = (
    "const i64 N, const i64 C, const i64 H, const i64 W, const i64 KH, const i64 KW, "
    "const i64 OH, const i64 OW, const i64 SH, const i64 SW, const i64 DH, const i64 DW, "
    "const i64 TOP, const i64 LEFT"
)

#: The attention kernels' mask parameters (``ATTN_MASK`` in their signatures).
ATTN_MASK = (
    "const int mask_kind, GLOBAL const unsigned char* mb, GLOBAL const T* ma, const i64 L1, "
    "const i64 L2, const i64 L3, const i64 MS0, const i64 MS1, const i64 MS2, const i64 MS3, "
    "const i64 MSQ, const i64 MSK, const int causal"
)

_WORDS = {
    "cuda": {
        "KERNEL": 'extern "C" __global__',
        "GLOBAL": "",
        "FUNC": "static __device__ __forceinline__",
        "GID": "((long long)blockIdx.x * (long long)blockDim.x + (long long)threadIdx.x)",
        "i64": "long long",
    },
    "opencl": {
        "KERNEL": "__kernel",
        "GLOBAL": "__global",
        "FUNC": "static",
        "GID": "((long)get_global_id(0))",
        "i64": "long",
    },
}

_PRELUDES = {
    ("cuda", "float32"): """
#define EXP expf
#define LOG logf
#define NEG_INF (-__int_as_float(0x7f800000))
#define NAN_T __int_as_float(0x7fffffff)
""",
    ("cuda", "float64"): """
#define EXP exp
#define LOG log
#define NEG_INF (-__longlong_as_double(0x7ff0000000000000LL))
#define NAN_T __longlong_as_double(0x7ff8000000000000LL)
""",
    ("opencl", "float32"): """
#pragma OPENCL FP_CONTRACT OFF
#define EXP exp
#define LOG log
#define NEG_INF (-INFINITY)
#define NAN_T NAN
""",
    ("opencl", "float64"): """
#pragma OPENCL FP_CONTRACT OFF
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#define EXP exp
#define LOG log
#define NEG_INF (-(double)INFINITY)
#define NAN_T ((double)NAN)
""",
}

_CTYPES = {"float32": "float", "float64": "double"}

_BODY = r"""
/* Element kernels (ELEMENT_KERNELS): each work item takes ELEMENT_RUN consecutive elements, one
   on GPUs; a run on CPU OpenCL devices (AC_PIECES), where a work item costs several times what
   an element's arithmetic does. The launch covers ceil(n / ELEMENT_RUN) work items. */
#ifdef AC_PIECES
#define ELEMENT_RUN ELEMENT_RUN_CPU
#else
#define ELEMENT_RUN 1
#endif
#define FOR_ELEMENTS(i, n) \
    for (i64 i = GID * ELEMENT_RUN, \
             i##_end = (GID + 1) * ELEMENT_RUN < (n) ? (GID + 1) * ELEMENT_RUN : (n); \
         i < i##_end; ++i)

/* Columns (C, KH, KW, N, OH, OW) = a (C*KH*KW, N*OH*OW) matrix: a whole batch is one GEMM. */
KERNEL void im2col(const i64 n, GLOBAL T* out, GLOBAL const T* x, GEOM) {
    const i64 gid = GID;
    if (gid >= n) return;
    i64 rem = gid;
    const i64 q = rem % OW; rem /= OW;
    const i64 p = rem % OH; rem /= OH;
    const i64 b = rem % N; rem /= N;
    const i64 j = rem % KW; rem /= KW;
    const i64 i = rem % KH;
    const i64 c = rem / KH;
    const i64 r = p * SH + i * DH - TOP;
    const i64 s = q * SW + j * DW - LEFT;
    T v = (T)0;
    if (r >= 0 && r < H && s >= 0 && s < W) v = x[((b * C + c) * H + r) * W + s];
    out[gid] = v;
}

/* The adjoint of im2col: each pixel gathers the column entries that read it (no atomics). */
KERNEL void col2im(const i64 n, GLOBAL T* out, GLOBAL const T* cols, GEOM) {
    const i64 gid = GID;
    if (gid >= n) return;
    i64 rem = gid;
    const i64 w = rem % W; rem /= W;
    const i64 h = rem % H; rem /= H;
    const i64 c = rem % C;
    const i64 b = rem / C;
    const i64 rp = h + TOP, sp = w + LEFT;
    T acc = (T)0;
    for (i64 i = 0; i < KH; ++i) {
        const i64 rr = rp - i * DH;
        if (rr < 0) break;
        if (rr % SH != 0 || rr / SH >= OH) continue;
        const i64 p = rr / SH;
        for (i64 j = 0; j < KW; ++j) {
            const i64 ss = sp - j * DW;
            if (ss < 0) break;
            if (ss % SW != 0 || ss / SW >= OW) continue;
            const i64 q = ss / SW;
            acc += cols[(((c * KH + i) * KW + j) * N + b) * OH * OW + p * OW + q];
        }
    }
    out[gid] = acc;
}

/* Window (p, q) of image plane bc: the maximum; NaN if the window holds one. */
KERNEL void max_pool(const i64 n, GLOBAL T* out, GLOBAL const T* x, GEOM) {
    const i64 gid = GID;
    if (gid >= n) return;
    const i64 q = gid % OW, p = (gid / OW) % OH, bc = gid / (OW * OH);
    GLOBAL const T* plane = x + bc * H * W;
    T m = NEG_INF;
    for (i64 i = 0; i < KH; ++i) {
        const i64 r = p * SH + i - TOP;
        if (r < 0 || r >= H) continue;
        for (i64 j = 0; j < KW; ++j) {
            const i64 s = q * SW + j - LEFT;
            if (s < 0 || s >= W) continue;
            const T v = plane[r * W + s];
            if (isnan(v)) { out[gid] = v; return; }
            if (v > m) m = v;
        }
    }
    out[gid] = m;
}

/* The flat index in its plane of window (p, q)'s first maximal pixel, or of its first NaN. */
FUNC i64 window_winner(GLOBAL const T* plane, const i64 p, const i64 q, const i64 H,
                       const i64 W, const i64 KH, const i64 KW, const i64 SH, const i64 SW,
                       const i64 TOP, const i64 LEFT) {
    T m = NEG_INF;
    i64 at = -1;
    for (i64 i = 0; i < KH; ++i) {
        const i64 r = p * SH + i - TOP;
        if (r < 0 || r >= H) continue;
        for (i64 j = 0; j < KW; ++j) {
            const i64 s = q * SW + j - LEFT;
            if (s < 0 || s >= W) continue;
            const T v = plane[r * W + s];
            if (isnan(v)) return r * W + s;
            if (at < 0 || v > m) { m = v; at = r * W + s; }
        }
    }
    return at;
}

/* Each pixel gathers dy of the windows whose winner it is. */
KERNEL void max_pool_backward(const i64 n, GLOBAL T* out, GLOBAL const T* x,
                              GLOBAL const T* dy, GEOM) {
    const i64 gid = GID;
    if (gid >= n) return;
    const i64 w = gid % W, h = (gid / W) % H, bc = gid / (W * H);
    GLOBAL const T* plane = x + bc * H * W;
    GLOBAL const T* grad = dy + bc * OH * OW;
    const i64 rp = h + TOP, sp = w + LEFT;
    T acc = (T)0;
    for (i64 i = 0; i < KH; ++i) {
        const i64 rr = rp - i;
        if (rr < 0) break;
        if (rr % SH != 0 || rr / SH >= OH) continue;
        const i64 p = rr / SH;
        for (i64 j = 0; j < KW; ++j) {
            const i64 ss = sp - j;
            if (ss < 0) break;
            if (ss % SW != 0 || ss / SW >= OW) continue;
            const i64 q = ss / SW;
            if (window_winner(plane, p, q, H, W, KH, KW, SH, SW, TOP, LEFT) == h * W + w)
                acc += grad[p * OW + q];
        }
    }
    out[gid] = acc;
}

/* What window (p, q)'s sum is divided by: KH*KW, or the real pixels it covers. */
FUNC T avg_divisor(const i64 p, const i64 q, const i64 H, const i64 W, const i64 KH,
                   const i64 KW, const i64 SH, const i64 SW, const i64 TOP, const i64 LEFT,
                   const int include_pad) {
    if (include_pad) return (T)(KH * KW);
    const i64 r0 = p * SH - TOP, s0 = q * SW - LEFT;
    const i64 rows = (r0 + KH < H ? r0 + KH : H) - (r0 > 0 ? r0 : 0);
    const i64 cols = (s0 + KW < W ? s0 + KW : W) - (s0 > 0 ? s0 : 0);
    return (T)rows * (T)cols;
}

KERNEL void avg_pool(const i64 n, GLOBAL T* out, GLOBAL const T* x, GEOM,
                     const int include_pad) {
    const i64 gid = GID;
    if (gid >= n) return;
    const i64 q = gid % OW, p = (gid / OW) % OH, bc = gid / (OW * OH);
    GLOBAL const T* plane = x + bc * H * W;
    T acc = (T)0;
    for (i64 i = 0; i < KH; ++i) {
        const i64 r = p * SH + i - TOP;
        if (r < 0 || r >= H) continue;
        for (i64 j = 0; j < KW; ++j) {
            const i64 s = q * SW + j - LEFT;
            if (s < 0 || s >= W) continue;
            acc += plane[r * W + s];
        }
    }
    out[gid] = acc / avg_divisor(p, q, H, W, KH, KW, SH, SW, TOP, LEFT, include_pad);
}

KERNEL void avg_pool_backward(const i64 n, GLOBAL T* out, GLOBAL const T* dy, GEOM,
                              const int include_pad) {
    const i64 gid = GID;
    if (gid >= n) return;
    const i64 w = gid % W, h = (gid / W) % H, bc = gid / (W * H);
    GLOBAL const T* grad = dy + bc * OH * OW;
    const i64 rp = h + TOP, sp = w + LEFT;
    T acc = (T)0;
    for (i64 i = 0; i < KH; ++i) {
        const i64 rr = rp - i;
        if (rr < 0) break;
        if (rr % SH != 0 || rr / SH >= OH) continue;
        const i64 p = rr / SH;
        for (i64 j = 0; j < KW; ++j) {
            const i64 ss = sp - j;
            if (ss < 0) break;
            if (ss % SW != 0 || ss / SW >= OW) continue;
            const i64 q = ss / SW;
            acc += grad[p * OW + q]
                   / avg_divisor(p, q, H, W, KH, KW, SH, SW, TOP, LEFT, include_pad);
        }
    }
    out[gid] = acc;
}

/* Row r's maximum, or NaN when the row holds NaN (then the caller writes NaN). */
FUNC T row_max(GLOBAL const T* row, const i64 cols) {
    T m = NEG_INF;
    for (i64 k = 0; k < cols; ++k) {
        const T v = row[k];
        if (isnan(v)) return v;
        if (v > m) m = v;
    }
    return m;
}

/* softmax (log_mode 0) or log_softmax (1) of each row of a (rows, cols) matrix. A row whose
   maximum is not finite (all -inf, +inf or NaN in it) is NaN, as arraycore's reference. */
KERNEL void softmax_rows(const i64 rows, const i64 cols, GLOBAL T* out, GLOBAL const T* x,
                         const int log_mode) {
    const i64 r = GID;
    if (r >= rows) return;
    GLOBAL const T* row = x + r * cols;
    GLOBAL T* o = out + r * cols;
    const T m = row_max(row, cols);
    if (isnan(m) || isinf(m)) {
        for (i64 k = 0; k < cols; ++k) o[k] = NAN_T;
        return;
    }
    T s = (T)0;
    if (log_mode) {
        for (i64 k = 0; k < cols; ++k) s += EXP(row[k] - m);
        const T ls = LOG(s);
        for (i64 k = 0; k < cols; ++k) o[k] = (row[k] - m) - ls;
    } else {  /* each exponential once: kept in o, divided by the sum after */
        for (i64 k = 0; k < cols; ++k) {
            const T e = EXP(row[k] - m);
            o[k] = e;
            s += e;
        }
        for (i64 k = 0; k < cols; ++k) o[k] = o[k] / s;
    }
}

/* softmax's gradient from its output y and the output's gradient dy, per row of (rows, cols):
   y * (dy - sum(dy * y)), the sum in the reference's order. */
KERNEL void softmax_backward_rows(const i64 rows, const i64 cols, GLOBAL T* out,
                                  GLOBAL const T* dy, GLOBAL const T* y) {
    const i64 r = GID;
    if (r >= rows) return;
    GLOBAL const T* g = dy + r * cols;
    GLOBAL const T* p = y + r * cols;
    GLOBAL T* o = out + r * cols;
    T s = (T)0;
    for (i64 k = 0; k < cols; ++k) s += g[k] * p[k];
    for (i64 k = 0; k < cols; ++k) o[k] = p[k] * (g[k] - s);
}

/* Cross-entropy of softmax(row) against an integer label, per row: dlogits = (softmax -
   one_hot) * scale and row_loss = -scale * log_softmax[label] (0 for a label out of range). */
KERNEL void softmax_xent_rows(const i64 rows, const i64 cols, GLOBAL T* dlogits,
                              GLOBAL T* row_loss, GLOBAL const T* x, GLOBAL const i64* labels,
                              const T scale) {
    const i64 r = GID;
    if (r >= rows) return;
    GLOBAL const T* row = x + r * cols;
    GLOBAL T* d = dlogits + r * cols;
    const i64 label = labels[r];
    const int hit = label >= 0 && label < cols;
    const T m = row_max(row, cols);
    if (isnan(m) || isinf(m)) {
        for (i64 k = 0; k < cols; ++k) d[k] = NAN_T;
        row_loss[r] = hit ? NAN_T : (T)0;
        return;
    }
    T s = (T)0;
    for (i64 k = 0; k < cols; ++k) {  /* each exponential once, kept in d */
        const T e = EXP(row[k] - m);
        d[k] = e;
        s += e;
    }
    const T ls = LOG(s);
    for (i64 k = 0; k < cols; ++k) d[k] = (d[k] / s - (k == label ? (T)1 : (T)0)) * scale;
    row_loss[r] = hit ? -scale * ((row[label] - m) - ls) : (T)0;
}

/* ReLU's gradient from its output: dy * (y > 0), as arraycore's reference (NaN from a NaN or
   infinite dy where the unit is off); batch_norm_relu's backward forms it the same way */
#define RELU_GATE(d, y) ((d) * ((y) > (T)0 ? (T)1 : (T)0))
KERNEL void relu_backward(const i64 n, GLOBAL T* out, GLOBAL const T* dy, GLOBAL const T* y) {
    FOR_ELEMENTS(gid, n) out[gid] = RELU_GATE(dy[gid], y[gid]);
}

/* GELU, tanh approximation, with its gate s = 0.5 (1 + tanh(u)) = sigmoid(2u) written through
   e = exp(-2|u|) <= 1: s = 1 / (1 + e) for u >= 0, e / (1 + e) below, and s (1 - s) = e / (1 + e)^2,
   so both tails are exact (no 1 + tanh(u) cancellation that x**3 would magnify in backward). */
FUNC void gelu_gate(const T x, T* s, T* ds) {
    const T k = (T)0.7978845608028654, kc = (T)(0.7978845608028654 * 0.044715);
    const T u = x * (k + kc * x * x);
    const T e = EXP((T)(-2) * (u < (T)0 ? -u : u));
    const T r = (T)1 / ((T)1 + e);
    *s = u >= (T)0 ? r : e * r;
    *ds = e * r * r * ((T)2 * k + (T)6 * kc * x * x);  /* d s / d x: 2 s (1 - s) u' */
}

KERNEL void gelu(const i64 n, GLOBAL T* out, GLOBAL const T* x) {
    FOR_ELEMENTS(gid, n) {
        T s, ds;
        const T v = x[gid];
        gelu_gate(v, &s, &ds);
        out[gid] = v * s;
    }
}

KERNEL void gelu_backward(const i64 n, GLOBAL T* out, GLOBAL const T* dy, GLOBAL const T* x) {
    FOR_ELEMENTS(gid, n) {
        T s, ds;
        const T v = x[gid];
        gelu_gate(v, &s, &ds);
        out[gid] = dy[gid] * (s + ds * v);
    }
}

/* Exact GELU: x Phi(x), Phi(x) = 0.5 erfc(-x / sqrt 2) (erfc: no cancellation in the lower tail);
   the derivative is Phi(x) + x phi(x), phi the standard normal density. */
KERNEL void gelu_erf(const i64 n, GLOBAL T* out, GLOBAL const T* x) {
    FOR_ELEMENTS(gid, n) {
        const T v = x[gid];
        out[gid] = v * (T)0.5 * erfc(-v * (T)0.7071067811865476);
    }
}

KERNEL void gelu_erf_backward(const i64 n, GLOBAL T* out, GLOBAL const T* dy,
                              GLOBAL const T* x) {
    FOR_ELEMENTS(gid, n) {
        const T v = x[gid];
        const T cdf = (T)0.5 * erfc(-v * (T)0.7071067811865476);
        const T pdf = EXP((T)(-0.5) * v * v) * (T)0.3989422804014327;
        out[gid] = dy[gid] * (cdf + v * pdf);
    }
}

/* Layer normalisation of each row of a (rows, d) matrix: mean, biased variance about it (two
   passes, as arraycore's reference), y = (x - mean) * inv_std * gamma + beta. */
KERNEL void layer_norm_rows(const i64 rows, const i64 d, GLOBAL T* y, GLOBAL T* mean,
                            GLOBAL T* inv_std, GLOBAL const T* x, GLOBAL const T* gamma,
                            GLOBAL const T* beta, const T eps) {
    const i64 r = GID;
    if (r >= rows) return;
    GLOBAL const T* row = x + r * d;
    GLOBAL T* out = y + r * d;
    T s = (T)0;
    for (i64 j = 0; j < d; ++j) s += row[j];
    const T m = s / (T)d;
    T v = (T)0;
    for (i64 j = 0; j < d; ++j) v += (row[j] - m) * (row[j] - m);
    const T inv = (T)1 / sqrt(v / (T)d + eps);
    for (i64 j = 0; j < d; ++j) out[j] = (row[j] - m) * inv * gamma[j] + beta[j];
    mean[r] = m;
    inv_std[r] = inv;
}

/* dx of layer_norm_rows, row by row: inv_std (g - mean(g) - x_hat mean(g x_hat)), g = dy gamma. */
KERNEL void layer_norm_backward_rows(const i64 rows, const i64 d, GLOBAL T* dx,
                                     GLOBAL const T* dy, GLOBAL const T* x,
                                     GLOBAL const T* gamma, GLOBAL const T* mean,
                                     GLOBAL const T* inv_std) {
    const i64 r = GID;
    if (r >= rows) return;
    GLOBAL const T* row = x + r * d;
    GLOBAL const T* grad = dy + r * d;
    GLOBAL T* out = dx + r * d;
    const T m = mean[r], inv = inv_std[r];
    T sg = (T)0, sgx = (T)0;
    for (i64 j = 0; j < d; ++j) {
        const T g = grad[j] * gamma[j];
        sg += g;
        sgx += g * (row[j] - m) * inv;
    }
    sg /= (T)d;
    sgx /= (T)d;
    for (i64 j = 0; j < d; ++j)
        out[j] = (grad[j] * gamma[j] - sg - (row[j] - m) * inv * sgx) * inv;
}

/* dgamma and dbeta of layer_norm_rows: column j sums dy x_hat and dy over the rows. */
KERNEL void layer_norm_param_grads(const i64 rows, const i64 d, GLOBAL T* dgamma,
                                   GLOBAL T* dbeta, GLOBAL const T* dy, GLOBAL const T* x,
                                   GLOBAL const T* mean, GLOBAL const T* inv_std) {
    const i64 j = GID;
    if (j >= d) return;
    T sg = (T)0, sb = (T)0;
    for (i64 r = 0; r < rows; ++r) {
        const T g = dy[r * d + j];
        sg += g * (x[r * d + j] - mean[r]) * inv_std[r];
        sb += g;
    }
    dgamma[j] = sg;
    dbeta[j] = sb;
}

/* The work item of a recurrent cell kernel: row R and unit J of the (rows, H) state, gid its
   flat index. A build defining ROW_UNIT_2D launches them over a 2-D range (H, rows) instead of
   n = rows * H items: no 64-bit division per item, which a CPU device cannot vectorise (PoCL:
   lstm_cell_forward 46 -> 22 us at N=32, H=128). */
#ifdef ROW_UNIT_2D
#define ROW_UNIT(R, J)                                                                 \
    const i64 J = (i64)get_global_id(0), R = (i64)get_global_id(1);                    \
    if (J >= H) return;                                                                \
    const i64 gid = R * H + J;
#else
#define ROW_UNIT(R, J)                                                                 \
    const i64 gid = GID;                                                               \
    if (gid >= n) return;                                                              \
    const i64 R = gid / H, J = gid % H;
#endif

/* One GRU step t (arraycore._nn_gru's conventions, gates r, z, n): hid = h_{t-1} @ u (when
   has_h; zero before the first state) plus the recurrent bias b, then r, z = sigmoid(xw + hid)
   as 0.5 tanh(0.5 v) + 0.5, n = tanh(xw_n + r hid_n), h = n + z (h_{t-1} - n) (n - z n without
   a state). Writes y, the gates ru, the candidate and hid_n of step t, and h (N, H) in place
   (each work item reads and writes only its own element). */
KERNEL void gru_cell_forward(const i64 n, const i64 H, const i64 steps, const i64 t,
                             const int has_h, GLOBAL const T* hid, GLOBAL const T* xw,
                             GLOBAL const T* b, GLOBAL T* h, GLOBAL T* ru, GLOBAL T* cand,
                             GLOBAL T* rec_n, GLOBAL T* y) {
    ROW_UNIT(row, j)
    GLOBAL const T* pre = xw + (row * steps + t) * 3 * H;
    T hr = b[j], hz = b[H + j], hn = b[2 * H + j];
    if (has_h) {
        GLOBAL const T* g = hid + row * 3 * H;
        hr = g[j] + hr;
        hz = g[H + j] + hz;
        hn = g[2 * H + j] + hn;
    }
    const T r = tanh((pre[j] + hr) * (T)0.5) * (T)0.5 + (T)0.5;
    const T z = tanh((pre[H + j] + hz) * (T)0.5) * (T)0.5 + (T)0.5;
    const T c = tanh(pre[2 * H + j] + r * hn);
    const T out = has_h ? c + z * (h[gid] - c) : c - z * c;
    const i64 at = (row * steps + t) * H + j;
    GLOBAL T* g2 = ru + (row * steps + t) * 2 * H;
    g2[j] = r;
    g2[H + j] = z;
    cand[at] = c;
    rec_n[at] = hn;
    y[at] = out;
    h[gid] = out;
}

/* The gradient through GRU step t: dh = dy[:, t] + (g + dhz) (has_g: g = dhid_{t+1} @ u^T, dhz
   = dh_{t+1} z_{t+1} from the step after), the pre-activation gradients dxw[:, t] and dhid[:, t]
   ([dr, dz, dn r]), and dh z_t into dhz in place for step t - 1. h_{t-1} is y[:, t-1], or h0
   (has_h0), or zero. */
KERNEL void gru_cell_backward(const i64 n, const i64 H, const i64 steps, const i64 t,
                              const int has_g, const int has_h0, GLOBAL const T* dy,
                              GLOBAL const T* g, GLOBAL T* dhz, GLOBAL const T* h0,
                              GLOBAL const T* y, GLOBAL const T* ru, GLOBAL const T* cand,
                              GLOBAL const T* rec_n, GLOBAL T* dxw, GLOBAL T* dhid) {
    ROW_UNIT(row, j)
    const i64 at = (row * steps + t) * H + j;
    T dh = dy[at];
    if (has_g) dh = dh + (g[gid] + dhz[gid]);
    T h_prev = (T)0;
    if (t > 0) h_prev = y[at - H];
    else if (has_h0) h_prev = h0[gid];
    GLOBAL const T* g2 = ru + (row * steps + t) * 2 * H;
    const T r = g2[j], z = g2[H + j], c = cand[at];
    const T dn = dh * (((T)1 - z) * ((T)1 - c * c));
    const T dr = dn * (rec_n[at] * (r * ((T)1 - r)));
    const T dz = dh * ((h_prev - c) * (z * ((T)1 - z)));
    const i64 base = (row * steps + t) * 3 * H;
    dxw[base + j] = dr;
    dxw[base + H + j] = dz;
    dxw[base + 2 * H + j] = dn;
    dhid[base + j] = dr;
    dhid[base + H + j] = dz;
    dhid[base + 2 * H + j] = dn * r;
    dhz[gid] = dh * z;
}

/* Sums over one row of a chunk in eight interleaved partial sums, combined pairwise, then the
   tail: eight independent chains of adds instead of one (a CPU device's work-item otherwise
   waits on every add: PoCL 3-4x faster) and shorter accumulation chains. sum(row) and
   sum((row - m)**2); row_dy_dyx8 makes sum(dy) and sum(dy (x - m)) in one pass. */
#define BN_PAIRWISE(p) \
    ((((p)[0] + (p)[1]) + ((p)[2] + (p)[3])) + (((p)[4] + (p)[5]) + ((p)[6] + (p)[7])))
#define BN_SUM8(ITEM, LEN)                                                      \
    T p[8] = {(T)0, (T)0, (T)0, (T)0, (T)0, (T)0, (T)0, (T)0};                  \
    i64 j = 0;                                                                  \
    for (; j + 8 <= (LEN); j += 8)                                              \
        for (int u = 0; u < 8; ++u) p[u] += ITEM(j + u);                        \
    T s = BN_PAIRWISE(p);                                                       \
    for (; j < (LEN); ++j) s += ITEM(j);                                        \
    return s;

#define BN_ROW(i) row[i]
#define BN_SQDEV(i) ((row[i] - m) * (row[i] - m))
FUNC T row_sum8(GLOBAL const T* row, const i64 len) { BN_SUM8(BN_ROW, len) }
FUNC T row_sqdev8(GLOBAL const T* row, const i64 len, const T m) { BN_SUM8(BN_SQDEV, len) }
/* sum(g) and sum(g (x - m)) of a row, g = dy, or dy * (y > 0) with a ReLU's output y (gate):
   the two branches are written out so that the common one stays the plain unrolled loop */
#define BN_DY_DYX8(G)                                                                            \
    T p[8] = {(T)0, (T)0, (T)0, (T)0, (T)0, (T)0, (T)0, (T)0};                                   \
    T q[8] = {(T)0, (T)0, (T)0, (T)0, (T)0, (T)0, (T)0, (T)0};                                   \
    i64 j = 0;                                                                                   \
    for (; j + 8 <= len; j += 8)                                                                 \
        for (int u = 0; u < 8; ++u) {                                                            \
            const T g = G(j + u);                                                                \
            p[u] += g;                                                                           \
            q[u] += g * (x[j + u] - m);                                                          \
        }                                                                                        \
    T sa = BN_PAIRWISE(p), sb = BN_PAIRWISE(q);                                                  \
    for (; j < len; ++j) {                                                                       \
        const T g = G(j);                                                                        \
        sa += g;                                                                                 \
        sb += g * (x[j] - m);                                                                    \
    }                                                                                            \
    *a += sa;                                                                                    \
    *b += sb;
#define BN_PLAIN(k) dy[k]
#define BN_GATED(k) RELU_GATE(dy[k], y[k])
FUNC void row_dy_dyx8(GLOBAL const T* dy, GLOBAL const T* x, const i64 len, const T m, T* a,
                      T* b) {
    BN_DY_DYX8(BN_PLAIN)
}
FUNC void row_gated_dyx8(GLOBAL const T* dy, GLOBAL const T* y, GLOBAL const T* x,
                         const i64 len, const T m, T* a, T* b) {
    BN_DY_DYX8(BN_GATED)
}

/* Batch normalisation of (N, C, HW) x per channel c (HW = 1 for (N, C) input), in three
   launches each way. Statistics: work item (c, k) takes chunk k of channel c, the samples
   [k*spc, min(N, (k+1)*spc)) at every position, and writes its mean and its sum of squared
   deviations about that mean (two passes over a chunk small enough to stay in cache). */
KERNEL void bn_chunk_stats(const i64 C, const i64 N, const i64 HW, const i64 spc,
                           const i64 chunks, GLOBAL T* part_mean, GLOBAL T* part_m2,
                           GLOBAL const T* x) {
    const i64 id = GID;
    if (id >= C * chunks) return;
    const i64 c = id / chunks, k = id % chunks;
    const i64 n0 = k * spc, n1 = (n0 + spc < N) ? n0 + spc : N;
    T s = (T)0;
    for (i64 n = n0; n < n1; ++n) s += row_sum8(x + (n * C + c) * HW, HW);
    const T m = s / (T)((n1 - n0) * HW);
    T q = (T)0;
    for (i64 n = n0; n < n1; ++n) q += row_sqdev8(x + (n * C + c) * HW, HW, m);
    part_mean[id] = m;
    part_m2[id] = q;
}

/* Per channel: the chunks' (count, mean, M2) merged in chunk order (Chan, Golub and LeVeque's
   pairwise update), the biased variance M2 / count, inv_std = 1 / sqrt(var + eps). */
KERNEL void bn_merge_stats(const i64 C, const i64 N, const i64 HW, const i64 spc,
                           const i64 chunks, GLOBAL T* mean, GLOBAL T* inv_std,
                           GLOBAL const T* part_mean, GLOBAL const T* part_m2, const T eps) {
    const i64 c = GID;
    if (c >= C) return;
    T count = (T)0, m = (T)0, m2 = (T)0;
    for (i64 k = 0; k < chunks; ++k) {
        const i64 n0 = k * spc, n1 = (n0 + spc < N) ? n0 + spc : N;
        const T nk = (T)((n1 - n0) * HW);
        const T total = count + nk;
        const T d = part_mean[c * chunks + k] - m;
        m += d * (nk / total);
        m2 += part_m2[c * chunks + k] + d * d * (count * nk / total);
        count = total;
    }
    mean[c] = m;
    inv_std[c] = (T)1 / sqrt(m2 / count + eps);
}

/* y = (x - mean) * (inv_std gamma) + beta, one work item per element; with relu, max(y, 0)
   by maximum's rule (NaN stays NaN, -0 becomes +0). */
KERNEL void bn_normalize(const i64 n, const i64 C, const i64 HW, const int relu, GLOBAL T* y,
                         GLOBAL const T* x, GLOBAL const T* mean, GLOBAL const T* inv_std,
                         GLOBAL const T* gamma, GLOBAL const T* beta) {
    const i64 i = GID;
    if (i >= n) return;
    const i64 c = (i / HW) % C;
    const T v = (x[i] - mean[c]) * (inv_std[c] * gamma[c]) + beta[c];
    y[i] = (relu && !(v > (T)0) && v == v) ? (T)0 : v;
}

/* The gradient reaching batch norm: dy, or with a ReLU after it (has_y) dy * (y > 0) from the
   ReLU's output y, as relu_backward makes it. */
FUNC T bn_gated(GLOBAL const T* dy, GLOBAL const T* y, const int has_y, const i64 i) {
    return has_y ? RELU_GATE(dy[i], y[i]) : dy[i];
}

/* Backward statistics per (channel, chunk) as bn_chunk_stats: sum(dy), sum(dy (x - mean)). */
KERNEL void bn_chunk_grads(const i64 C, const i64 N, const i64 HW, const i64 spc,
                           const i64 chunks, const int has_y, GLOBAL T* part_dy,
                           GLOBAL T* part_dyx, GLOBAL const T* dy, GLOBAL const T* y,
                           GLOBAL const T* x, GLOBAL const T* mean) {
    const i64 id = GID;
    if (id >= C * chunks) return;
    const i64 c = id / chunks, k = id % chunks;
    const i64 n0 = k * spc, n1 = (n0 + spc < N) ? n0 + spc : N;
    const T m = mean[c];
    T a = (T)0, b = (T)0;
    for (i64 n = n0; n < n1; ++n) {
        const i64 at = (n * C + c) * HW;
        if (has_y) /* the ReLU's gradient formed as dy is read */
            row_gated_dyx8(dy + at, y + at, x + at, HW, m, &a, &b);
        else
            row_dy_dyx8(dy + at, x + at, HW, m, &a, &b);
    }
    part_dy[id] = a;
    part_dyx[id] = b;
}

/* Per channel: dbeta = sum(dy), dgamma = sum(dy (x - mean)) inv_std, chunks in order. */
KERNEL void bn_merge_grads(const i64 C, const i64 chunks, GLOBAL T* dgamma, GLOBAL T* dbeta,
                           GLOBAL const T* part_dy, GLOBAL const T* part_dyx,
                           GLOBAL const T* inv_std) {
    const i64 c = GID;
    if (c >= C) return;
    T a = (T)0, b = (T)0;
    for (i64 k = 0; k < chunks; ++k) {
        a += part_dy[c * chunks + k];
        b += part_dyx[c * chunks + k];
    }
    dbeta[c] = a;
    dgamma[c] = b * inv_std[c];
}

/* dx = (dy - dbeta / count - x_hat dgamma / count) (inv_std gamma), one work item per element. */
KERNEL void bn_backward_data(const i64 n, const i64 C, const i64 HW, const T count,
                             const int has_y, GLOBAL T* dx, GLOBAL const T* dy,
                             GLOBAL const T* y, GLOBAL const T* x, GLOBAL const T* mean,
                             GLOBAL const T* inv_std, GLOBAL const T* gamma,
                             GLOBAL const T* dgamma, GLOBAL const T* dbeta) {
    const i64 i = GID;
    if (i >= n) return;
    const i64 c = (i / HW) % C;
    const T inv = inv_std[c];
    const T x_hat = (x[i] - mean[c]) * inv;
    const T g = bn_gated(dy, y, has_y, i);
    dx[i] = (g - dbeta[c] / count - x_hat * (dgamma[c] / count)) * (inv * gamma[c]);
}

/* One LSTM step t (gates i, f, g, o; arraycore._nn_rnn's conventions): the pre-activations are
   xs[:, t] (+ z = h_{t-1} @ u when has_h), both with the per-gate scale folded in, so that each
   gate is tanh(pre) * scale + shift. Writes the gates, c, tanh(c) and h = y[:, t] of step t
   into the (N, steps, .) arrays and updates c and h (N, H) in place (each work item reads and
   writes only its own element). */
KERNEL void lstm_cell_forward(const i64 n, const i64 H, const i64 steps, const i64 t,
                              const int has_h, const int has_c, GLOBAL const T* z,
                              GLOBAL const T* xs, GLOBAL T* c, GLOBAL T* h, GLOBAL T* gates,
                              GLOBAL T* cs, GLOBAL T* tanh_c, GLOBAL T* y) {
    ROW_UNIT(r, j)
    GLOBAL const T* pre = xs + (r * steps + t) * 4 * H + j;
    GLOBAL T* gt = gates + (r * steps + t) * 4 * H + j;
    /* the four gates written out (no private array, no branch per gate: a CPU's compiler
       vectorises the work-items of a group) */
    T p0 = pre[0], p1 = pre[H], p2 = pre[2 * H], p3 = pre[3 * H];
    if (has_h) {
        GLOBAL const T* zr = z + r * 4 * H + j;
        p0 = zr[0] + p0;
        p1 = zr[H] + p1;
        p2 = zr[2 * H] + p2;
        p3 = zr[3 * H] + p3;
    }
    const T a0 = tanh(p0) * (T)0.5 + (T)0.5, a1 = tanh(p1) * (T)0.5 + (T)0.5;
    const T a2 = tanh(p2), a3 = tanh(p3) * (T)0.5 + (T)0.5;
    gt[0] = a0;
    gt[H] = a1;
    gt[2 * H] = a2;
    gt[3 * H] = a3;
    T cell = a0 * a2;
    if (has_c) cell = a1 * c[gid] + cell;
    const T tc = tanh(cell);
    const T out = a3 * tc;
    const i64 at = (r * steps + t) * H + j;
    cs[at] = cell;
    tanh_c[at] = tc;
    y[at] = out;
    c[gid] = cell;
    h[gid] = out;
}

/* The gradient through LSTM step t: from dh = dh_next (has_dh) + dy[:, t] (has_dy) and dc_next
   (has_dc), the pre-activation gradients dz[:, t] (also into the dense (N, 4H) dz_t, the
   recurrent product's operand) and dc_next * f in place of dc for step t - 1. */
KERNEL void lstm_cell_backward(const i64 n, const i64 H, const i64 steps, const i64 t,
                               const int has_dy, const int has_dh, const int has_dc,
                               const int has_c0, GLOBAL const T* dy, GLOBAL const T* dh_next,
                               GLOBAL T* dc, GLOBAL const T* c0, GLOBAL const T* gates,
                               GLOBAL const T* cs, GLOBAL const T* tanh_c, GLOBAL T* dz,
                               GLOBAL T* dz_t) {
    ROW_UNIT(r, j)
    const i64 at = (r * steps + t) * H + j;
    GLOBAL const T* gt = gates + (r * steps + t) * 4 * H;
    const T i = gt[j], f = gt[H + j], g = gt[2 * H + j], o = gt[3 * H + j];
    const T tc = tanh_c[at];
    T dh = (T)0;
    if (has_dh) dh = dh_next[gid];
    if (has_dy) dh = dh + dy[at];
    T dcell = dh * (o * ((T)1 - tc * tc));
    if (has_dc) dcell = dcell + dc[gid];
    T c_prev = (T)0;
    if (t > 0) c_prev = cs[at - H];
    else if (has_c0) c_prev = c0[gid];
    const T d0 = g * (i * ((T)1 - i)) * dcell;
    const T d1 = c_prev * (f * ((T)1 - f)) * dcell;
    const T d2 = i * (g * ((T)0 - g) + (T)1) * dcell;
    const T d3 = tc * (o * ((T)1 - o)) * dh;
    GLOBAL T* out = dz + (r * steps + t) * 4 * H + j;
    GLOBAL T* dense = dz_t + r * 4 * H + j;
    out[0] = d0;
    out[H] = d1;
    out[2 * H] = d2;
    out[3 * H] = d3;
    dense[0] = d0;
    dense[H] = d1;
    dense[2 * H] = d2;
    dense[3 * H] = d3;
    dc[gid] = dcell * f;
}
/* -- scaled dot-product attention, fused: no (Tq, Tk) array is ever written. The leading axes
   of q (..., Tq, D), k (..., Tk, D), v (..., Tk, Dv) are flattened to one batch axis b; the
   mask's offset for batch b is found from the last three leading sizes L1..L3 (the first is
   implied) and its element strides MS0..MS3, MSQ, MSK (0 along broadcast axes). mask_kind: 0 no
   mask, 1 boolean (mb: keep where nonzero), 2 added to the scores (ma). */

FUNC i64 attn_mask_base(const i64 b, const i64 L1, const i64 L2, const i64 L3, const i64 MS0,
                        const i64 MS1, const i64 MS2, const i64 MS3) {
    const i64 i3 = b % L3, b2 = b / L3;
    const i64 i2 = b2 % L2, b1 = b2 / L2;
    return (b1 / L1) * MS0 + (b1 % L1) * MS1 + i2 * MS2 + i3 * MS3;
}

/* The score of query row qi against key row kj: (qi . kj) * scale, masked. */
FUNC T attn_score(GLOBAL const T* qi, GLOBAL const T* kj, const i64 D, const T scale,
                  const int mask_kind, GLOBAL const unsigned char* mb, GLOBAL const T* ma,
                  const i64 at, const int causal, const i64 i, const i64 j) {
    T s = (T)0;
    for (i64 c = 0; c < D; ++c) s += qi[c] * kj[c];
    s = s * scale;
    if (mask_kind == 2) s = s + ma[at];
    else if (mask_kind == 1 && !mb[at]) s = NEG_INF;
    if (causal && j > i) s = NEG_INF;
    return s;
}

/* One work item per query row r = b * Tq + i, one pass over the keys (online softmax, as flash
   attention): the running maximum m, the running sum l of exp(s - m) and the running output,
   both rescaled by exp(m_old - m) when the maximum grows; at the end out /= l and lse = m +
   log(l). A row whose keys the mask all excludes (l == 0) keeps its output 0 and gets lse =
   +inf, so that backward's p = exp(s - lse) is 0 (as the reference; PyTorch's _safe_softmax);
   one holding NaN or +inf is NaN. */
KERNEL void attn_forward(const i64 rows, const i64 Tq, const i64 Tk, const i64 D, const i64 Dv,
                         GLOBAL T* out, GLOBAL T* lse, GLOBAL const T* q, GLOBAL const T* k,
                         GLOBAL const T* v, ATTN_MASK, const int has_drop,
                         GLOBAL const T* drop, const T scale) {
    const i64 r = GID;
    if (r >= rows) return;
    const i64 b = r / Tq, i = r - b * Tq;
    GLOBAL const T* qi = q + r * D;
    GLOBAL const T* kb = k + b * Tk * D;
    GLOBAL const T* vb = v + b * Tk * Dv;
    GLOBAL T* o = out + r * Dv;
    const i64 base = attn_mask_base(b, L1, L2, L3, MS0, MS1, MS2, MS3) + i * MSQ;
    for (i64 c = 0; c < Dv; ++c) o[c] = (T)0;
    T m = NEG_INF, l = (T)0;
    for (i64 j = 0; j < Tk; ++j) {
        const T s = attn_score(qi, kb + j * D, D, scale, mask_kind, mb, ma, base + j * MSK,
                               causal, i, j);
        if (s > m) {
            const T shrink = EXP(m - s);
            l = l * shrink;
            for (i64 c = 0; c < Dv; ++c) o[c] = o[c] * shrink;
            m = s;
        }
        const T p = s == NEG_INF ? (T)0 : EXP(s - m);
        l += p;
        const T pd = has_drop ? p * drop[r * Tk + j] : p;
        GLOBAL const T* vj = vb + j * Dv;
        for (i64 c = 0; c < Dv; ++c) o[c] += pd * vj[c];
    }
    if (l == (T)0 && mask_kind) {
        lse[r] = -NEG_INF;
        return;
    }
    for (i64 c = 0; c < Dv; ++c) o[c] = o[c] / l;
    lse[r] = m + LOG(l);
}

/* Backward, one work item per query row r: delta_r = dy_r . out_r (= sum_j p dp), then
   dq_r = sum_j p (dp - delta_r) scale k_j with p = exp(s - lse_r), dp = (dy_r . v_j) drop. */
KERNEL void attn_backward_query(const i64 rows, const i64 Tq, const i64 Tk, const i64 D,
                                const i64 Dv, GLOBAL T* dq, GLOBAL T* delta, GLOBAL const T* dy,
                                GLOBAL const T* out, GLOBAL const T* q, GLOBAL const T* k,
                                GLOBAL const T* v, GLOBAL const T* lse, ATTN_MASK,
                                const int has_drop, GLOBAL const T* drop, const T scale) {
    const i64 r = GID;
    if (r >= rows) return;
    const i64 b = r / Tq, i = r - b * Tq;
    GLOBAL const T* qi = q + r * D;
    GLOBAL const T* dyr = dy + r * Dv;
    GLOBAL const T* kb = k + b * Tk * D;
    GLOBAL const T* vb = v + b * Tk * Dv;
    GLOBAL T* g = dq + r * D;
    const i64 base = attn_mask_base(b, L1, L2, L3, MS0, MS1, MS2, MS3) + i * MSQ;
    T dl = (T)0;
    for (i64 c = 0; c < Dv; ++c) dl += dyr[c] * out[r * Dv + c];
    delta[r] = dl;
    const T row_lse = lse[r];
    for (i64 c = 0; c < D; ++c) g[c] = (T)0;
    for (i64 j = 0; j < Tk; ++j) {
        GLOBAL const T* kj = kb + j * D;
        const T p = EXP(attn_score(qi, kj, D, scale, mask_kind, mb, ma, base + j * MSK, causal,
                                   i, j) - row_lse);
        T dp = (T)0;
        for (i64 c = 0; c < Dv; ++c) dp += dyr[c] * vb[j * Dv + c];
        if (has_drop) dp = dp * drop[r * Tk + j];
        const T ds = p * (dp - dl) * scale;
        for (i64 c = 0; c < D; ++c) g[c] += ds * kj[c];
    }
}

/* Backward, one work item per key row kr = b * Tk + j (after attn_backward_query, whose delta
   it reads): dv_j = sum_i p drop dy_i and dk_j = sum_i p (dp - delta_i) scale q_i. */
KERNEL void attn_backward_key(const i64 keys, const i64 Tq, const i64 Tk, const i64 D,
                              const i64 Dv, GLOBAL T* dk, GLOBAL T* dv, GLOBAL const T* dy,
                              GLOBAL const T* q, GLOBAL const T* k, GLOBAL const T* v,
                              GLOBAL const T* lse, GLOBAL const T* delta, ATTN_MASK,
                              const int has_drop, GLOBAL const T* drop, const T scale) {
    const i64 kr = GID;
    if (kr >= keys) return;
    const i64 b = kr / Tk, j = kr - b * Tk;
    GLOBAL const T* kj = k + kr * D;
    GLOBAL const T* vj = v + kr * Dv;
    GLOBAL T* gk = dk + kr * D;
    GLOBAL T* gv = dv + kr * Dv;
    const i64 base = attn_mask_base(b, L1, L2, L3, MS0, MS1, MS2, MS3) + j * MSK;
    for (i64 c = 0; c < D; ++c) gk[c] = (T)0;
    for (i64 c = 0; c < Dv; ++c) gv[c] = (T)0;
    for (i64 i = 0; i < Tq; ++i) {
        const i64 r = b * Tq + i;
        GLOBAL const T* qi = q + r * D;
        GLOBAL const T* dyr = dy + r * Dv;
        const T p = EXP(attn_score(qi, kj, D, scale, mask_kind, mb, ma, base + i * MSQ, causal,
                                   i, j) - lse[r]);
        const T m = has_drop ? drop[r * Tk + j] : (T)1;
        const T pd = p * m;
        T dp = (T)0;
        for (i64 c = 0; c < Dv; ++c) {
            dp += dyr[c] * vj[c];
            gv[c] += pd * dyr[c];
        }
        const T ds = p * (dp * m - delta[r]) * scale;
        for (i64 c = 0; c < D; ++c) gk[c] += ds * qi[c];
    }
}
"""


#: Kernels whose work items each take ``ELEMENT_RUN`` consecutive elements of ``n`` (their first
#: argument): one on GPUs, :data:`ELEMENT_RUN_CPU` on CPU OpenCL devices (``AC_PIECES``), whose
#: launches then cover ``ceil(n / ELEMENT_RUN_CPU)`` work items.
ELEMENT_KERNELS = frozenset(
    ("relu_backward", "gelu", "gelu_backward", "gelu_erf", "gelu_erf_backward")
)
#: Elements per work item of :data:`ELEMENT_KERNELS` on CPU OpenCL devices.
ELEMENT_RUN_CPU = 256


def source(dtype: str, dialect: str = "cuda") -> str:
    """The kernels for ``dtype`` (``float32``/``float64``) as CUDA C++ or OpenCL C."""
    if dtype not in DTYPES:
        raise ValueError(f"the nn kernel sources exist for {DTYPES}, not {dtype!r}")
    if dialect not in _WORDS:
        raise ValueError(f"dialect must be 'cuda' or 'opencl', got {dialect!r}")
    words = {**_WORDS[dialect], "T": _CTYPES[dtype]}
    text = _BODY.replace("GEOM", GEOM).replace("ATTN_MASK", ATTN_MASK)
    text = text.replace("ELEMENT_RUN_CPU", str(ELEMENT_RUN_CPU))
    text = re.sub(r"\b(" + "|".join(words) + r")\b", lambda m: words[m.group(1)], text)
    return _PRELUDES[dialect, dtype] + text


def geometry(win: Any) -> tuple[np.int64, ...]:
    """The ``GEOM`` arguments of a window (:class:`arraycore.nn_shapes.Window2d`)."""
    (top, _), (left, _) = win.pads
    values = (
        win.n, win.c, win.h, win.w, win.kh, win.kw, win.out_h, win.out_w, *win.stride,
        *win.dilation, top, left,
    )  # fmt: skip
    return tuple(np.int64(v) for v in values)


#: Longest row the one-work-item-per-row softmax kernels take; longer rows use the reference.
SOFTMAX_MAX_ROW: int = 4096

#: The ``xp.nn`` functions :class:`KernelHost` serves (as ``shared_<name>`` methods).
SHARED_NN: tuple[str, ...] = (
    "conv2d",
    "conv2d_backward_data",
    "conv2d_backward_filter",
    "conv2d_transpose",
    "max_pool2d",
    "max_pool2d_backward",
    "avg_pool2d",
    "avg_pool2d_backward",
    "softmax",
    "log_softmax",
    "softmax_backward",
    "softmax_cross_entropy",
    "gelu",
    "gelu_backward",
    "relu_backward",
    "batch_norm",
    "batch_norm_backward",
    "layer_norm",
    "layer_norm_backward",
    "lstm",
    "lstm_backward",
    "gru_sequence",
    "gru_sequence_backward",
    "scaled_dot_product_attention",
    "scaled_dot_product_attention_backward",
)


def __getattr__(name: str) -> Any:
    """``KernelHost`` lives in :mod:`arraycore.kernel_host` (which imports this module)."""
    if name == "KernelHost":
        from .kernel_host import KernelHost

        return KernelHost
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DTYPES",
    "GEOM",
    "KERNELS",
    "SHARED_NN",
    "SOFTMAX_MAX_ROW",
    "geometry",
    "source",
]
