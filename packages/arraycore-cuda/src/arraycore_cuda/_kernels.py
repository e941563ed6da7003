"""The CUDA backend's own kernels: im2col/col2im, max/avg pooling, row softmax, cross-entropy.

The kernels are written once in a small C dialect (``KERNEL``, ``GLOBAL``, ``GID``, ``i64``,
``EXP``/``LOG``, ``NEG_INF``/``NAN_T``) that a prelude turns into CUDA C++ for NVRTC (through
``cupy.RawModule``) or into OpenCL C. The CUDA build is what the backend runs; the OpenCL build
exists so that the very same kernel bodies are executed and checked against arraycore's NumPy
reference on machines without an NVIDIA GPU (PoCL, in this repository's CI), and NVRTC compiles
the CUDA build there too. Neither replaces running on a GPU; together they catch wrong indexing,
wrong NaN/-inf handling and code that does not compile.

Every kernel reads and writes C-contiguous arrays (the backend makes its inputs contiguous) and
takes its geometry as scalar arguments, so launching one needs no host-to-device copy and no
synchronisation. One thread computes one output element (one row for the softmax family), in
the same order as the reference where it sums.
"""

from __future__ import annotations

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
    "softmax_xent_rows",
)

#: dtypes the kernels are built for; float16 goes through arraycore's derived kernels.
DTYPES = ("float32", "float64")

#: Threads per block of every launch.
BLOCK = 256

#: Options for NVRTC (CuPy adds ``-ftz=true`` and the architecture of the device itself). The
#: source is plain C in C++ clothing, so no language standard is asked for.
NVRTC_OPTIONS: tuple[str, ...] = ()

_CUDA_PRELUDE = """
#define KERNEL extern "C" __global__
#define GLOBAL
#define FUNC static __device__ __forceinline__
#define GID ((i64)blockIdx.x * (i64)blockDim.x + (i64)threadIdx.x)
typedef long long i64;
"""

_CUDA_TYPES = {
    "float32": """
typedef float T;
#define EXP expf
#define LOG logf
#define NEG_INF (-__int_as_float(0x7f800000))
#define NAN_T __int_as_float(0x7fffffff)
""",
    "float64": """
typedef double T;
#define EXP exp
#define LOG log
#define NEG_INF (-__longlong_as_double(0x7ff0000000000000LL))
#define NAN_T __longlong_as_double(0x7ff8000000000000LL)
""",
}

_OPENCL_PRELUDE = """
#define KERNEL __kernel
#define GLOBAL __global
#define FUNC static
#define GID ((i64)get_global_id(0))
typedef long i64;
"""

_OPENCL_TYPES = {
    "float32": """
typedef float T;
#define EXP exp
#define LOG log
#define NEG_INF (-INFINITY)
#define NAN_T NAN
""",
    "float64": """
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
typedef double T;
#define EXP exp
#define LOG log
#define NEG_INF (-(double)INFINITY)
#define NAN_T ((double)NAN)
""",
}

# Geometry of a convolution or pooling window, in every nn kernel's argument list: the image
# (N, C, H, W), the kernel (KH, KW), the output (OH, OW), stride, dilation, top/left padding.
_BODY = r"""
#define GEOM const i64 N, const i64 C, const i64 H, const i64 W, const i64 KH, const i64 KW, \
             const i64 OH, const i64 OW, const i64 SH, const i64 SW, const i64 DH, \
             const i64 DW, const i64 TOP, const i64 LEFT

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
    for (i64 k = 0; k < cols; ++k) s += EXP(row[k] - m);
    if (log_mode) {
        const T ls = LOG(s);
        for (i64 k = 0; k < cols; ++k) o[k] = (row[k] - m) - ls;
    } else {
        for (i64 k = 0; k < cols; ++k) o[k] = EXP(row[k] - m) / s;
    }
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
    for (i64 k = 0; k < cols; ++k) s += EXP(row[k] - m);
    const T ls = LOG(s);
    for (i64 k = 0; k < cols; ++k) {
        const T log_p = (row[k] - m) - ls;
        d[k] = (EXP(log_p) - (k == label ? (T)1 : (T)0)) * scale;
    }
    row_loss[r] = hit ? -scale * ((row[label] - m) - ls) : (T)0;
}
"""


def source(dtype: str, dialect: str = "cuda") -> str:
    """The kernels for ``dtype`` (``float32``/``float64``) as CUDA C++ or OpenCL C."""
    if dtype not in DTYPES:
        raise ValueError(f"arraycore-cuda kernels exist for {DTYPES}, not {dtype!r}")
    if dialect == "cuda":
        return _CUDA_PRELUDE + _CUDA_TYPES[dtype] + _BODY
    if dialect == "opencl":
        return _OPENCL_PRELUDE + _OPENCL_TYPES[dtype] + _BODY
    raise ValueError(f"dialect must be 'cuda' or 'opencl', got {dialect!r}")


def geometry(win: Any) -> tuple[np.int64, ...]:
    """The ``GEOM`` arguments of a window (arraycore's ``Window2d``)."""
    (top, _), (left, _) = win.pads
    values = (
        win.n, win.c, win.h, win.w, win.kh, win.kw, win.out_h, win.out_w, *win.stride,
        *win.dilation, top, left,
    )  # fmt: skip
    return tuple(np.int64(v) for v in values)


class CudaKernels:
    """The kernels of :func:`source` on one device, compiled by NVRTC on first use per dtype.

    ``cupy.RawModule`` caches the compiled binary on disk (``~/.cupy/kernel_cache``), so only the
    first run on a machine pays for NVRTC.
    """

    def __init__(self, cupy: Any) -> None:
        self._cp = cupy
        self._functions: dict[tuple[str, str], Any] = {}

    def function(self, dtype: np.dtype, name: str) -> Any:
        key = (np.dtype(dtype).name, name)
        fn = self._functions.get(key)
        if fn is None:
            module = self._cp.RawModule(code=source(key[0], "cuda"), options=NVRTC_OPTIONS)
            for kernel in KERNELS:
                self._functions[(key[0], kernel)] = module.get_function(kernel)
            fn = self._functions[key]
        return fn

    def launch(self, dtype: np.dtype, name: str, n: int, *args: Any) -> None:
        """Run kernel ``name`` over ``n`` threads on CuPy's current stream (no sync)."""
        if n <= 0:
            return
        grid = (n + BLOCK - 1) // BLOCK
        self.function(dtype, name)((grid,), (BLOCK,), args)
