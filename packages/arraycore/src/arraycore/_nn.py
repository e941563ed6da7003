"""Reference neural-network kernels, written once against an array namespace ``xp``.

Every function takes the namespace as its first argument and uses only what the Python Array
API standard (2024.12) offers: creation (``zeros``, ``full``, ``arange``, ``asarray``),
element-wise functions, ``max``/``sum`` reductions, ``matmul``/``tensordot``, ``reshape``,
``permute_dims``, ``stack``, ``expand_dims``, ``where``, ``astype``, and basic slicing of arrays
(``x[:, :, i::s, j::s]``, ``y[...] = v``, ``y[key] += v``). No NumPy-only function, no fancy
indexing, no strides, no ``out=``. So a backend that implements only arraycore's primitives
gets every kernel below, and ``numpy`` itself can be passed as ``xp``.

:class:`arraycore.Namespace` exposes them as ``xp.nn.<name>(...)`` (``xp`` filled in); backends
replace them with real kernels (cuDNN, CLBlast, the NumPy backend's ``_numpy_nn``) that must agree
with these within the conformance kit's tolerances and break ties the same way.

Layout and conventions (those of PyTorch and cuDNN):

- Images are NCHW: ``(batch, channels, height, width)``.
- Convolution is cross-correlation (the kernel is not flipped), weights ``(O, C, KH, KW)``;
  transposed convolution takes weights ``(C_in, C_out, KH, KW)``.
- ``stride`` and ``dilation`` are an int or a pair ``(h, w)``, all >= 1.
- ``padding`` is an int (all four sides), a pair ``(ph, pw)`` (top = bottom = ph, left = right =
  pw), or explicit ``((top, bottom), (left, right))``, all >= 0; the convolutions also take
  ``"valid"`` and ``"same"``. Convolution pads with zeros, max pooling with -inf, average
  pooling with zeros.
- Output sizes round down: ``out = (in + pad_before + pad_after - dilation*(k-1) - 1) // stride
  + 1``. Input rows and columns beyond the last window are unused; their gradient is zero.

The argument forms, checks and output sizes are :mod:`arraycore.nn_shapes`' (nnlayers' ops use
the same rules). Errors are raised before any computation and name the op and the shapes. No
function reads an array's values on the host (no synchronisation).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np

from . import _constants, _erf
from .nn_shapes import (
    Window2d,
    check_output_shape,
    conv_transpose_window,
    conv_window,
    int_arg,
    pool_window,
)
from .protocol import ArrayNamespace

Array = Any
#: The namespace the kernels are written against (the NumPy backend passes the numpy module).
Namespace = ArrayNamespace | ModuleType

__all__ = [
    "affine",
    "avg_pool2d",
    "avg_pool2d_backward",
    "batch_norm",
    "batch_norm_backward",
    "batch_norm_relu",
    "batch_norm_relu_backward",
    "bias_relu",
    "bias_relu_backward",
    "conv2d",
    "conv2d_backward_data",
    "conv2d_backward_filter",
    "conv2d_transpose",
    "gelu",
    "gelu_backward",
    "gru_sequence",
    "gru_sequence_backward",
    "layer_norm",
    "layer_norm_backward",
    "log_softmax",
    "logsumexp",
    "lstm",
    "lstm_backward",
    "max_pool2d",
    "max_pool2d_backward",
    "one_hot",
    "relu_backward",
    "scaled_dot_product_attention",
    "scaled_dot_product_attention_backward",
    "softmax",
    "softmax_backward",
    "softmax_cross_entropy",
]


# -- argument checking: the shape rules live in nn_shapes (shared with nnlayers) ----------------
def owned_by(xp: Any, op: str, *arrays: Array) -> Any:
    """Raise BackendMismatchError unless ``arrays`` are the namespace ``xp``'s own (backend and
    device; nothing is checked when ``xp`` is a module or an ``isdtype`` function); returns
    ``xp.isdtype``."""
    check = getattr(xp, "_check", None)
    if check is not None:
        check(f"nn.{op}", *arrays)
    return getattr(xp, "isdtype", xp)


#: NumPy's real floating dtypes (NumPy's and CuPy's arrays carry these): known without asking
#: ``isdtype`` (~4 us a call, on every nn op); other dtype objects ask it.
_REAL_FLOATS = frozenset(np.dtype(name) for name in ("float16", "float32", "float64"))


def check_float(op: str, isdtype: Any, **arrays: Array) -> None:
    """Raise unless all ``arrays`` share one real floating dtype. ``isdtype`` is ``xp.isdtype``,
    or the namespace ``xp`` itself, whose own arrays they must then be (:func:`owned_by`)."""
    isdtype = owned_by(isdtype, op, *arrays.values())
    dtypes = {name: a.dtype for name, a in arrays.items()}
    for name, dt in dtypes.items():
        if not (isinstance(dt, np.dtype) and dt in _REAL_FLOATS) and not isdtype(
            dt, "real floating"
        ):
            raise TypeError(f"{op}: {name} must have a real floating dtype, got {dt}")
    if len(set(dtypes.values())) > 1:
        listing = ", ".join(f"{name} {dt}" for name, dt in dtypes.items())
        raise TypeError(f"{op}: dtypes differ ({listing}); cast them to one dtype first")


# -- shared building blocks ---------------------------------------------------------------------
def _pad(xp: Namespace, x: Array, win: Window2d, fill: float) -> Array:
    if not win.padded:
        return x
    xpad = xp.full((win.n, win.c, win.padded_h, win.padded_w), fill, dtype=x.dtype)
    rows, cols = win.interior()
    xpad[:, :, rows, cols] = x
    return xpad


def _crop(xpad: Array, win: Window2d) -> Array:
    if not win.padded:
        return xpad
    rows, cols = win.interior()
    return xpad[:, :, rows, cols]


def _im2col(xp: Namespace, x: Array, win: Window2d) -> Array:
    """``(N, C*KH*KW, out_h*out_w)``: column ``(c, i, j)`` holds what kernel tap (i, j) sees."""
    xpad = _pad(xp, x, win, 0)
    patches = []
    for i in range(win.kh):
        for j in range(win.kw):
            rows, cols = win.window_slices(i, j)
            patches.append(xpad[:, :, rows, cols])
    cols_ = xp.stack(patches, axis=2)
    return xp.reshape(cols_, (win.n, win.c * win.kh * win.kw, win.out_h * win.out_w))


def _col2im(xp: Namespace, cols: Array, win: Window2d) -> Array:
    """The adjoint of :func:`_im2col`: add each column back where it was read from."""
    cols = xp.reshape(cols, (win.n, win.c, win.kh * win.kw, win.out_h, win.out_w))
    xpad = xp.zeros((win.n, win.c, win.padded_h, win.padded_w), dtype=cols.dtype)
    for i in range(win.kh):
        for j in range(win.kw):
            rows, cols_ = win.window_slices(i, j)
            xpad[:, :, rows, cols_] += cols[:, :, i * win.kw + j]
    return _crop(xpad, win)


# -- convolution ----------------------------------------------------------------------------------
def conv2d(
    xp: Namespace, x: Array, w: Array, *, stride: Any = 1, padding: Any = 0, dilation: Any = 1
) -> Array:
    """2-D cross-correlation of NCHW images with ``(O, C, KH, KW)`` weights, zero padding.

    ``y[n, o, p, q] = sum_{c,i,j} xpad[n, c, p*sh + i*dh, q*sw + j*dw] * w[o, c, i, j]``, shape
    ``(N, O, out_h, out_w)``. ``x`` and ``w`` share a real floating dtype. Computed as im2col
    (one strided slice of the padded input per kernel tap) and one batched matmul.

    >>> import numpy as np
    >>> conv2d(np, np.ones((1, 1, 4, 4)), np.ones((2, 1, 3, 3)), padding=1)[0, 0, 0].tolist()
    [4.0, 6.0, 6.0, 4.0]
    """
    win = conv_window("conv2d", x.shape, w.shape, stride, padding, dilation)
    check_float("conv2d", xp, x=x, w=w)
    o = int(w.shape[0])
    cols = _im2col(xp, x, win)
    w2 = xp.reshape(w, (o, win.c * win.kh * win.kw))
    y = xp.matmul(w2, cols)
    return xp.reshape(y, (win.n, o, win.out_h, win.out_w))


def conv2d_backward_data(
    xp: Namespace,
    dy: Array,
    w: Array,
    x_shape: Sequence[int],
    *,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
) -> Array:
    """Gradient of :func:`conv2d` with respect to ``x``: ``dx`` of shape ``x_shape``.

    ``dy`` has the shape of ``conv2d``'s output. ``x_shape`` is needed because several input
    sizes give the same output size when ``stride > 1``; rows and columns that no window reads
    get zero. Computed as one matmul and col2im (a strided add per kernel tap).
    """
    op = "conv2d_backward_data"
    win = conv_window(op, x_shape, w.shape, stride, padding, dilation)
    o = int(w.shape[0])
    check_output_shape(op, "dy", dy.shape, win, o)
    check_float(op, xp, dy=dy, w=w)
    w2 = xp.reshape(w, (o, win.c * win.kh * win.kw))
    dy2 = xp.reshape(dy, (win.n, o, win.out_h * win.out_w))
    cols = xp.matmul(xp.permute_dims(w2, (1, 0)), dy2)
    return _col2im(xp, cols, win)


def conv2d_backward_filter(
    xp: Namespace,
    x: Array,
    dy: Array,
    w_shape: Sequence[int],
    *,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
) -> Array:
    """Gradient of :func:`conv2d` with respect to ``w``: ``dw`` of shape ``w_shape``.

    ``dw[o, c, i, j] = sum_{n,p,q} dy[n, o, p, q] * xpad[n, c, p*sh + i*dh, q*sw + j*dw]``:
    im2col of ``x`` and one tensordot over batch and output positions.
    """
    op = "conv2d_backward_filter"
    win = conv_window(op, x.shape, w_shape, stride, padding, dilation)
    o = int(w_shape[0])
    check_output_shape(op, "dy", dy.shape, win, o)
    check_float(op, xp, x=x, dy=dy)
    cols = _im2col(xp, x, win)
    dy2 = xp.reshape(dy, (win.n, o, win.out_h * win.out_w))
    dw = xp.tensordot(dy2, cols, axes=((0, 2), (0, 2)))
    return xp.reshape(dw, (o, win.c, win.kh, win.kw))


def conv2d_transpose(
    xp: Namespace,
    x: Array,
    w: Array,
    *,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    output_padding: Any = 0,
) -> Array:
    """Transposed convolution (PyTorch's ``ConvTranspose2d``), weights ``(C_in, C_out, KH, KW)``.

    Each input pixel scatters ``x[n, ci, p, q] * w[ci, co, i, j]`` to output pixel
    ``(p*sh + i*dh - top, q*sw + j*dw - left)``; the output has size
    ``(H-1)*sh - top - bottom + dh*(KH-1) + output_padding_h + 1`` (likewise for the width).
    It is the adjoint of :func:`conv2d` with the same weights, stride, padding and dilation:
    ``conv2d_transpose(dy, w) == conv2d_backward_data(dy, w, x_shape)``. ``output_padding``
    (extra rows/columns at the bottom/right) must be smaller than the stride or the dilation.
    """
    op = "conv2d_transpose"
    win = conv_transpose_window(op, x.shape, w.shape, stride, padding, dilation, output_padding)
    check_float(op, xp, x=x, w=w)
    cin = int(w.shape[0])
    w2 = xp.reshape(w, (cin, win.c * win.kh * win.kw))
    x2 = xp.reshape(x, (win.n, cin, win.out_h * win.out_w))
    cols = xp.matmul(xp.permute_dims(w2, (1, 0)), x2)
    return _col2im(xp, cols, win)


# -- pooling --------------------------------------------------------------------------------------
def _pool_taps(win: Window2d) -> list[tuple[slice, slice]]:
    return [win.window_slices(i, j) for i in range(win.kh) for j in range(win.kw)]


def max_pool2d(
    xp: Namespace, x: Array, kernel_size: Any, stride: Any = None, padding: Any = 0
) -> Array:
    """Maximum over each ``kernel_size`` window of NCHW ``x``; padding counts as -inf.

    ``stride`` defaults to ``kernel_size``; each padding is at most half the kernel
    (:mod:`arraycore.nn_shapes`), so every window holds at least one pixel. NaN propagates.
    Output ``(N, C, out_h, out_w)``.
    """
    win = pool_window("max_pool2d", x.shape, kernel_size, stride, padding)
    check_float("max_pool2d", xp, x=x)
    xpad = _pad(xp, x, win, -float("inf"))
    taps = _pool_taps(win)
    if len(taps) == 1:
        rows, cols = taps[0]
        return xp.astype(xpad[:, :, rows, cols], x.dtype, copy=True)
    y = None
    for rows, cols in taps:
        tap = xpad[:, :, rows, cols]
        y = tap if y is None else xp.maximum(y, tap)
    return y


def max_pool2d_backward(
    xp: Namespace,
    dy: Array,
    x: Array,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
) -> Array:
    """Gradient of :func:`max_pool2d` with respect to ``x``.

    Each window passes its ``dy`` to its *first* maximal pixel in row-major window order (the
    first NaN if the window holds one), as ``argmax`` would pick it; overlapping windows
    accumulate. Padding never receives gradient.
    """
    op = "max_pool2d_backward"
    win = pool_window(op, x.shape, kernel_size, stride, padding)
    check_output_shape(op, "dy", dy.shape, win, win.c)
    check_float(op, xp, dy=dy, x=x)
    xpad = _pad(xp, x, win, -float("inf"))
    y = max_pool2d(xp, x, kernel_size, stride, padding)
    valid = None
    if win.padded:
        # a window whose pixels are all -inf must not pick the -inf padding before them
        valid = xp.zeros((1, 1, win.padded_h, win.padded_w), dtype=xp.bool)
        rows, cols = win.interior()
        valid[:, :, rows, cols] = True
    dxpad = xp.zeros((win.n, win.c, win.padded_h, win.padded_w), dtype=dy.dtype)
    zero = xp.zeros((), dtype=dy.dtype)
    taken = None
    for rows, cols in _pool_taps(win):
        tap = xpad[:, :, rows, cols]
        hit = xp.logical_or(xp.equal(tap, y), xp.isnan(tap))
        if valid is not None:
            hit = xp.logical_and(hit, valid[:, :, rows, cols])
        if taken is None:
            first, taken = hit, hit
        else:
            first = xp.logical_and(hit, xp.logical_not(taken))
            taken = xp.logical_or(taken, hit)
        dxpad[:, :, rows, cols] += xp.where(first, dy, zero)
    return _crop(dxpad, win)


def avg_divisor(xp: Namespace, win: Window2d, count_include_pad: bool, dtype: Any) -> Any:
    """What each window's sum is divided by: a Python number, or an (out_h, out_w) array."""
    if count_include_pad or not win.padded:
        return float(win.kh * win.kw)

    # the number of real pixels in a window is separable: rows in it times columns in it
    def counts(size: int, before: int, k: int, stride: int, n_out: int) -> list[float]:
        starts = [p * stride - before for p in range(n_out)]
        return [float(min(s + k, size) - max(s, 0)) for s in starts]

    rows = counts(win.h, win.pads[0][0], win.kh, win.stride[0], win.out_h)
    cols = counts(win.w, win.pads[1][0], win.kw, win.stride[1], win.out_w)
    rows_ = xp.reshape(xp.asarray(rows, dtype=dtype), (win.out_h, 1))
    cols_ = xp.reshape(xp.asarray(cols, dtype=dtype), (1, win.out_w))
    return rows_ * cols_


def avg_pool2d(
    xp: Namespace,
    x: Array,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    count_include_pad: bool = True,
) -> Array:
    """Mean over each ``kernel_size`` window of NCHW ``x`` (zero padding).

    With ``count_include_pad`` (the default, as in PyTorch) every window is divided by
    ``KH*KW``; without it, by the number of real pixels it covers. ``stride`` defaults to
    ``kernel_size``; each padding is at most half the kernel.
    """
    win = pool_window("avg_pool2d", x.shape, kernel_size, stride, padding)
    check_float("avg_pool2d", xp, x=x)
    xpad = _pad(xp, x, win, 0)
    total = None
    for rows, cols in _pool_taps(win):
        tap = xpad[:, :, rows, cols]
        total = tap if total is None else total + tap
    return total / avg_divisor(xp, win, count_include_pad, x.dtype)


def avg_pool2d_backward(
    xp: Namespace,
    dy: Array,
    x_shape: Sequence[int],
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    count_include_pad: bool = True,
) -> Array:
    """Gradient of :func:`avg_pool2d` with respect to ``x``, of shape ``x_shape``."""
    op = "avg_pool2d_backward"
    win = pool_window(op, x_shape, kernel_size, stride, padding)
    check_output_shape(op, "dy", dy.shape, win, win.c)
    check_float(op, xp, dy=dy)
    share = dy / avg_divisor(xp, win, count_include_pad, dy.dtype)
    dxpad = xp.zeros((win.n, win.c, win.padded_h, win.padded_w), dtype=dy.dtype)
    for rows, cols in _pool_taps(win):
        dxpad[:, :, rows, cols] += share
    return _crop(dxpad, win)


# -- GELU ---------------------------------------------------------------------------------------
#: The constants of GELU's tanh approximation ``0.5 x (1 + tanh(K (x + C x**3)))``.
GELU_K, GELU_C = math.sqrt(2.0 / math.pi), 0.044715


#: GELU's forms: ``"none"`` (exact, with erf: the default, PyTorch's and Keras's) and
#: ``"tanh"`` (the approximation above), PyTorch's spelling.
GELU_FORMS = ("tanh", "none")


def check_gelu(op: str, isdtype: Any, approximate: str, **arrays: Array) -> None:
    """Raise unless ``approximate`` is one of :data:`GELU_FORMS` and ``arrays`` share one shape
    and one real floating dtype."""
    if approximate not in GELU_FORMS:
        raise ValueError(
            f"{op}: approximate must be 'tanh' (the tanh approximation, PyTorch's "
            f"approximate='tanh') or 'none' (exact, with erf), got {approximate!r}"
        )
    check_float(op, isdtype, **arrays)
    shapes = {name: tuple(a.shape) for name, a in arrays.items()}
    if len(set(shapes.values())) > 1:
        listing = ", ".join(f"{name} {shape}" for name, shape in shapes.items())
        raise ValueError(f"{op}: shapes differ ({listing})")


def _gelu_gate(xp: Namespace, x: Array) -> tuple[Array, Array]:
    """``(u, s)``: ``u = K x (1 + C x**2)`` and the gate ``s = 0.5 (1 + tanh(u))`` (products,
    no ``pow``)."""
    u = x * (GELU_K + (GELU_K * GELU_C) * (x * x))
    return u, 0.5 + 0.5 * xp.tanh(u)


def erfc(xp: Namespace, x: Array) -> Array:
    """The complementary error function from the namespace's element-wise functions alone (the
    Array API has no erf): fdlibm's rational approximations, within 4 ulp of glibc's in float64
    (:mod:`arraycore._erf`). Backends with an ``erfc`` of their own (CUDA's and OpenCL's math
    libraries) use it instead; the NumPy backend uses :func:`arraycore._erf.erfc_numpy`, the
    same formulas evaluated interval by interval."""
    return _erf.erfc(xp, x)


def _normal_cdf_pdf(xp: Namespace, x: Array, erfc_fn: Any = None) -> tuple[Array, Array]:
    """``(Phi(x), phi(x))``: the standard normal's distribution ``0.5 erfc(-x / sqrt 2)`` (erfc:
    no cancellation in the lower tail) and density; ``erfc_fn`` replaces :func:`erfc` where the
    backend has a faster one (the NumPy backend's)."""
    z = -x * math.sqrt(0.5)
    cdf = 0.5 * (erfc(xp, z) if erfc_fn is None else erfc_fn(z))
    return cdf, xp.exp(-0.5 * (x * x)) * (1.0 / math.sqrt(2.0 * math.pi))


def gelu(xp: Namespace, x: Array, *, approximate: str = "none", erfc_fn: Any = None) -> Array:
    """GELU: ``x Phi(x)`` with the normal distribution ``Phi`` (``approximate="none"``, the
    default, as PyTorch's ``torch.nn.functional.gelu`` and Keras's), or its tanh approximation
    ``x * 0.5 * (1 + tanh(sqrt(2/pi) (x + 0.044715 x**3)))`` (``"tanh"``,
    ``torch.nn.functional.gelu(x, approximate="tanh")``)."""
    check_gelu("gelu", xp, approximate, x=x)
    if approximate == "none":
        return x * _normal_cdf_pdf(xp, x, erfc_fn)[0]
    return x * _gelu_gate(xp, x)[1]


def gelu_backward(
    xp: Namespace, dy: Array, x: Array, *, approximate: str = "none", erfc_fn: Any = None
) -> Array:
    """Gradient of :func:`gelu` at ``x`` times ``dy``: ``dy (Phi(x) + x phi(x))`` exactly, or for
    the tanh form ``dy (s + x ds/dx)``, ``ds/dx = 2 s (1 - s) u'``. ``s (1 - s)`` is written
    ``e / (1 + e)**2`` with ``e = exp(-2 |u|) <= 1``, exact in both tails: from ``1 -
    tanh(u)**2`` a tanh one ulp short of -1 at ``x = -12`` (OpenCL allows it) times ``x u'``
    would give 1e-5 where the gradient is 0."""
    check_gelu("gelu_backward", xp, approximate, dy=dy, x=x)
    if approximate == "none":
        cdf, pdf = _normal_cdf_pdf(xp, x, erfc_fn)
        return dy * (cdf + x * pdf)
    u, s = _gelu_gate(xp, x)
    e = xp.exp(-2.0 * xp.abs(u))
    q = e / ((1.0 + e) * (1.0 + e))
    return dy * (s + (q * ((2.0 * GELU_K) + (6.0 * GELU_K * GELU_C) * (x * x))) * x)


# -- ReLU ---------------------------------------------------------------------------------------
def check_relu_backward(isdtype: Any, dy: Array, y: Array) -> None:
    """Raise unless ``dy`` and ``y`` share one shape and one real floating dtype."""
    check_float("relu_backward", isdtype, dy=dy, y=y)
    if tuple(dy.shape) != tuple(y.shape):
        raise ValueError(f"relu_backward: shapes differ (dy {tuple(dy.shape)}, y {tuple(y.shape)})")


def relu_backward(xp: Namespace, dy: Array, y: Array) -> Array:
    """Gradient of ReLU from its output ``y = max(x, 0)``: ``dy * (y > 0)``, so ``dy`` where the
    unit is on and 0 where it is off (a NaN or infinity in ``dy`` there gives NaN, as the product
    does); one pass where the backend has a kernel for it, instead of a comparison, a cast and a
    product."""
    check_relu_backward(xp, dy, y)
    return xp.multiply(dy, xp.astype(xp.greater(y, 0.0), dy.dtype))


# -- bias and ReLU -------------------------------------------------------------------------------
def bias_shape(x_shape: Sequence[int], axis: int) -> tuple[int, ...]:
    """The shape a 1-D bias along ``axis`` (counted from 0) of an array of ``x_shape`` takes to
    broadcast against it: ``(1, C, 1, 1)`` for NCHW's channels."""
    return tuple(int(d) if a == axis else 1 for a, d in enumerate(x_shape))


@functools.cache
def other_axes(ndim: int, axis: int) -> tuple[int, ...]:
    """The axes of an ``ndim``-dimensional array but ``axis``: those a bias's gradient sums."""
    return tuple(a for a in range(ndim) if a != axis)


def check_affine(isdtype: Any, x: Array, w: Array, bias: Array) -> None:
    """The checks of :func:`affine`: ``x (..., K)`` of one or more dimensions, ``w (K, N)``,
    ``bias (N,)``, one real floating dtype."""
    op = "affine"
    check_float(op, isdtype, x=x, w=w, bias=bias)
    xs, ws, bs = tuple(x.shape), tuple(w.shape), tuple(bias.shape)
    if len(xs) == 0 or len(ws) != 2 or xs[-1] != ws[0]:
        raise ValueError(
            f"{op}: needs x (..., K) and w (K, N), got x of shape {xs} and w of shape {ws}"
        )
    if bs != ws[1:]:
        raise ValueError(f"{op}: bias has shape {bs}, expected ({ws[1]},) for w of shape {ws}")


def affine(xp: Namespace, x: Array, w: Array, bias: Array) -> Array:
    """``x @ w + bias``: a dense layer's product and bias (``w (K, N)``, in then out, as
    ``x @ w`` reads; PyTorch's ``F.linear`` takes the transpose), the rows of ``x (..., K)``
    each mapped to ``N`` values.

    >>> import numpy as np
    >>> affine(
    ...     np, np.array([[1.0, 2.0]]), np.array([[1.0, 0.0], [0.5, 1.0]]), np.array([0.0, -1.0])
    ... ).tolist()
    [[2.0, 1.0]]
    """
    check_affine(xp, x, w, bias)
    return xp.add(xp.matmul(x, w), bias)


def check_bias_relu(isdtype: Any, x: Array, bias: Array, axis: Any, out: Array = None) -> int:
    """The checks of :func:`bias_relu` (``bias`` 1-D with ``x.shape[axis]`` entries, one real
    floating dtype, ``out`` where given of ``x``'s shape and dtype); returns ``axis`` counted
    from 0."""
    op = "bias_relu"
    check_float(op, isdtype, x=x, bias=bias, **({} if out is None else {"out": out}))
    if out is not None and tuple(out.shape) != tuple(x.shape):
        raise ValueError(f"{op}: out has shape {tuple(out.shape)}, x has {tuple(x.shape)}")
    (ax,) = axis_tuple(int_arg(axis, op, "axis"), len(x.shape), op)
    if tuple(bias.shape) != (x.shape[ax],):
        raise ValueError(
            f"{op}: bias has shape {tuple(bias.shape)}, expected ({x.shape[ax]},) for x of shape "
            f"{tuple(x.shape)} along axis {axis}"
        )
    return ax


def check_bias_relu_backward(isdtype: Any, dy: Array, y: Array, axis: Any) -> int:
    """The checks of :func:`bias_relu_backward`; returns ``axis`` counted from 0."""
    op = "bias_relu_backward"
    check_float(op, isdtype, dy=dy, y=y)
    if tuple(dy.shape) != tuple(y.shape):
        raise ValueError(f"{op}: shapes differ (dy {tuple(dy.shape)}, y {tuple(y.shape)})")
    (ax,) = axis_tuple(int_arg(axis, op, "axis"), len(y.shape), op)
    return ax


def bias_relu(xp: Namespace, x: Array, bias: Array, axis: Any = 1) -> Array:
    """``maximum(x + bias, 0)`` with the 1-D ``bias`` laid along ``axis`` of ``x`` (a layer's
    bias and ReLU: the channels of NCHW images on axis 1, the units of ``(N, U)`` rows on the
    last), ``maximum``'s rule (NaN stays NaN, ``-0.0`` becomes ``0.0``).

    >>> import numpy as np
    >>> bias_relu(np, np.array([[-1.0, 2.0], [3.0, -4.0]]), np.array([0.5, 1.0])).tolist()
    [[0.0, 3.0], [3.5, 0.0]]
    """
    ax = check_bias_relu(xp, x, bias, axis)
    return xp.maximum(xp.add(x, xp.reshape(bias, bias_shape(x.shape, ax))), 0.0)


def bias_relu_backward(xp: Namespace, dy: Array, y: Array, axis: Any = 1) -> tuple[Array, Array]:
    """``(dx, dbias)``: the gradients of :func:`bias_relu` from its output ``y``, ``dx =
    relu_backward(dy, y)`` and ``dbias``, ``dx`` summed over every axis but ``axis``."""
    ax = check_bias_relu_backward(xp, dy, y, axis)
    dx = relu_backward(xp, dy, y)
    return dx, xp.sum(dx, axis=other_axes(len(y.shape), ax))


# -- softmax family -----------------------------------------------------------------------------
def axis_tuple(axis: Any, ndim: int, op: str) -> tuple[int, ...]:
    axes = (
        tuple(range(ndim)) if axis is None else (axis,) if not isinstance(axis, Sequence) else axis
    )
    result = []
    for a in axes:
        a = int_arg(a, op, "axis")
        if not -ndim <= a < ndim:
            raise ValueError(f"{op}: axis {a} is out of range for an array of {ndim} dimensions")
        result.append(a % ndim)
    if len(set(result)) != len(result):
        raise ValueError(f"{op}: repeated axis in {axis!r}")
    return tuple(result)


def _shifted(xp: Namespace, x: Array, axes: tuple[int, ...]) -> tuple[Array, Array, Array]:
    """``(x - shift, shift, max)`` with the max over ``axes`` (keepdims) as shift.

    Where the max is not finite (every entry -inf, or a +inf or NaN entry), the shift is NaN,
    so ``exp`` neither overflows nor warns and those slices come out NaN.
    """
    m = xp.max(x, axis=axes, keepdims=True)
    shift = xp.where(xp.isfinite(m), m, xp.nan)
    return x - shift, shift, m


def softmax(xp: Namespace, x: Array, axis: int = -1) -> Array:
    """``exp(x) / sum(exp(x))`` along ``axis``, computed as ``exp(x - max)`` so it never overflows.

    ``-inf`` entries get 0. A slice whose entries are all ``-inf``, or that holds ``+inf`` or
    NaN, gives NaN everywhere (as in PyTorch).
    """
    (ax,) = axis_tuple(axis, len(x.shape), "softmax")
    check_float("softmax", xp, x=x)
    if x.shape[ax] == 0:
        return xp.astype(x, x.dtype, copy=True)
    z, _, _ = _shifted(xp, x, (ax,))
    e = xp.exp(z)
    return e / xp.sum(e, axis=ax, keepdims=True)


def check_softmax_backward(isdtype: Any, dy: Array, y: Array, axis: Any) -> int:
    """Raise unless ``dy`` and ``y`` share one shape, both have a real floating dtype and
    ``axis`` is one of their axes; returns the axis, counted from 0."""
    check_float("softmax_backward", isdtype, dy=dy, y=y)
    if tuple(dy.shape) != tuple(y.shape):
        raise ValueError(
            f"softmax_backward: shapes differ (dy {tuple(dy.shape)}, y {tuple(y.shape)})"
        )
    (ax,) = axis_tuple(axis, len(y.shape), "softmax_backward")
    return ax


def softmax_backward(xp: Namespace, dy: Array, y: Array, axis: int = -1) -> Array:
    """Gradient of :func:`softmax` along ``axis`` from its output ``y`` and the gradient ``dy``
    of that output: ``y * (dy - sum(dy * y, axis))`` (PyTorch's ``_softmax_backward_data``).
    One pass over each slice where the backend has a kernel for it, instead of a product, a
    sum, a difference and a product."""
    ax = check_softmax_backward(xp, dy, y, axis)
    return y * (dy - xp.sum(dy * y, axis=ax, keepdims=True))


def log_softmax(xp: Namespace, x: Array, axis: int = -1) -> Array:
    """``x - logsumexp(x)`` along ``axis``, accurate for large magnitudes.

    ``-inf`` entries stay ``-inf``; degenerate slices give NaN as in :func:`softmax`.
    """
    (ax,) = axis_tuple(axis, len(x.shape), "log_softmax")
    check_float("log_softmax", xp, x=x)
    if x.shape[ax] == 0:
        return xp.astype(x, x.dtype, copy=True)
    z, _, _ = _shifted(xp, x, (ax,))
    # the max entry contributes exp(0) = 1, so the sum is >= 1 and its log is safe
    return z - xp.log(xp.sum(xp.exp(z), axis=ax, keepdims=True))


def logsumexp(xp: Namespace, x: Array, axis: Any = None, keepdims: bool = False) -> Array:
    """``log(sum(exp(x)))`` over ``axis`` (an int, a tuple, or None for all) without overflow.

    All ``-inf`` gives ``-inf``, any ``+inf`` gives ``+inf``, NaN propagates, and an empty
    reduction gives ``-inf``.
    """
    axes = axis_tuple(axis, len(x.shape), "logsumexp")
    check_float("logsumexp", xp, x=x)
    if any(x.shape[a] == 0 for a in axes):
        shape = tuple(1 if a in axes else s for a, s in enumerate(x.shape))
        if not keepdims:
            shape = tuple(s for a, s in enumerate(x.shape) if a not in axes)
        return xp.full(shape, -float("inf"), dtype=x.dtype)
    z, shift, m = _shifted(xp, x, axes)
    total = xp.sum(xp.exp(z), axis=axes, keepdims=True)
    result = xp.where(xp.isfinite(m), xp.log(total) + shift, m)
    if keepdims:
        return result
    return xp.reshape(result, tuple(s for a, s in enumerate(x.shape) if a not in axes))


def one_hot(xp: Namespace, indices: Array, num_classes: int, *, dtype: Any = None) -> Array:
    """Rows of the identity: ``out[..., k] = (indices[...] == k)``, shape ``indices.shape +
    (num_classes,)``.

    ``dtype`` defaults to the namespace's default real floating dtype. Indices outside
    ``[0, num_classes)`` give an all-zero row here; ``xp.nn.one_hot`` refuses them before it
    gets here (a ValueError, see :mod:`arraycore._checks`), unless ``arraycore.checks(False)``.

    >>> import numpy as np
    >>> one_hot(np, np.asarray([2, 0]), 3).tolist()
    [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]
    """
    n = check_one_hot("one_hot", xp, indices, num_classes)
    if dtype is None:
        dtype = xp.__array_namespace_info__().default_dtypes()["real floating"]
    index_dtype = indices.dtype
    if n > 0 and xp.iinfo(index_dtype).max < n - 1:
        index_dtype = xp.int64
        indices = xp.astype(indices, index_dtype)
    # made once per namespace: a step reading one-hot targets copies nothing from the host
    classes = _constants.arange(xp, n, index_dtype)
    return xp.astype(xp.equal(xp.expand_dims(indices, axis=-1), classes), dtype)


def check_one_hot(op: str, isdtype: Any, indices: Array, num_classes: Any) -> int:
    """Check integer ``indices`` (of the namespace ``isdtype``, see :func:`owned_by`) and
    ``num_classes`` >= 0 for :func:`one_hot`; returns the number of classes."""
    n = int_arg(num_classes, op, "num_classes")
    if n < 0:
        raise ValueError(f"{op}: num_classes must be >= 0, got {num_classes}")
    if not owned_by(isdtype, op, indices)(indices.dtype, "integral"):
        raise TypeError(
            f"{op}: indices must have an integer dtype, got {indices.dtype} "
            f"(shape {tuple(indices.shape)})"
        )
    return n


# -- softmax cross-entropy ----------------------------------------------------------------------
def check_cross_entropy(op: str, isdtype: Any, logits: Array, labels: Array) -> int:
    """Check float ``logits`` (classes last) against integer ``labels`` of shape
    ``logits.shape[:-1]``; returns the number of classes."""
    check_float(op, isdtype, logits=logits)
    isdtype = owned_by(isdtype, op, labels)
    shape = tuple(logits.shape)
    if not shape:
        raise ValueError(f"{op}: logits need a class axis, got a 0-d array")
    if not isdtype(labels.dtype, "integral"):
        raise TypeError(
            f"{op}: labels must have an integer dtype, got {labels.dtype} "
            f"(shape {tuple(labels.shape)})"
        )
    if tuple(labels.shape) != shape[:-1]:
        raise ValueError(
            f"{op}: labels of shape {tuple(labels.shape)} do not match logits of shape "
            f"{shape} (expected {shape[:-1]})"
        )
    return int(shape[-1])


def softmax_cross_entropy(
    xp: Namespace, logits: Array, labels: Array, scale: float = 1.0
) -> tuple[Array, Array]:
    """Cross-entropy of ``softmax(logits)`` (classes on the last axis) against integer class
    ``labels`` of shape ``logits.shape[:-1]``, and its gradient: returns ``(loss, dlogits)``.

    ``loss = -scale * sum(log_softmax(logits)[..., label])`` over every example, a 0-d array of
    the logits' dtype (``scale=1/N`` gives the batch mean); ``dlogits = (softmax(logits) -
    one_hot(labels)) * scale`` is its gradient with respect to ``logits`` (a new array: multiply
    it by the incoming gradient of the loss for backward). A label outside ``[0, classes)``
    contributes nothing here (its one-hot row is all zero, as in :func:`one_hot`);
    ``xp.nn.softmax_cross_entropy`` refuses such labels before it gets here (a ValueError)
    unless ``arraycore.checks(False)``. ``-inf`` logits of other classes are fine. Rows whose
    max is not finite give NaN, as in :func:`softmax`.
    """
    classes = check_cross_entropy("softmax_cross_entropy", xp, logits, labels)
    scale = float(scale)
    log_p = log_softmax(xp, logits, axis=-1)
    hits = one_hot(xp, labels, classes, dtype=xp.bool)
    loss = xp.multiply(xp.sum(xp.where(hits, log_p, 0.0)), -scale)
    dlogits = xp.multiply(xp.subtract(xp.exp(log_p), xp.astype(hits, logits.dtype)), scale)
    return loss, dlogits


# -- batch and layer normalisation: in _nn_batchnorm (re-exported here, where backends look) ---
from . import _nn_batchnorm  # noqa: E402

batch_norm = _nn_batchnorm.batch_norm
batch_norm_axes = _nn_batchnorm.batch_norm_axes
batch_norm_backward = _nn_batchnorm.batch_norm_backward
batch_norm_relu = _nn_batchnorm.batch_norm_relu
batch_norm_relu_backward = _nn_batchnorm.batch_norm_relu_backward
check_batch_norm_relu_backward = _nn_batchnorm.check_batch_norm_relu_backward
check_batch_norm = _nn_batchnorm.check_batch_norm
check_batch_norm_backward = _nn_batchnorm.check_batch_norm_backward
layer_norm = _nn_batchnorm.layer_norm
layer_norm_axes = _nn_batchnorm.layer_norm_axes
layer_norm_backward = _nn_batchnorm.layer_norm_backward
check_layer_norm = _nn_batchnorm.check_layer_norm
check_layer_norm_backward = _nn_batchnorm.check_layer_norm_backward

# -- the LSTM layer: in _nn_rnn (re-exported here) ------------------------------------------------
from . import _nn_rnn  # noqa: E402

lstm = _nn_rnn.lstm
lstm_backward = _nn_rnn.lstm_backward
check_lstm = _nn_rnn.check_lstm

# -- the GRU recurrence: in _nn_gru (re-exported here) --------------------------------------------
from . import _nn_gru  # noqa: E402

gru_sequence = _nn_gru.gru_sequence
gru_sequence_backward = _nn_gru.gru_sequence_backward

# -- scaled dot-product attention: in _nn_attention (re-exported here) ----------------------------
from . import _nn_attention  # noqa: E402

scaled_dot_product_attention = _nn_attention.scaled_dot_product_attention
scaled_dot_product_attention_backward = _nn_attention.scaled_dot_product_attention_backward
check_attention = _nn_attention.check_attention
check_attention_backward = _nn_attention.check_attention_backward
