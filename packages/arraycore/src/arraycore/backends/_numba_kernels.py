"""The NumPy backend's numba kernels (see :mod:`._numba`, which imports this module only when
numba is installed and switched on): plain loops over NumPy arrays, compiled by numba.

Each kernel makes one or two passes over memory where the NumPy code in
:mod:`._numpy_nn` makes five to eight (every NumPy call is a pass), and spreads its channels
over the OpenMP threads (``prange``). Sums accumulate in float64. The compiled code is cached on
disk (``cache=True``), so only the first process on a machine pays the compilation.

Floating-point flags: ``reassoc`` (sums may be reordered, which vectorises them) and
``contract`` (fused multiply-add); not ``nnan``/``ninf``, so NaN and infinity propagate as in
the reference.
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.extending import intrinsic

_FLAGS = {"reassoc", "contract"}


@njit(parallel=True, fastmath=_FLAGS, cache=True)
def batch_norm(x, gamma, beta, eps, relu, y, mean, inv_std):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201
    """Training-mode batch normalisation of ``x`` ``(N, C, P)`` into ``y``, per channel: its
    mean, its (biased) variance about that mean, then ``y = x * k + b`` with
    ``k = gamma / sqrt(var + eps)`` and ``b = beta - mean * k``; with ``relu``, ``max(y, 0)``
    in the same pass (``maximum``'s rule: NaN stays NaN, ``-0.0`` becomes ``0.0``). A channel's
    values are read from memory once; the second and third reads find them in cache."""
    n, c, p = x.shape
    count = n * p
    zero = y.dtype.type(0)
    for ch in prange(c):
        total = 0.0
        for i in range(n):
            for j in range(p):
                total += x[i, ch, j]
        m = total / count
        squares = 0.0
        for i in range(n):
            for j in range(p):
                d = x[i, ch, j] - m
                squares += d * d
        r = 1.0 / math.sqrt(squares / count + eps)
        k = gamma[ch] * r
        scale, shift = y.dtype.type(k), y.dtype.type(beta[ch] - m * k)
        if relu:
            for i in range(n):
                for j in range(p):
                    v = x[i, ch, j] * scale + shift
                    y[i, ch, j] = zero if v <= zero else v
        else:
            for i in range(n):
                for j in range(p):
                    y[i, ch, j] = x[i, ch, j] * scale + shift
        mean[ch] = m
        inv_std[ch] = r


@njit(parallel=True, fastmath=_FLAGS, cache=True)
def bias_relu(x, bias, y):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201
    """``y = maximum(x + bias, 0)`` for ``x`` ``(M, C, P)`` and ``bias`` ``(C,)`` (``maximum``'s
    rule: NaN stays NaN, ``-0.0`` becomes ``0.0``), one pass, the ``M`` blocks over the threads;
    ``P == 1`` (the rows of a dense layer) runs along ``C``, so that the loop vectorises."""
    m, c, p = x.shape
    zero = y.dtype.type(0)
    for i in prange(m):
        if p == 1:
            for ch in range(c):
                v = x[i, ch, 0] + bias[ch]
                y[i, ch, 0] = zero if v <= zero else v
        else:
            for ch in range(c):
                b = bias[ch]
                for j in range(p):
                    v = x[i, ch, j] + b
                    y[i, ch, j] = zero if v <= zero else v


@njit(parallel=True, fastmath=_FLAGS, cache=True)
def bias_relu_backward(dy, y, dx, dbias):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201
    """The gradients of :func:`bias_relu` from its output ``y`` (``(M, C, P)``): ``dx = dy * (y >
    0)`` (``relu_backward``'s product, the same bits: a NaN or infinite ``dy`` where the unit is
    off gives NaN) and ``dbias[c]``, the sum of ``dx[:, c, :]`` in float64, in one pass,
    channels over the threads."""
    m, c, p = y.shape
    zero = dx.dtype.type(0)
    for ch in prange(c):
        total = 0.0
        for i in range(m):
            for j in range(p):
                g = dy[i, ch, j]
                if not y[i, ch, j] > zero:
                    g = g * zero
                dx[i, ch, j] = g
                total += g
        dbias[ch] = total


@njit(parallel=True, fastmath=_FLAGS, cache=True)
def bias_relu_backward_rows(dy, y, dx, partial):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201
    """:func:`bias_relu_backward` for rows ``(M, C)`` (a dense layer's, the bias along ``C``):
    the rows in ``B`` blocks over the threads, each adding its ``dx`` into its own row of
    ``partial`` ``(B, C)`` (zeros, of ``dx``'s dtype: NumPy's sum along the rows adds them one
    by one in that dtype too, and a float64 accumulator halves the vector width), which the
    caller sums."""
    m = y.shape[0]
    blocks = partial.shape[0]
    zero = dx.dtype.type(0)
    for blk in prange(blocks):
        acc = partial[blk]
        for i in range(blk * m // blocks, (blk + 1) * m // blocks):
            for ch in range(y.shape[1]):
                g = dy[i, ch]
                if not y[i, ch] > zero:
                    g = g * zero
                dx[i, ch] = g
                acc[ch] += g


@njit(parallel=True, fastmath=_FLAGS, cache=True)
def batch_norm_backward(dy, x, gamma, mean, inv_std, relu, y, dx, dgamma, dbeta):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201
    """The gradients of :func:`batch_norm`: per channel the two sums ``sum(g)`` (``dbeta``) and
    ``sum(g * (x - mean))`` (``dgamma / inv_std``), then
    ``dx = k * (g - dbeta / count - x_hat * dgamma / count)`` with ``k = gamma * inv_std``,
    written as ``dx = g * a + x * b + c``; ``g`` is ``dy``, or with ``relu`` the gradient of
    ``relu(batch_norm(x))`` whose output was ``y``, ``dy * (y > 0)`` (``relu_backward``'s),
    formed as ``dy`` is read and never stored (``y`` is not read without ``relu``)."""
    n, c, p = x.shape
    count = n * p
    zero = dx.dtype.type(0)
    for ch in prange(c):
        m = mean[ch]
        sum_dy = 0.0
        sum_dy_centred = 0.0
        for i in range(n):
            for j in range(p):
                g = dy[i, ch, j]
                if relu and not y[i, ch, j] > zero:
                    g = g * zero
                sum_dy += g
                sum_dy_centred += g * (x[i, ch, j] - m)
        a_, b_, c_ = _bn_backward_coefficients(
            dx.dtype.type, sum_dy, sum_dy_centred, gamma[ch], m, inv_std[ch], count
        )
        for i in range(n):
            for j in range(p):
                g = dy[i, ch, j]
                if relu and not y[i, ch, j] > zero:
                    g = g * zero
                dx[i, ch, j] = g * a_ + x[i, ch, j] * b_ + c_
        dgamma[ch] = sum_dy_centred * inv_std[ch]
        dbeta[ch] = sum_dy


@njit(fastmath=_FLAGS, inline="always")
def _bn_backward_coefficients(t, sum_dy, sum_dy_centred, gamma, m, r, count):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN202
    """``(a, b, c)`` of ``dx = dy * a + x * b + c`` for one channel, in ``dx``'s type ``t``."""
    dg = sum_dy_centred * r
    k = gamma * r
    b = -k * r * dg / count
    return t(k), t(b), t(-k * sum_dy / count - b * m)


@njit(cache=True)
def scatter_add_rows(out, indices, values):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201
    """``out[indices[i], :] += values[i, :]`` for ``i`` in order (``numpy.add.at``'s order, so
    the same sums), negative indices counting from the end; ``False``, with ``out`` untouched,
    when an index is outside ``[-len(out), len(out))``. Sequential: repeated indices would race
    across threads."""
    m = out.shape[0]
    for i in range(indices.shape[0]):
        if indices[i] < -m or indices[i] >= m:
            return False
    for i in range(indices.shape[0]):
        r = indices[i]
        if r < 0:
            r += m
        for j in range(values.shape[1]):
            out[r, j] += values[i, j]
    return True


@njit(inline="always")
def _window_max(xp, r0, c0, kh, kw):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN202
    """``(row, col)`` of the first maximum of one window's in-image pixels of the plane ``xp`` in
    row-major order, a NaN winning (the first NaN); ``row = -1`` when no pixel is in the image.

    A window inside the image first takes a plain ``v > best`` scan that also sums ``v * 0``:
    that sum is NaN only where the window holds a NaN or an infinity, and only then does the
    exact rule run (its extra tests made every window 4x slower)."""
    h, w = xp.shape
    if r0 >= 0 and c0 >= 0 and r0 + kh <= h and c0 + kw <= w:
        best, br, bc = xp[r0, c0], r0, c0
        check = best * 0
        for r in range(r0, r0 + kh):
            row = xp[r]
            for c in range(c0, c0 + kw):
                v = row[c]
                check += v * 0
                if v > best:
                    best, br, bc = v, r, c
        if check == check:
            return br, bc
    best, br, bc = -math.inf, -1, -1
    for r in range(max(r0, 0), min(r0 + kh, h)):
        for c in range(max(c0, 0), min(c0 + kw, w)):
            v = xp[r, c]
            if br < 0 or (best == best and (v > best or v != v)):
                best, br, bc = v, r, c
    return br, bc


@njit(parallel=True, cache=True)
def max_pool2d_backward(dy, x, kh, kw, sh, sw, top, left, dx):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201
    """Max-pool backward on planes (``dy`` ``(N*C, OH, OW)``, ``x`` and the zeroed ``dx``
    ``(N*C, H, W)``): each window's ``dy`` added at its first maximum (:func:`_window_max`, the
    reference's rule), in window order (overlapping windows sum as the reference's loop), planes
    over the threads."""
    for plane in prange(x.shape[0]):
        xp, dxp = x[plane], dx[plane]
        for p in range(dy.shape[1]):
            g = dy[plane, p]
            for q in range(dy.shape[2]):
                r, c = _window_max(xp, p * sh - top, q * sw - left, kh, kw)
                if r >= 0:
                    dxp[r, c] += g[q]


@njit(parallel=True, fastmath=_FLAGS, cache=True)
def max_pool2d_2x2(x, y):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201
    """Max-pool forward for 2x2 windows at stride 2 without padding, on planes (``x`` ``(N*C, H,
    W)``, ``y`` ``(N*C, OH, OW)``): one pass, each window's first maximum (``max`` keeps the
    earlier of equal values: -0.0 before 0.0, as the reference). A row of windows whose sum is
    NaN (one holds a NaN, or infinities of both signs) is redone by :func:`_window_max` (the
    first NaN wins); a sum is cheaper than testing each value."""
    for plane in prange(x.shape[0]):
        xp, yp = x[plane], y[plane]
        for p in range(y.shape[1]):
            x0, x1, yr = xp[2 * p], xp[2 * p + 1], yp[p]
            bad = 0.0
            for q in range(y.shape[2]):
                a, b, e, f = x0[2 * q], x0[2 * q + 1], x1[2 * q], x1[2 * q + 1]
                bad += (a + b) + (e + f)
                yr[q] = max(max(a, b), max(e, f))
            if bad != bad:
                for q in range(y.shape[2]):
                    rr, cc = _window_max(xp, 2 * p, 2 * q, 2, 2)
                    yr[q] = xp[rr, cc]


@njit(inline="always")
def _first_max_of_four(a, b, e, f):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN202
    """Which of ``a, b, e, f`` (a 2x2 window in row-major order) is the first equal to their
    maximum, 0 to 3, from comparisons summed instead of branched on (random data and the ties of
    ReLU outputs made the branches mispredict; this form is vectorised). NaN windows are not
    its business: the caller redoes them."""
    m = max(max(a, b), max(e, f))
    at_a = a == m
    by_b = at_a or b == m
    by_e = by_b or e == m
    return np.int8(3) - np.int8(by_e) - np.int8(by_b) - np.int8(at_a)


@njit(parallel=True, fastmath=_FLAGS, cache=True)
def max_pool2d_backward_2x2(dy, x, dx):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201
    """Max-pool backward for 2x2 windows at stride 2 without padding, on planes (``dy``
    ``(N*C, OH, OW)``, ``x`` and ``dx`` ``(N*C, H, W)``): every pixel of ``dx`` under a window is
    written (``dy`` at the window's first maximum, 0 elsewhere), so ``dx`` needs no zeroing but
    for the last row or column an odd ``H`` or ``W`` leaves out.

    Per pair of rows, one loop finds each window's first maximum (:func:`_first_max_of_four`)
    and a second writes the two rows of ``dx`` in order; both vectorise (2-3x faster than one
    loop of selects). A row of windows whose sum is NaN (one holds a NaN, or infinities of both
    signs) is redone by :func:`_window_max`, the reference's rule: the first NaN wins."""
    ow = dy.shape[2]
    for plane in prange(x.shape[0]):
        xp, dxp, g = x[plane], dx[plane], dy[plane]
        first = np.empty(ow, np.int8)
        for p in range(dy.shape[1]):
            r = 2 * p
            x0, x1, d0, d1, gp = xp[r], xp[r + 1], dxp[r], dxp[r + 1], g[p]
            bad = 0.0
            for q in range(ow):
                a, b, e, f = x0[2 * q], x0[2 * q + 1], x1[2 * q], x1[2 * q + 1]
                bad += (a + b) + (e + f)
                first[q] = _first_max_of_four(a, b, e, f)
            for c in range(2 * ow):
                k, gq = first[c >> 1], gp[c >> 1]
                d0[c] = gq if k == (c & 1) else 0.0
                d1[c] = gq if k == 2 + (c & 1) else 0.0
            if bad != bad:
                for q in range(ow):
                    c = 2 * q
                    d0[c] = d0[c + 1] = d1[c] = d1[c + 1] = 0.0
                    rr, cc = _window_max(xp, r, c, 2, 2)
                    dxp[rr, cc] = gp[q]


@njit(parallel=True, fastmath=_FLAGS, cache=True)
def layer_norm(x, gamma, beta, eps, y, mean, inv_std):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201
    """Layer normalisation of each row of ``x`` ``(R, D)`` into ``y``: its mean, its biased
    variance about that mean (the row read again from cache), ``y = (x - mean) * inv_std *
    gamma + beta``; rows over the threads."""
    d = x.shape[1]
    for r in prange(x.shape[0]):
        row = x[r]
        s = 0.0
        for j in range(d):
            s += row[j]
        m = s / d
        v = 0.0
        for j in range(d):
            c = row[j] - m
            v += c * c
        inv = 1.0 / math.sqrt(v / d + eps)
        out = y[r]
        for j in range(d):
            out[j] = (row[j] - m) * inv * gamma[j] + beta[j]
        mean[r] = m
        inv_std[r] = inv


@njit(parallel=True, fastmath=_FLAGS, cache=True)
def layer_norm_backward(dy, x, gamma, mean, inv_std, dx, dgamma, dbeta, blocks):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201
    """Gradients of :func:`layer_norm`: ``dx`` row by row (two passes over the row), and
    ``dgamma``, ``dbeta`` summed over the rows in float64, ``blocks`` blocks of rows over the
    threads, each into its own partial sums (no two threads write one element)."""
    n, d = x.shape
    part_g = np.zeros((blocks, d))
    part_b = np.zeros((blocks, d))
    for b in prange(blocks):
        for r in range(b * n // blocks, (b + 1) * n // blocks):
            m, inv = mean[r], inv_std[r]
            xr, gr, out = x[r], dy[r], dx[r]
            sg = 0.0
            sgx = 0.0
            for j in range(d):
                xh = (xr[j] - m) * inv
                g = gr[j] * gamma[j]
                sg += g
                sgx += g * xh
                part_g[b, j] += gr[j] * xh
                part_b[b, j] += gr[j]
            sg /= d
            sgx /= d
            for j in range(d):
                xh = (xr[j] - m) * inv
                out[j] = (gr[j] * gamma[j] - sg - xh * sgx) * inv
    for j in range(d):
        tg = 0.0
        tb = 0.0
        for b in range(blocks):
            tg += part_g[b, j]
            tb += part_b[b, j]
        dgamma[j] = tg
        dbeta[j] = tb


@njit(parallel=True, cache=True)
def relu_backward(dy, y, out):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201
    """``out = dy * (y > 0)`` over flat arrays, the items split over the threads."""
    for i in prange(dy.shape[0]):
        out[i] = dy[i] * (y[i] > 0)


# -- softmax ------------------------------------------------------------------------------------
@intrinsic
def _float32_from_bits(typingctx, bits):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201, ARG001
    """The float32 whose bits are the int32 ``bits`` (a bit cast, as C's ``memcpy``)."""
    sig = types.float32(types.int32)

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN202, ARG001
        return builder.bitcast(args[0], ir.FloatType())

    return sig, codegen


#: Below this (``log`` of float32's smallest normal number) the exponential counts as 0.
_EXP_FLOOR = np.float32(-87.33)


@njit(fastmath=_FLAGS, inline="always")
def _exp_nonpositive(x):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201
    """``exp(x)`` of a float32 ``x <= 0`` in a form the compiler vectorises (numba's ``exp`` is
    a call per item): Cephes' ``expf``, ``2**n * exp(r)`` with ``n = round(x / ln 2)``,
    ``ln 2`` split in two so that ``r = x - n ln 2`` is exact, and ``exp(r)`` a polynomial (a few
    ulp from NumPy's); the power of two put together from its bits. ``-inf`` and anything below
    :data:`_EXP_FLOOR` give 0 (where NumPy's gives a number under 1.2e-38). ``n`` stays a
    float32 (``np.floor``; ``math.floor`` gives an int64, whose conversions halved the speed)."""
    f32 = np.float32
    clamped = max(x, _EXP_FLOOR)
    n = np.floor(clamped * f32(1.44269504088896341) + f32(0.5))
    r = clamped - n * f32(0.693359375) + n * f32(2.12194440e-4)
    p = f32(1.9875691500e-4)
    p = p * r + f32(1.3981999507e-3)
    p = p * r + f32(8.3334519073e-3)
    p = p * r + f32(4.1665795894e-2)
    p = p * r + f32(1.6666665459e-1)
    p = p * r + f32(5.0000001201e-1)
    p = p * r * r + r + f32(1.0)
    bits = (np.int32(n) + np.int32(127)) << np.int32(23)
    power = _float32_from_bits(bits)  # type: ignore[call-arg,var-annotated]
    return p * power if x >= _EXP_FLOOR else f32(0.0)


@njit(fastmath=_FLAGS, inline="always")
def _ordered(bits):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN202
    """The int32 key of a float32's ``bits`` that orders as the floats do (negative floats'
    magnitude bits flipped), and its own inverse: a max of keys is an integer max, which the
    compiler vectorises where a float max with NaN's rules is a chain of selects."""
    return bits ^ ((bits >> np.int32(31)) & np.int32(0x7FFFFFFF))


@njit(fastmath=_FLAGS, inline="always")
def _block_max(x, first, last, top):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN202
    """``top[r]``: the max of row ``r`` of the float32 ``x`` for the rows ``first:last``; NaN
    for a row whose max is not finite or that holds a NaN (counted apart: a NaN's key may be
    above or below every number's)."""
    bits = x.view(np.int32)
    for r in range(first, last):
        key = np.int32(-2147483648)
        nans = 0
        for j in range(x.shape[1]):
            key = max(key, _ordered(bits[r, j]))
            nans += x[r, j] != x[r, j]
        m = _float32_from_bits(_ordered(key))  # type: ignore[call-arg,var-annotated]
        top[r] = m if nans == 0 and math.isfinite(m) else np.nan


#: The items of a row summed in float32 (vectorised) before the partial sum joins the row's
#: float64 total: ``exp`` of at most 1 each, so a partial's rounding stays near float32's.
_EXP_CHUNK = 256


@njit(fastmath=_FLAGS, inline="always")
def _block_exp(x, first, last, top, out, total):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN202
    """``out[r] = exp(x[r] - top[r])`` and ``total[r]`` its sum (float64, over float32 partial
    sums of :data:`_EXP_CHUNK` items) for the rows ``first:last`` whose ``top`` is finite
    (``total`` may be ``top``); NaN for the others."""
    d = x.shape[1]
    for r in range(first, last):
        m = np.float32(top[r])
        s = np.nan
        if math.isfinite(m):
            s = 0.0
            for lo in range(0, d, _EXP_CHUNK):
                hi = min(lo + _EXP_CHUNK, d)
                src, dst = x[r, lo:hi], out[r, lo:hi]
                part = np.float32(0.0)
                for j in range(hi - lo):
                    e = _exp_nonpositive(src[j] - m)
                    dst[j] = e
                    part += e
                s += float(part)
        total[r] = s


# The kernels below run blocks of rows over the threads, each block in passes that the compiler
# vectorises and that find the block in cache (one loop doing all of a row's work did not
# vectorise: 0.8 against 0.33 ms for 4096 rows of 64).


@njit(parallel=True, fastmath=_FLAGS, cache=True)
def softmax_rows(x, out, total, rows):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201
    """Softmax of each row of the float32 ``x`` ``(R, D)`` into ``out`` (which may be ``x``) in
    blocks of ``rows`` rows: the rows' max; ``exp(x - max)`` and its sum in float64; the
    products by ``1 / sum``. ``total[r]`` is left NaN for a row whose max is not finite or that
    holds a NaN (the caller computes those another way)."""
    count = x.shape[0]
    for b in prange((count + rows - 1) // rows):
        first, last = b * rows, min(count, (b + 1) * rows)
        _block_max(x, first, last, total)
        _block_exp(x, first, last, total, out, total)
        for r in range(first, last):
            if math.isfinite(total[r]):
                inv = np.float32(1.0 / total[r])
                for j in range(x.shape[1]):
                    out[r, j] *= inv


@njit(fastmath=_FLAGS, inline="always")
def _xent_block(z, labels, scale, grad, top, total, first, last):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN202
    """The rows ``first:last`` of :func:`softmax_xent_small`: ``grad`` written, the sum of
    their losses returned (NaN for a label outside ``[0, D)`` or a row it does not take)."""
    d = z.shape[1]
    for r in range(first, last):
        if labels[r] < 0 or labels[r] >= d:
            return np.nan
    _block_max(z, first, last, top)
    _block_exp(z, first, last, top, grad, total)
    loss = 0.0  # NaN from a row whose total is NaN
    for r in range(first, last):
        k = np.float32(scale / total[r])
        for j in range(d):
            grad[r, j] *= k
        label = labels[r]
        grad[r, label] -= np.float32(scale)
        loss += math.log(total[r]) + top[r] - z[r, label]
    return loss


@njit(fastmath=_FLAGS, cache=True)
def softmax_xent_small(z, labels, scale, grad, top, total):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201
    """Softmax cross-entropy of the float32 logits ``z`` ``(R, D)`` against ``labels`` on one
    thread (for small arrays, where NumPy's code is a dozen calls of overhead), with
    :func:`softmax_rows`' passes over all the rows (``top``, ``total``: float64 scratch of ``R``):
    ``grad[r] = (softmax(z[r]) - one_hot(labels[r])) * scale`` and the return value ``scale *
    sum(log(sum(exp(z[r] - max))) + max - z[r, labels[r]])`` (float64). NaN, with ``grad``
    partly written, when a label lies outside ``[0, D)`` or a row's max is not finite or it
    holds a NaN: the caller computes those another way."""
    return _xent_block(z, labels, scale, grad, top, total, 0, z.shape[0]) * scale


@njit(parallel=True, fastmath=_FLAGS, cache=True)
def softmax_xent_rows(z, labels, scale, grad, top, total, losses, rows):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201
    """:func:`softmax_xent_small` of large logits in blocks of ``rows`` rows over the threads,
    each block's loss in ``losses`` (float64, one per block; NaN where the block has a row it
    does not take). The caller sums them, so the result does not depend on the thread count."""
    count = z.shape[0]
    for b in prange((count + rows - 1) // rows):
        first, last = b * rows, min(count, (b + 1) * rows)
        losses[b] = _xent_block(z, labels, scale, grad, top, total, first, last)


@njit(parallel=True, fastmath=_FLAGS, cache=True)
def softmax_backward_rows(dy, y, out):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201
    """``out = y * (dy - sum(dy * y))`` for each row of ``(R, D)`` arrays (the sum in float64),
    the rows over the threads."""
    d = y.shape[1]
    for r in prange(y.shape[0]):
        total = 0.0
        for j in range(d):
            total += dy[r, j] * y[r, j]
        dot = out.dtype.type(total)
        for j in range(d):
            out[r, j] = y[r, j] * (dy[r, j] - dot)


# -- GRU ----------------------------------------------------------------------------------------
_F32 = np.float32


@njit(fastmath=_FLAGS, inline="always")
def _tanh(x):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN202
    """``tanh`` of a float32 in a form the compiler vectorises (numba's is a call per item):
    Cephes' ``tanhf``, a polynomial in ``x**2`` below 0.625 in magnitude and ``(1 - e) / (1 +
    e)`` with ``e = exp(-2|x|)`` above (under 1 ulp from the exact value over [-20, 20]; NumPy's
    float32 ``tanh``: 1.4). The kernels that inline it compile with ``error_model="numpy"``:
    numba's default checks every division for a zero divisor, which stops vectorisation (8.5
    against 1.2 ns an item)."""
    a = abs(x)
    z = x * x
    p = _F32(-5.70498872745e-3) * z + _F32(2.06390887954e-2)
    p = p * z - _F32(5.37397155531e-2)
    p = p * z + _F32(1.33314422036e-1)
    p = p * z - _F32(3.33332819422e-1)
    small = p * z * x + x
    e = _exp_nonpositive(_F32(-2.0) * a)
    big = (_F32(1.0) - e) / (_F32(1.0) + e)
    y = small if a < _F32(0.625) else (big if x > 0 else -big)
    return y if x == x and x != 0 else x  # NaN stays NaN, -0 stays -0


@njit(fastmath=_FLAGS, inline="always")
def _gate(x):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN202
    """``sigmoid(x)`` written as the reference's ``0.5 * tanh(0.5 x) + 0.5``."""
    return _tanh(x * _F32(0.5)) * _F32(0.5) + _F32(0.5)


@njit(fastmath=_FLAGS, error_model="numpy", cache=True)
def gru_cell_forward(t, has_h, hid, xw, b, h, ru, cand, rec_n, y):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201
    """GRU step ``t`` of :func:`arraycore._nn_gru.gru_sequence` (float32), the device kernel
    ``gru_cell_forward``'s arithmetic: from ``hid = h @ u`` (read only with ``has_h``), the
    step's projected inputs ``xw[:, t]`` and the recurrent bias ``b``, the gates into ``ru[:,
    t]``, the candidate into ``cand[:, t]``, ``hid``'s ``n`` block plus bias into ``rec_n[:,
    t]``, the new state into ``y[:, t]`` and ``h`` (in place). One thread: the step is small,
    and the product around it has the threads."""
    n, hidden = h.shape
    for row in range(n):
        for j in range(hidden):
            hr, hz, hn = b[j], b[hidden + j], b[2 * hidden + j]
            if has_h:
                hr = hid[row, j] + hr
                hz = hid[row, hidden + j] + hz
                hn = hid[row, 2 * hidden + j] + hn
            r = _gate(xw[row, t, j] + hr)
            z = _gate(xw[row, t, hidden + j] + hz)
            c = _tanh(xw[row, t, 2 * hidden + j] + r * hn)
            out = c + z * (h[row, j] - c) if has_h else c - z * c
            ru[row, t, j] = r
            ru[row, t, hidden + j] = z
            cand[row, t, j] = c
            rec_n[row, t, j] = hn
            y[row, t, j] = out
            h[row, j] = out


@njit(fastmath=_FLAGS, error_model="numpy", cache=True)
def gru_cell_backward(t, has_g, has_h0, dy, g, dhz, h0, y, ru, cand, rec_n, dxw, dhid):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201
    """The gradient through GRU step ``t`` (the device kernel ``gru_cell_backward``'s
    arithmetic): ``dh = dy[:, t] + g + dhz`` (``has_g``: ``g = dhid[:, t + 1] @ u^T`` and ``dhz
    = dh_{t+1} z_{t+1}`` from the step after), the pre-activation gradients into ``dxw[:, t]``
    and ``dhid[:, t]`` (``[dr, dz, dn r]``), ``dh z_t`` into ``dhz`` for step ``t - 1``.
    ``h_{t-1}`` is ``y[:, t - 1]``, or ``h0`` (``has_h0``), or zero. One thread."""
    n, _steps, hidden = y.shape
    one = _F32(1.0)
    for row in range(n):
        for j in range(hidden):
            dh = dy[row, t, j]
            if has_g:
                dh = dh + (g[row, j] + dhz[row, j])
            h_prev = _F32(0.0)
            if t > 0:
                h_prev = y[row, t - 1, j]
            elif has_h0:
                h_prev = h0[row, j]
            r, z, c = ru[row, t, j], ru[row, t, hidden + j], cand[row, t, j]
            dn = dh * ((one - z) * (one - c * c))
            dr = dn * (rec_n[row, t, j] * (r * (one - r)))
            dz = dh * ((h_prev - c) * (z * (one - z)))
            dxw[row, t, j] = dr
            dxw[row, t, hidden + j] = dz
            dxw[row, t, 2 * hidden + j] = dn
            dhid[row, t, j] = dr
            dhid[row, t, hidden + j] = dz
            dhid[row, t, 2 * hidden + j] = dn * r
            dhz[row, j] = dh * z
