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

from numba import njit, prange

_FLAGS = {"reassoc", "contract"}


@njit(parallel=True, fastmath=_FLAGS, cache=True)
def batch_norm(x, gamma, beta, eps, y, mean, inv_std):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201
    """Training-mode batch normalisation of ``x`` ``(N, C, P)`` into ``y``, per channel: its
    mean, its (biased) variance about that mean, then ``y = x * k + b`` with
    ``k = gamma / sqrt(var + eps)`` and ``b = beta - mean * k``. A channel's values are read from
    memory once; the second and third reads find them in cache."""
    n, c, p = x.shape
    count = n * p
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
        for i in range(n):
            for j in range(p):
                y[i, ch, j] = x[i, ch, j] * scale + shift
        mean[ch] = m
        inv_std[ch] = r


@njit(parallel=True, fastmath=_FLAGS, cache=True)
def batch_norm_backward(dy, x, gamma, mean, inv_std, dx, dgamma, dbeta):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN201
    """The gradients of :func:`batch_norm`: per channel the two sums ``sum(dy)`` (``dbeta``) and
    ``sum(dy * (x - mean))`` (``dgamma / inv_std``), then
    ``dx = k * (dy - dbeta / count - x_hat * dgamma / count)`` with ``k = gamma * inv_std``,
    written as ``dx = dy * a + x * b + c``."""
    n, c, p = x.shape
    count = n * p
    for ch in prange(c):
        m = mean[ch]
        sum_dy = 0.0
        sum_dy_centred = 0.0
        for i in range(n):
            for j in range(p):
                g = dy[i, ch, j]
                sum_dy += g
                sum_dy_centred += g * (x[i, ch, j] - m)
        r = inv_std[ch]
        dg = sum_dy_centred * r
        k = gamma[ch] * r
        b = -k * r * dg / count
        t = dx.dtype.type
        a_, b_, c_ = t(k), t(b), t(-k * sum_dy / count - b * m)
        for i in range(n):
            for j in range(p):
                dx[i, ch, j] = dy[i, ch, j] * a_ + x[i, ch, j] * b_ + c_
        dgamma[ch] = dg
        dbeta[ch] = sum_dy


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
