"""Brute-force ground truth for the ``nn`` kernels: plain loops, float64, obviously correct.

Each function loops over output (or input) positions in Python and reads pixels one by one,
with an explicit bounds check instead of a padded copy, so it shares no code and no trick with
the kernels under test. Inputs are NumPy arrays (any float dtype); results are float64 NumPy
arrays (cast them to the dtype under test before comparing). Parameters are in the normalised
form: ``stride``/``dilation``/``kernel`` as ``(h, w)`` pairs and ``pads`` as
``((top, bottom), (left, right))``. Only for small shapes: the cost is
``N * O * out_h * out_w * C * KH * KW`` Python steps.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np

IntPair = tuple[int, int]
Pads = tuple[IntPair, IntPair]


def conv2d(
    x: np.ndarray, w: np.ndarray, stride: IntPair, pads: Pads, dilation: IntPair
) -> np.ndarray:
    """``y[n,o,p,q] = sum_{c,i,j} x[n, c, p*sh - top + i*dh, q*sw - left + j*dw] * w[o,c,i,j]``,
    reading 0 outside the image."""
    n_, c_, h_, w_ = x.shape
    o_, _, kh, kw = w.shape
    (sh, sw), (dh, dw) = stride, dilation
    (top, bottom), (left, right) = pads
    out_h = (h_ + top + bottom - dh * (kh - 1) - 1) // sh + 1
    out_w = (w_ + left + right - dw * (kw - 1) - 1) // sw + 1
    xs, ws = x.tolist(), w.tolist()
    y = np.zeros((n_, o_, out_h, out_w))
    for n in range(n_):
        for o in range(o_):
            for p in range(out_h):
                for q in range(out_w):
                    total = 0.0
                    for c in range(c_):
                        for i in range(kh):
                            for j in range(kw):
                                row = p * sh - top + i * dh
                                col = q * sw - left + j * dw
                                if 0 <= row < h_ and 0 <= col < w_:
                                    total += xs[n][c][row][col] * ws[o][c][i][j]
                    y[n, o, p, q] = total
    return y


def conv2d_backward_filter(
    x: np.ndarray,
    dy: np.ndarray,
    w_shape: tuple[int, int, int, int],
    stride: IntPair,
    pads: Pads,
    dilation: IntPair,
) -> np.ndarray:
    """``dw[o,c,i,j] = sum_{n,p,q} dy[n,o,p,q] * x[n, c, p*sh - top + i*dh, q*sw - left + j*dw]``,
    reading 0 outside the image: the gradient of :func:`conv2d` with respect to ``w``."""
    n_, c_, h_, w_ = x.shape
    o_, _, kh, kw = w_shape
    (sh, sw), (dh, dw) = stride, dilation
    (top, _), (left, _) = pads
    out_h, out_w = dy.shape[2:]
    xs, dys = x.tolist(), dy.tolist()
    grad = np.zeros(w_shape)
    for o in range(o_):
        for c in range(c_):
            for i in range(kh):
                for j in range(kw):
                    total = 0.0
                    for n in range(n_):
                        for p in range(out_h):
                            row = p * sh - top + i * dh
                            if not 0 <= row < h_:
                                continue
                            for q in range(out_w):
                                col = q * sw - left + j * dw
                                if 0 <= col < w_:
                                    total += dys[n][o][p][q] * xs[n][c][row][col]
                    grad[o, c, i, j] = total
    return grad


def conv2d_transpose(
    x: np.ndarray,
    w: np.ndarray,
    stride: IntPair,
    pads: Pads,
    dilation: IntPair,
    output_padding: IntPair,
) -> np.ndarray:
    """The scatter definition: input pixel ``(p, q)`` adds ``x * w[ci, co, i, j]`` to output
    pixel ``(p*sh + i*dh - top, q*sw + j*dw - left)``; ``w`` is ``(C_in, C_out, KH, KW)``."""
    n_, cin, h_, w_ = x.shape
    _, cout, kh, kw = w.shape
    (sh, sw), (dh, dw) = stride, dilation
    (top, bottom), (left, right) = pads
    out_h = (h_ - 1) * sh - top - bottom + dh * (kh - 1) + output_padding[0] + 1
    out_w = (w_ - 1) * sw - left - right + dw * (kw - 1) + output_padding[1] + 1
    xs, ws = x.tolist(), w.tolist()
    y = np.zeros((n_, cout, out_h, out_w))
    for n in range(n_):
        for ci in range(cin):
            for p in range(h_):
                for q in range(w_):
                    for co in range(cout):
                        for i in range(kh):
                            for j in range(kw):
                                row = p * sh + i * dh - top
                                col = q * sw + j * dw - left
                                if 0 <= row < out_h and 0 <= col < out_w:
                                    y[n, co, row, col] += xs[n][ci][p][q] * ws[ci][co][i][j]
    return y


def _pool_windows(
    shape: tuple[int, ...], kernel: IntPair, stride: IntPair, pads: Pads
) -> Iterator[tuple[int, int, list[IntPair]]]:
    """Yield ``(p, q, pixels)``: each window's position and its in-image (row, col) pixels in
    row-major window order."""
    _, _, h_, w_ = shape
    (kh, kw), (sh, sw) = kernel, stride
    (top, bottom), (left, right) = pads
    out_h = (h_ + top + bottom - kh) // sh + 1
    out_w = (w_ + left + right - kw) // sw + 1
    for p in range(out_h):
        for q in range(out_w):
            pixels = []
            for i in range(kh):
                for j in range(kw):
                    row, col = p * sh - top + i, q * sw - left + j
                    if 0 <= row < h_ and 0 <= col < w_:
                        pixels.append((row, col))
            yield p, q, pixels


def _pool_out_shape(
    shape: tuple[int, ...], kernel: IntPair, stride: IntPair, pads: Pads
) -> tuple[int, int, int, int]:
    n_, c_, h_, w_ = shape
    out_h = (h_ + sum(pads[0]) - kernel[0]) // stride[0] + 1
    out_w = (w_ + sum(pads[1]) - kernel[1]) // stride[1] + 1
    return n_, c_, out_h, out_w


def _first_max(values: list[float]) -> int:
    """Index of the first maximum; a NaN counts as larger than everything (first NaN wins)."""
    best = 0
    for k, v in enumerate(values):
        if math.isnan(values[best]):
            break
        if math.isnan(v) or v > values[best]:
            best = k
    return best


def max_pool2d(x: np.ndarray, kernel: IntPair, stride: IntPair, pads: Pads) -> np.ndarray:
    """Maximum over the in-image pixels of each window (padding never wins); NaN wins."""
    y = np.zeros(_pool_out_shape(x.shape, kernel, stride, pads))
    xs = x.tolist()
    for n in range(x.shape[0]):
        for c in range(x.shape[1]):
            for p, q, pixels in _pool_windows(x.shape, kernel, stride, pads):
                values = [xs[n][c][r][s] for r, s in pixels]
                y[n, c, p, q] = values[_first_max(values)]
    return y


def max_pool2d_backward(
    dy: np.ndarray, x: np.ndarray, kernel: IntPair, stride: IntPair, pads: Pads
) -> np.ndarray:
    """Each window's ``dy`` goes to its first maximal in-image pixel (row-major), summed."""
    dx = np.zeros(x.shape)
    xs = x.tolist()
    for n in range(x.shape[0]):
        for c in range(x.shape[1]):
            for p, q, pixels in _pool_windows(x.shape, kernel, stride, pads):
                values = [xs[n][c][r][s] for r, s in pixels]
                row, col = pixels[_first_max(values)]
                dx[n, c, row, col] += float(dy[n, c, p, q])
    return dx


def avg_pool2d(
    x: np.ndarray, kernel: IntPair, stride: IntPair, pads: Pads, count_include_pad: bool
) -> np.ndarray:
    """Sum of each window's in-image pixels over ``KH*KW`` (or over their count)."""
    y = np.zeros(_pool_out_shape(x.shape, kernel, stride, pads))
    xs = x.tolist()
    for n in range(x.shape[0]):
        for c in range(x.shape[1]):
            for p, q, pixels in _pool_windows(x.shape, kernel, stride, pads):
                total = math.fsum(xs[n][c][r][s] for r, s in pixels)
                divisor = kernel[0] * kernel[1] if count_include_pad else len(pixels)
                y[n, c, p, q] = total / divisor
    return y


def avg_pool2d_backward(
    dy: np.ndarray,
    x_shape: tuple[int, ...],
    kernel: IntPair,
    stride: IntPair,
    pads: Pads,
    count_include_pad: bool,
) -> np.ndarray:
    """Each window spreads ``dy / divisor`` over its in-image pixels."""
    dx = np.zeros(x_shape)
    for n in range(x_shape[0]):
        for c in range(x_shape[1]):
            for p, q, pixels in _pool_windows(x_shape, kernel, stride, pads):
                divisor = kernel[0] * kernel[1] if count_include_pad else len(pixels)
                for r, s in pixels:
                    dx[n, c, r, s] += float(dy[n, c, p, q]) / divisor
    return dx


def _lse(values: list[float]) -> float:
    if any(math.isnan(v) for v in values):
        return math.nan
    if not values or all(v == -math.inf for v in values):
        return -math.inf
    if any(v == math.inf for v in values):
        return math.inf
    m = max(values)
    return m + math.log(math.fsum(math.exp(v - m) for v in values))


def _rows(x: np.ndarray, axis: int) -> tuple[np.ndarray, list[list[float]]]:
    """``x`` (float64) moved so that ``axis`` is last, and its 1-D rows as lists."""
    moved = np.moveaxis(np.asarray(x, dtype=np.float64), axis, -1)
    return moved, moved.reshape(-1, moved.shape[-1]).tolist() if moved.size else []


def log_softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """``v - logsumexp(row)`` per row; rows whose logsumexp is not finite give NaN."""
    moved, rows = _rows(x, axis)
    out = []
    for row in rows:
        lse = _lse(row)
        out.append([v - lse if math.isfinite(lse) else math.nan for v in row])
    return np.moveaxis(np.asarray(out, dtype=np.float64).reshape(moved.shape), -1, axis)


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """``exp(v - logsumexp(row))`` per row; rows whose logsumexp is not finite give NaN."""
    return np.asarray(np.exp(log_softmax(x, axis)))


def logsumexp(
    x: np.ndarray, axis: int | tuple[int, ...] | None = None, keepdims: bool = False
) -> np.ndarray:
    """``log(sum(exp(x)))`` over ``axis``: -inf for all -inf (or empty), +inf for any +inf."""
    x64 = np.asarray(x, dtype=np.float64)
    axes = tuple(range(x64.ndim)) if axis is None else (axis,) if isinstance(axis, int) else axis
    axes = tuple(a % x64.ndim for a in axes)
    rest = [a for a in range(x64.ndim) if a not in axes]
    moved = np.transpose(x64, rest + list(axes))
    kept = moved.shape[: len(rest)]
    flat = moved.reshape(math.prod(kept), math.prod(moved.shape[len(rest) :])).tolist()
    out = np.asarray([_lse(row) for row in flat], dtype=np.float64).reshape(kept)
    if keepdims:
        out = out.reshape(tuple(1 if a in axes else s for a, s in enumerate(x64.shape)))
    return out


def one_hot(indices: np.ndarray, num_classes: int) -> np.ndarray:
    """``out[..., k] = 1.0 if indices[...] == k`` (an all-zero row when out of range)."""
    out = np.zeros((*indices.shape, num_classes))
    for pos, k in np.ndenumerate(indices):
        if 0 <= k < num_classes:
            out[(*pos, int(k))] = 1.0
    return out


def gelu(x: np.ndarray, approximate: str = "none") -> tuple[np.ndarray, np.ndarray]:
    """GELU and its derivative, element by element in float64, written from the definitions:
    exactly (``approximate="none"``, the default) ``x Phi(x)`` with ``Phi(x) = 0.5 erfc(-x /
    sqrt 2)`` from ``math.erfc``, or the tanh approximation (``"tanh"``)
    ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x**3)))``: ``(y, dy/dx)``."""
    k, c = math.sqrt(2.0 / math.pi), 0.044715
    y, slope = np.empty(x.shape), np.empty(x.shape)
    for pos, v in np.ndenumerate(x.astype(np.float64)):
        if approximate == "none":
            cdf = 0.5 * math.erfc(-v / math.sqrt(2.0))
            y[pos] = v * cdf
            slope[pos] = cdf + v * math.exp(-0.5 * v * v) / math.sqrt(2.0 * math.pi)
            continue
        t = math.tanh(k * (v + c * v**3))
        y[pos] = 0.5 * v * (1.0 + t)
        slope[pos] = 0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * k * (1.0 + 3.0 * c * v * v)
    return y, slope


def layer_norm(
    x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Layer norm over the trailing ``gamma.ndim`` axes in float64, one row at a time:
    ``(y, mean, inv_std)``."""
    d = gamma.size
    rows = x.astype(np.float64).reshape(-1, d)
    g, b = gamma.astype(np.float64).reshape(d), beta.astype(np.float64).reshape(d)
    y, means, inv_stds = np.empty_like(rows), [], []
    for r, values in enumerate(rows):
        mean = math.fsum(values) / d
        inv_std = 1.0 / math.sqrt(math.fsum((values - mean) ** 2) / d + eps)
        y[r] = (values - mean) * inv_std * g + b
        means.append(mean)
        inv_stds.append(inv_std)
    lead = x.shape[: x.ndim - gamma.ndim]
    return y.reshape(x.shape), np.array(means).reshape(lead), np.array(inv_stds).reshape(lead)


def layer_norm_backward(
    dy: np.ndarray, x: np.ndarray, gamma: np.ndarray, eps: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Its gradients in float64 from the chain rule, row by row: ``(dx, dgamma, dbeta)``."""
    d = gamma.size
    rows = x.astype(np.float64).reshape(-1, d)
    grads = dy.astype(np.float64).reshape(-1, d)
    g = gamma.astype(np.float64).reshape(d)
    dx = np.empty_like(rows)
    dgamma, dbeta = np.zeros(d), np.zeros(d)
    for r, (values, dyr) in enumerate(zip(rows, grads, strict=True)):
        mean = values.mean()
        inv_std = 1.0 / math.sqrt(((values - mean) ** 2).mean() + eps)
        x_hat = (values - mean) * inv_std
        dgamma += dyr * x_hat
        dbeta += dyr
        dxh = dyr * g
        dx[r] = inv_std * (dxh - dxh.mean() - x_hat * (dxh * x_hat).mean())
    return dx.reshape(x.shape), dgamma.reshape(gamma.shape), dbeta.reshape(gamma.shape)


def batch_norm(
    x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Training-mode batch norm in float64, one channel at a time: ``(y, mean, inv_std)``."""
    xc = np.moveaxis(x.astype(np.float64), 1, 0)  # channels first
    y = np.empty_like(xc)
    means, inv_stds = [], []
    for c in range(xc.shape[0]):
        values = xc[c]
        mean = values.mean()
        inv_std = 1.0 / math.sqrt(((values - mean) ** 2).mean() + eps)
        y[c] = (values - mean) * inv_std * float(gamma[c]) + float(beta[c])
        means.append(mean)
        inv_stds.append(inv_std)
    return np.moveaxis(y, 0, 1), np.array(means), np.array(inv_stds)


def batch_norm_backward(
    dy: np.ndarray, x: np.ndarray, gamma: np.ndarray, eps: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(dx, dgamma, dbeta)`` of :func:`batch_norm` in float64, one channel at a time, from
    the textbook formula ``dx = gamma * inv_std * (dy - mean(dy) - x_hat * mean(dy * x_hat))``."""
    xc = np.moveaxis(x.astype(np.float64), 1, 0)
    dyc = np.moveaxis(dy.astype(np.float64), 1, 0)
    dx = np.empty_like(xc)
    dgamma, dbeta = [], []
    for c in range(xc.shape[0]):
        values, grad = xc[c], dyc[c]
        inv_std = 1.0 / math.sqrt(((values - values.mean()) ** 2).mean() + eps)
        x_hat = (values - values.mean()) * inv_std
        dx[c] = float(gamma[c]) * inv_std * (grad - grad.mean() - x_hat * (grad * x_hat).mean())
        dgamma.append((grad * x_hat).sum())
        dbeta.append(grad.sum())
    return np.moveaxis(dx, 0, 1), np.array(dgamma), np.array(dbeta)


def lstm(
    x: np.ndarray,
    w: np.ndarray,
    u: np.ndarray,
    b: np.ndarray,
    h0: np.ndarray | None,
    c0: np.ndarray | None,
    dy: np.ndarray,
    dh_n: np.ndarray,
    dc_n: np.ndarray,
) -> tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]]:
    """One LSTM layer step by step (gates ``i, f, g, o``) and backpropagation through time:
    ``((y, h_n, c_n), (dx, dw, du, db, dh0, dc0))`` for the output gradients ``dy``, ``dh_n``,
    ``dc_n``, all float64."""
    x, w, u, b, dy, dh_n, dc_n = (np.asarray(a, np.float64) for a in (x, w, u, b, dy, dh_n, dc_n))
    n, steps, _ = x.shape
    hidden = u.shape[0]
    h = np.zeros((n, hidden)) if h0 is None else np.asarray(h0, np.float64)
    c = np.zeros((n, hidden)) if c0 is None else np.asarray(c0, np.float64)

    def sigmoid(v: np.ndarray) -> np.ndarray:
        out: np.ndarray = 1.0 / (1.0 + np.exp(-v))
        return out

    tape, ys = [], []
    for t in range(steps):
        z = x[:, t] @ w + h @ u + b
        i, f, o = (sigmoid(z[:, k * hidden : (k + 1) * hidden]) for k in (0, 1, 3))
        g = np.tanh(z[:, 2 * hidden : 3 * hidden])
        c_new = f * c + i * g
        tape.append((h, c, i, f, g, o, np.tanh(c_new)))
        h, c = o * np.tanh(c_new), c_new
        ys.append(h)
    dx, dw, du, db = np.zeros_like(x), np.zeros_like(w), np.zeros_like(u), np.zeros_like(b)
    dh, dc = dh_n.copy(), dc_n.copy()
    for t in reversed(range(steps)):
        h_prev, c_prev, i, f, g, o, tc = tape[t]
        dh = dh + dy[:, t]
        dc = dc + dh * o * (1.0 - tc * tc)
        dz = np.concatenate(
            [
                dc * g * i * (1 - i),
                dc * c_prev * f * (1 - f),
                dc * i * (1 - g * g),
                dh * tc * o * (1 - o),
            ],
            axis=1,
        )
        dx[:, t] = dz @ w.T
        dw += x[:, t].T @ dz
        du += h_prev.T @ dz
        db += dz.sum(axis=0)
        dh, dc = dz @ u.T, dc * f
    return (np.stack(ys, axis=1), h, c), (dx, dw, du, db, dh, dc)


def gru_sequence(
    xw: np.ndarray, u: np.ndarray, b: np.ndarray, h0: np.ndarray | None, dy: np.ndarray
) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
    """The GRU recurrence (PyTorch's: gates ``r, z, n``, the reset gate applied to
    ``h @ u_n + b_n``) step by step and backpropagation through time: ``(y, (dxw, du, db,
    dh0))`` for the output gradient ``dy``, all float64."""
    xw, u, b, dy = (np.asarray(a, np.float64) for a in (xw, u, b, dy))
    n, steps, _ = xw.shape
    hidden = u.shape[0]
    h = np.zeros((n, hidden)) if h0 is None else np.asarray(h0, np.float64)
    blk = [slice(k * hidden, (k + 1) * hidden) for k in range(3)]
    tape, ys = [], []
    for t in range(steps):
        hid = h @ u + b
        r = 1.0 / (1.0 + np.exp(-(xw[:, t, blk[0]] + hid[:, blk[0]])))
        z = 1.0 / (1.0 + np.exp(-(xw[:, t, blk[1]] + hid[:, blk[1]])))
        cand = np.tanh(xw[:, t, blk[2]] + r * hid[:, blk[2]])
        tape.append((h, r, z, cand, hid[:, blk[2]]))
        h = (1.0 - z) * cand + z * h
        ys.append(h)
    dxw, du, db = np.zeros_like(xw), np.zeros_like(u), np.zeros_like(b)
    dh = np.zeros((n, hidden))
    for t in reversed(range(steps)):
        h_prev, r, z, cand, hn = tape[t]
        dh = dh + dy[:, t]
        dpre_n = dh * (1.0 - z) * (1.0 - cand * cand)
        dpre_z = dh * (h_prev - cand) * z * (1.0 - z)
        dpre_r = dpre_n * hn * r * (1.0 - r)
        dxw[:, t] = np.concatenate([dpre_r, dpre_z, dpre_n], axis=1)
        dhid = np.concatenate([dpre_r, dpre_z, dpre_n * r], axis=1)
        du += h_prev.T @ dhid
        db += dhid.sum(axis=0)
        dh = dhid @ u.T + dh * z
    return np.stack(ys, axis=1), (dxw, du, db, dh)


def scaled_dot_product_attention(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    dy: np.ndarray,
    mask: np.ndarray | None = None,
    scale: float | None = None,
    causal: bool = False,
    dropout_mask: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Attention in float64, one query row at a time: ``(out, dq, dk, dv)`` with the gradients
    of ``sum(out * dy)`` from the chain rule through the softmax. ``mask`` boolean (keep where
    true) or added to the scores, broadcast to ``(..., Tq, Tk)``; ``causal`` hides keys after the
    query (a row left without keys gives 0); ``dropout_mask`` multiplies the probabilities."""
    lead, (tq, d), tk, dv_ = q.shape[:-2], q.shape[-2:], k.shape[-2], v.shape[-1]
    factor = 1.0 / math.sqrt(d) if scale is None else float(scale)
    qs, ks, vs, dys = (a.astype(np.float64).reshape(-1, *a.shape[-2:]) for a in (q, k, v, dy))
    scores = (*lead, tq, tk)
    full = None if mask is None else np.broadcast_to(mask, scores).reshape(-1, tq, tk)
    drop = None if dropout_mask is None else dropout_mask.astype(np.float64).reshape(-1, tq, tk)
    out = np.zeros((qs.shape[0], tq, dv_))
    dq, dk, dv = np.zeros_like(qs), np.zeros_like(ks), np.zeros_like(vs)
    for b in range(qs.shape[0]):
        for i in range(tq):
            s = np.array([math.fsum(qs[b, i] * ks[b, j]) * factor for j in range(tk)])
            if full is not None:
                if full.dtype == np.bool_:
                    s = np.where(full[b, i], s, -math.inf)
                else:
                    s = s + full[b, i].astype(np.float64)
            if causal:
                s[i + 1 :] = -math.inf
            top = s.max() if tk else 0.0
            e = np.exp(s - top) if math.isfinite(top) else np.full(tk, math.nan)
            # a row left without keys attends to nothing (PyTorch's _safe_softmax)
            p = np.zeros(tk) if top == -math.inf else e / math.fsum(e)
            m = np.ones(tk) if drop is None else drop[b, i]
            out[b, i] = (p * m) @ vs[b]
            dv[b] += np.outer(p * m, dys[b, i])
            dp = (vs[b] @ dys[b, i]) * m
            ds = p * (dp - math.fsum(dp * p)) * factor
            dq[b, i] = ds @ ks[b]
            dk[b] += np.outer(ds, qs[b, i])
    return (
        out.reshape(*lead, tq, dv_),
        dq.reshape(q.shape),
        dk.reshape(k.shape),
        dv.reshape(v.shape),
    )
