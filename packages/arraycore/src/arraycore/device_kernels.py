"""C sources of the ``nn`` kernels for device backends: CUDA (NVRTC) and OpenCL.

The kernels are written once, in C with a few placeholder words that :func:`source` replaces
for the target: ``KERNEL`` (``extern "C" __global__`` / ``__kernel``), ``GLOBAL`` (nothing /
``__global``), ``FUNC`` (a device helper), ``GID`` (the thread's global index), ``i64`` (a
64-bit integer), ``T`` (the element type), ``GEOM`` (the window geometry parameters), plus the
macros ``EXP``, ``LOG``, ``NEG_INF`` and ``NAN_T`` of the dtype's prelude. What comes out is plain
CUDA C++ or plain OpenCL C, with concrete types in every kernel signature.

arraycore-cuda builds them with NVRTC (through ``cupy.RawModule``); arraycore-opencl builds the
OpenCL version for the kernels it has no strided version of (average pooling, the softmax family,
the fused cross-entropy), so the same bodies run in the conformance kit and the nnlayers suite on
any OpenCL device, PoCL in CI. Both backends inherit :class:`KernelHost`, the host side
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
- ``softmax_xent_rows(rows, cols, dlogits, row_loss, x, labels_int64, scale)``.
"""

from __future__ import annotations

import math
import re
from abc import ABC, abstractmethod
from typing import Any

import numpy as np

from . import _interop, _nn
from ._registry import namespace_of

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

#: dtypes the kernels are built for (float16 needs conversions the source does not have).
DTYPES = ("float32", "float64")

#: The window geometry parameters, in every pooling and im2col/col2im kernel's signature.
GEOM = (
    "const i64 N, const i64 C, const i64 H, const i64 W, const i64 KH, const i64 KW, "
    "const i64 OH, const i64 OW, const i64 SH, const i64 SW, const i64 DH, const i64 DW, "
    "const i64 TOP, const i64 LEFT"
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
#define EXP exp
#define LOG log
#define NEG_INF (-INFINITY)
#define NAN_T NAN
""",
    ("opencl", "float64"): """
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#define EXP exp
#define LOG log
#define NEG_INF (-(double)INFINITY)
#define NAN_T ((double)NAN)
""",
}

_CTYPES = {"float32": "float", "float64": "double"}

_BODY = r"""
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
        raise ValueError(f"the nn kernel sources exist for {DTYPES}, not {dtype!r}")
    if dialect not in _WORDS:
        raise ValueError(f"dialect must be 'cuda' or 'opencl', got {dialect!r}")
    words = {**_WORDS[dialect], "T": _CTYPES[dtype]}
    text = _BODY.replace("GEOM", GEOM)
    text = re.sub(r"\b(" + "|".join(words) + r")\b", lambda m: words[m.group(1)], text)
    return _PRELUDES[dialect, dtype] + text


def geometry(win: Any) -> tuple[np.int64, ...]:
    """The ``GEOM`` arguments of a window (:class:`arraycore._nn.Window2d`)."""
    (top, _), (left, _) = win.pads
    values = (
        win.n, win.c, win.h, win.w, win.kh, win.kw, win.out_h, win.out_w, *win.stride,
        *win.dilation, top, left,
    )  # fmt: skip
    return tuple(np.int64(v) for v in values)


#: Longest row the one-work-item-per-row softmax kernels take; longer rows use the reference.
SOFTMAX_MAX_ROW = 4096

#: The ``xp.nn`` functions :class:`KernelHost` serves (as ``shared_<name>`` methods).
SHARED_NN = (
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
    "softmax_cross_entropy",
)


class KernelHost(ABC):
    """The host side of the shared kernels, for a backend to inherit.

    It checks arguments exactly as arraycore's reference kernels do (same errors), computes
    output shapes, makes inputs dense, launches, and falls back to the reference for what the
    kernels do not cover (dtypes outside :data:`DTYPES`, softmax over another axis or rows
    longer than :data:`SOFTMAX_MAX_ROW`). Every ``shared_*`` method has the signature of the
    ``xp.nn`` function it can override (``"nn.avg_pool2d": self.shared_avg_pool2d``). A backend
    supplies four things: :meth:`kernel_empty`, :meth:`kernel_dense`, :meth:`kernel_arg` and
    :meth:`kernel_launch`. The CUDA backend (CuPy arrays) and the OpenCL backend (buffers) both
    do, so the host logic below runs in the OpenCL backend's tests on PoCL too. Arrays of
    another backend or device (NumPy's included) are refused with a BackendMismatchError.
    """

    #: The namespace the kernels serve (found at the first call, from :meth:`kernel_empty`).
    _kernel_target: Any = None

    @abstractmethod
    def kernel_empty(self, shape: tuple[int, ...], dtype: np.dtype) -> Any:
        """A new C-contiguous array of this backend."""

    @abstractmethod
    def kernel_dense(self, x: Any) -> Any:
        """``x`` C-contiguous from its buffer's first element (a copy only when it is not)."""

    @abstractmethod
    def kernel_arg(self, x: Any) -> Any:
        """What a launch passes for the dense array ``x`` (the array, or its buffer)."""

    @abstractmethod
    def kernel_launch(self, dtype: np.dtype, name: str, n: int, *args: Any) -> None:
        """Run kernel ``name`` of the ``dtype`` build over ``n`` work items, asynchronously."""

    # -- helpers ----------------------------------------------------------------------------------
    def _kernel_xp(self, op: str, *arrays: Any) -> Any:
        """The namespace of ``arrays``, which must be this host's backend and device (a clear
        BackendMismatchError otherwise, never a kernel launched on another backend's array)."""
        return _interop.kernel_namespace(self, op, *arrays)

    def _launch_into(self, out: Any, name: str, *args: Any) -> Any:
        """Launch an element kernel ``name(n, out, *args)`` over every element of ``out``."""
        n = math.prod(out.shape)
        if n:
            self.kernel_launch(out.dtype, name, n, np.int64(n), self.kernel_arg(out), *args)
        return out

    def _dense_arg(self, x: Any) -> Any:
        return self.kernel_arg(self.kernel_dense(x))

    def shared_im2col(self, x: Any, win: Any) -> Any:
        """``(C*KH*KW, N*OH*OW)`` columns of the (implicitly zero-padded) NCHW input ``x``."""
        shape = (win.c * win.kh * win.kw, win.n * win.out_h * win.out_w)
        out = self.kernel_empty(shape, x.dtype)
        return self._launch_into(out, "im2col", self._dense_arg(x), *geometry(win))

    def shared_col2im(self, cols: Any, win: Any) -> Any:
        """The adjoint of :meth:`shared_im2col`: an ``(N, C, H, W)`` image."""
        out = self.kernel_empty((win.n, win.c, win.h, win.w), cols.dtype)
        return self._launch_into(out, "col2im", self._dense_arg(cols), *geometry(win))

    #: dtypes the hooks :meth:`im2col`, :meth:`col2im`, :meth:`max_pool` and
    #: :meth:`max_pool_backward` serve (a backend with kernels of its own for more dtypes widens
    #: it); the convolutions and max pooling fall back to the reference otherwise.
    hook_dtypes: tuple[str, ...] = DTYPES

    def im2col(self, x: Any, win: Any) -> Any:
        """The columns the convolutions multiply: :meth:`shared_im2col` unless the backend has
        a kernel of its own (the OpenCL backend reads strided input in place)."""
        return self.shared_im2col(x, win)

    def col2im(self, cols: Any, win: Any) -> Any:
        """The adjoint of :meth:`im2col` (:meth:`shared_col2im` by default)."""
        return self.shared_col2im(cols, win)

    def max_pool(self, x: Any, win: Any) -> Any:
        """Max pooling of ``x`` over ``win`` (the shared kernel unless the backend has its own)."""
        out = self.kernel_empty((win.n, win.c, win.out_h, win.out_w), x.dtype)
        return self._launch_into(out, "max_pool", self._dense_arg(x), *geometry(win))

    def max_pool_backward(self, dy: Any, x: Any, win: Any) -> Any:
        """The gradient of :meth:`max_pool` (each window's first maximum receives its ``dy``)."""
        out = self.kernel_empty((win.n, win.c, win.h, win.w), dy.dtype)
        args = (self._dense_arg(x), self._dense_arg(dy), *geometry(win))
        return self._launch_into(out, "max_pool_backward", *args)

    def accelerated(self, op: str, win: Any, *arrays: Any) -> Any:
        """A library's result for convolution ``op`` (``conv2d`` with ``x, w``,
        ``conv2d_backward_data`` with ``dy, w``, ``conv2d_backward_filter`` with ``x, dy``), or
        None to use im2col/col2im and the backend's matmul. The CUDA backend tries cuDNN here."""
        return None

    # -- convolutions: im2col/col2im + one matmul for the whole batch -----------------------------
    def _channels_first(self, xp: Any, y: Any) -> Any:
        """``(N, C, H, W)`` as the ``(C, N*H*W)`` matrix the column layout multiplies."""
        n, c, h, w = (int(s) for s in y.shape)
        return xp.reshape(xp.permute_dims(y, (1, 0, 2, 3)), (c, n * h * w))

    @staticmethod
    def _matrix(xp: Any, w: Any) -> Any:
        """Weights ``(O, C, KH, KW)`` (or ``(C_in, C_out, KH, KW)``) as rows."""
        return xp.reshape(w, (int(w.shape[0]), math.prod(int(s) for s in w.shape[1:])))

    def shared_conv2d(
        self, x: Any, w: Any, *, stride: Any = 1, padding: Any = 0, dilation: Any = 1
    ) -> Any:
        xp = self._kernel_xp("conv2d", x, w)
        win = _nn.conv_window("conv2d", x.shape, w.shape, stride, padding, dilation)
        _nn.check_float("conv2d", xp.isdtype, x=x, w=w)
        found = self.accelerated("conv2d", win, x, w)
        if found is not None:
            return found
        if x.dtype.name not in self.hook_dtypes:
            return _nn.conv2d(xp, x, w, stride=stride, padding=padding, dilation=dilation)
        o = int(w.shape[0])
        y2 = xp.matmul(self._matrix(xp, w), self.im2col(x, win))  # one GEMM per batch
        y4 = xp.reshape(y2, (o, win.n, win.out_h, win.out_w))
        return self.kernel_dense(xp.permute_dims(y4, (1, 0, 2, 3)))

    def shared_conv2d_backward_data(
        self,
        dy: Any,
        w: Any,
        x_shape: Any,
        *,
        stride: Any = 1,
        padding: Any = 0,
        dilation: Any = 1,
    ) -> Any:
        op = "conv2d_backward_data"
        xp = self._kernel_xp(op, dy, w)
        win = _nn.conv_window(op, x_shape, w.shape, stride, padding, dilation)
        _nn.check_output_shape(op, "dy", dy.shape, win, int(w.shape[0]))
        _nn.check_float(op, xp.isdtype, dy=dy, w=w)
        found = self.accelerated(op, win, dy, w)
        if found is not None:
            return found
        if dy.dtype.name not in self.hook_dtypes:
            return _nn.conv2d_backward_data(
                xp, dy, w, x_shape, stride=stride, padding=padding, dilation=dilation
            )
        w2 = self._matrix(xp, w)
        cols = xp.matmul(xp.permute_dims(w2, (1, 0)), self._channels_first(xp, dy))
        return self.col2im(cols, win)

    def shared_conv2d_backward_filter(
        self,
        x: Any,
        dy: Any,
        w_shape: Any,
        *,
        stride: Any = 1,
        padding: Any = 0,
        dilation: Any = 1,
    ) -> Any:
        op = "conv2d_backward_filter"
        xp = self._kernel_xp(op, x, dy)
        win = _nn.conv_window(op, x.shape, w_shape, stride, padding, dilation)
        o = int(w_shape[0])
        _nn.check_output_shape(op, "dy", dy.shape, win, o)
        _nn.check_float(op, xp.isdtype, x=x, dy=dy)
        found = self.accelerated(op, win, x, dy)
        if found is not None:
            return found
        if x.dtype.name not in self.hook_dtypes:
            return _nn.conv2d_backward_filter(
                xp, x, dy, w_shape, stride=stride, padding=padding, dilation=dilation
            )
        cols = self.im2col(x, win)
        dw = xp.matmul(self._channels_first(xp, dy), xp.permute_dims(cols, (1, 0)))
        return xp.reshape(dw, (o, win.c, win.kh, win.kw))

    def shared_conv2d_transpose(
        self,
        x: Any,
        w: Any,
        *,
        stride: Any = 1,
        padding: Any = 0,
        dilation: Any = 1,
        output_padding: Any = 0,
    ) -> Any:
        op = "conv2d_transpose"
        xp = self._kernel_xp(op, x, w)
        win = _nn.conv_transpose_window(
            op, x.shape, w.shape, stride, padding, dilation, output_padding
        )
        _nn.check_float(op, xp.isdtype, x=x, w=w)
        if x.dtype.name not in self.hook_dtypes:
            return _nn.conv2d_transpose(
                xp, x, w, stride=stride, padding=padding, dilation=dilation,
                output_padding=output_padding,
            )  # fmt: skip
        w2 = self._matrix(xp, w)
        cols = xp.matmul(xp.permute_dims(w2, (1, 0)), self._channels_first(xp, x))
        return self.col2im(cols, win)

    # -- pooling ----------------------------------------------------------------------------------
    def shared_max_pool2d(
        self, x: Any, kernel_size: Any, stride: Any = None, padding: Any = 0
    ) -> Any:
        xp = self._kernel_xp("max_pool2d", x)
        win = _nn.pool_window("max_pool2d", x.shape, kernel_size, stride, padding)
        _nn.check_float("max_pool2d", xp.isdtype, x=x)
        if x.dtype.name not in self.hook_dtypes:
            return _nn.max_pool2d(xp, x, kernel_size, stride, padding)
        return self.max_pool(x, win)

    def shared_max_pool2d_backward(
        self, dy: Any, x: Any, kernel_size: Any, stride: Any = None, padding: Any = 0
    ) -> Any:
        op = "max_pool2d_backward"
        xp = self._kernel_xp(op, dy, x)
        win = _nn.pool_window(op, x.shape, kernel_size, stride, padding)
        _nn.check_output_shape(op, "dy", dy.shape, win, win.c)
        _nn.check_float(op, xp.isdtype, dy=dy, x=x)
        if x.dtype.name not in self.hook_dtypes:
            return _nn.max_pool2d_backward(xp, dy, x, kernel_size, stride, padding)
        return self.max_pool_backward(dy, x, win)

    def shared_avg_pool2d(
        self,
        x: Any,
        kernel_size: Any,
        stride: Any = None,
        padding: Any = 0,
        count_include_pad: bool = True,
    ) -> Any:
        xp = self._kernel_xp("avg_pool2d", x)
        win = _nn.pool_window("avg_pool2d", x.shape, kernel_size, stride, padding)
        _nn.check_float("avg_pool2d", xp.isdtype, x=x)
        if x.dtype.name not in DTYPES:
            return _nn.avg_pool2d(xp, x, kernel_size, stride, padding, count_include_pad)
        out = self.kernel_empty((win.n, win.c, win.out_h, win.out_w), x.dtype)
        flag = np.int32(bool(count_include_pad))
        return self._launch_into(out, "avg_pool", self._dense_arg(x), *geometry(win), flag)

    def shared_avg_pool2d_backward(
        self,
        dy: Any,
        x_shape: Any,
        kernel_size: Any,
        stride: Any = None,
        padding: Any = 0,
        count_include_pad: bool = True,
    ) -> Any:
        op = "avg_pool2d_backward"
        xp = self._kernel_xp(op, dy)
        win = _nn.pool_window(op, x_shape, kernel_size, stride, padding)
        _nn.check_output_shape(op, "dy", dy.shape, win, win.c)
        _nn.check_float(op, xp.isdtype, dy=dy)
        if dy.dtype.name not in DTYPES:
            return _nn.avg_pool2d_backward(
                xp, dy, x_shape, kernel_size, stride, padding, count_include_pad
            )
        out = self.kernel_empty((win.n, win.c, win.h, win.w), dy.dtype)
        flag = np.int32(bool(count_include_pad))
        args = (self._dense_arg(dy), *geometry(win), flag)
        return self._launch_into(out, "avg_pool_backward", *args)

    # -- softmax family ---------------------------------------------------------------------------
    def _softmax_rows(self, x: Any, axis: Any, op: str, log_mode: int) -> Any:
        """The row kernel's result, or None where the reference must run."""
        xp = self._kernel_xp(op, x)
        _nn.check_float(op, xp.isdtype, x=x)
        ndim = len(x.shape)
        (ax,) = _nn.axis_tuple(axis, ndim, op)
        cols = int(x.shape[ax]) if ndim else 0
        if ax != ndim - 1 or x.dtype.name not in DTYPES or not 0 < cols <= SOFTMAX_MAX_ROW:
            return None
        rows = math.prod(int(s) for s in x.shape) // cols
        out = self.kernel_empty(tuple(int(s) for s in x.shape), x.dtype)
        args = (np.int64(rows), np.int64(cols), self.kernel_arg(out), self._dense_arg(x))
        self.kernel_launch(x.dtype, "softmax_rows", rows, *args, np.int32(log_mode))
        return out

    def shared_softmax(self, x: Any, axis: int = -1) -> Any:
        out = self._softmax_rows(x, axis, "softmax", 0)
        return _nn.softmax(namespace_of(x), x, axis) if out is None else out

    def shared_log_softmax(self, x: Any, axis: int = -1) -> Any:
        out = self._softmax_rows(x, axis, "log_softmax", 1)
        return _nn.log_softmax(namespace_of(x), x, axis) if out is None else out

    def shared_softmax_cross_entropy(
        self, logits: Any, labels: Any, scale: float = 1.0
    ) -> tuple[Any, Any]:
        op = "softmax_cross_entropy"
        xp = self._kernel_xp(op, logits, labels)
        classes = _nn.check_cross_entropy(op, xp.isdtype, logits, labels)
        rows = math.prod(int(s) for s in logits.shape[:-1])
        if logits.dtype.name not in DTYPES or not 0 < classes <= SOFTMAX_MAX_ROW or rows == 0:
            return _nn.softmax_cross_entropy(xp, logits, labels, scale)
        labels64 = xp.astype(labels, xp.int64, copy=False)
        dlogits = self.kernel_empty(tuple(int(s) for s in logits.shape), logits.dtype)
        row_loss = self.kernel_empty((rows,), logits.dtype)
        args = (
            np.int64(rows), np.int64(classes), self.kernel_arg(dlogits),
            self.kernel_arg(row_loss), self._dense_arg(logits), self._dense_arg(labels64),
            logits.dtype.type(scale),
        )  # fmt: skip
        self.kernel_launch(logits.dtype, "softmax_xent_rows", rows, *args)
        return xp.sum(row_loss), dlogits

    def shared_overrides(self) -> dict[str, Any]:
        """``{"nn.<name>": method}`` for every ``xp.nn`` function this class serves."""
        return {f"nn.{name}": getattr(self, f"shared_{name}") for name in SHARED_NN}
