"""The LSTM layer as one kernel pair, ``xp.nn.lstm`` / ``xp.nn.lstm_backward``: reference.

Batch-first, one layer, one direction, PyTorch's and cuDNN's conventions. Gates are the blocks
``i, f, g, o`` of the ``4H`` columns of ``w (C, 4H)``, ``u (H, 4H)`` and ``b (4H,)``::

    z = x_t @ w + h_{t-1} @ u + b
    i, f, o = sigmoid(z_i), sigmoid(z_f), sigmoid(z_o)     g = tanh(z_g)
    c_t = f * c_{t-1} + i * g                              h_t = o * tanh(c_t)

``lstm(x (N, T, C), w, u, b, h0=None, c0=None)`` returns ``(y (N, T, H), h_n, c_n, saved)``:
every step's ``h``, the last ``h`` and ``c``, and what the backward pass needs, an opaque object
that only the same backend's ``lstm_backward`` reads (a backend keeps what its kernels need
there: this reference keeps the activated gates and every step's cell state, oneDNN its
workspace). ``lstm_backward(dy, dh_n, dc_n, x, w, u, b, h0, c0, y, saved)`` returns ``(dx, dw,
du, db, dh0, dc0)``; ``dy``, ``dh_n``, ``dc_n`` may be ``None`` (zero), and ``dh0``/``dc0`` are
``None`` when ``h0``/``c0`` were.

The reference runs the input projection of every step as one product, then per step one product
with ``u`` and whole-block element-wise updates; the weight gradients are one product each over
all steps. Only standard functions (``matmul``, ``tanh``, slicing, ``__setitem__``), so every
backend has it.
"""

from __future__ import annotations

from typing import Any

Array = Any

#: sigmoid(z) = 0.5 * tanh(0.5 z) + 0.5 on the i, f, o blocks; tanh(z) on g
_SCALE, _SHIFT = (0.5, 0.5, 1.0, 0.5), (0.5, 0.5, 0.0, 0.5)
#: the gates' derivatives as a * (ones - a): s * (1 - s) on the sigmoids, -g^2 (plus 1) on g
_ONES = (1.0, 1.0, 0.0, 1.0)


def _shape(a: Any) -> str:
    return "(" + ", ".join(str(d) for d in a.shape) + ")"


def check_floats(op: str, isdtype: Any, arrays: dict[str, Array | None]) -> None:
    """The given arrays (None: absent) are real floating, all of one dtype; a TypeError naming
    ``op`` and the array otherwise."""
    for name, a in arrays.items():
        if a is not None and not isdtype(a.dtype, "real floating"):
            raise TypeError(f"{op}: {name} must be a real floating array, got {a.dtype}")
    dtypes = {a.dtype for a in arrays.values() if a is not None}
    if len(dtypes) > 1:
        raise TypeError(f"{op}: all arrays need one dtype, got {sorted(map(str, dtypes))}")


def check_lstm(
    isdtype: Any, x: Array, w: Array, u: Array, b: Array, h0: Array | None, c0: Array | None
) -> tuple[int, int, int, int]:
    """``(N, T, C, H)`` of valid ``lstm`` arguments; a ValueError or TypeError naming
    ``nn.lstm`` and the shapes otherwise."""
    op = "nn.lstm"
    check_floats(op, isdtype, {"x": x, "w": w, "u": u, "b": b, "h0": h0, "c0": c0})
    if x.ndim != 3 or w.ndim != 2 or u.ndim != 2 or b.ndim != 1:
        raise ValueError(
            f"{op}: needs x (N, T, C), w (C, 4H), u (H, 4H), b (4H,), got x {_shape(x)}, "
            f"w {_shape(w)}, u {_shape(u)}, b {_shape(b)}"
        )
    n, t, c = (int(d) for d in x.shape)
    h = int(u.shape[0])
    if tuple(w.shape) != (c, 4 * h) or tuple(u.shape) != (h, 4 * h) or tuple(b.shape) != (4 * h,):
        raise ValueError(
            f"{op}: with x {_shape(x)} and u {_shape(u)} (H = {h}), w must be ({c}, {4 * h}), "
            f"u ({h}, {4 * h}) and b ({4 * h},), got w {_shape(w)}, u {_shape(u)}, b {_shape(b)}"
        )
    if t < 1:
        raise ValueError(f"{op}: the time axis of x {_shape(x)} is empty")
    for name, s in (("h0", h0), ("c0", c0)):
        if s is not None and tuple(s.shape) != (n, h):
            raise ValueError(f"{op}: {name} must be ({n}, {h}), got {_shape(s)}")
    return n, t, c, h


def _per_gate(xp: Any, values: tuple[float, ...], hidden: int, dtype: Any) -> Array:
    return xp.concat([xp.full((hidden,), v, dtype=dtype) for v in values])


def projection(xp: Any, x: Array, w: Array, u: Array, b: Array) -> tuple[Array, Array, Array]:
    """``(xs, us, scale)``: every step's input projection ``x @ w + b`` as one product, ``(N, T,
    4H)``, and ``u``, both with the per-gate scale before tanh (0.5 on the sigmoid gates: exact)
    folded in, and that scale ``(4H,)``."""
    n, t_len, c_in = (int(d) for d in x.shape)
    hidden = int(u.shape[0])
    scale = _per_gate(xp, _SCALE, hidden, x.dtype)
    xs = xp.reshape(xp.matmul(xp.reshape(x, (n * t_len, c_in)), w * scale), (n, t_len, 4 * hidden))
    return xs + b * scale, u * scale, scale


def weight_grads(
    xp: Any, dz: Array, x: Array, w: Array, h0: Array | None, y: Array
) -> tuple[Array, Array, Array, Array]:
    """``(dx, dw, du, db)`` from every step's pre-activation gradient ``dz (N, T, 4H)``: a few
    products over all steps at once."""
    n, t_len, c_in = (int(d) for d in x.shape)
    hidden = int(y.shape[2])
    dz2 = xp.reshape(dz, (n * t_len, 4 * hidden))
    x2 = xp.reshape(x, (n * t_len, c_in))
    dx = xp.reshape(xp.matmul(dz2, xp.permute_dims(w, (1, 0))), (n, t_len, c_in))
    dw = xp.matmul(xp.permute_dims(x2, (1, 0)), dz2)
    db = xp.sum(dz2, axis=0)
    h_prev = xp.empty((n, t_len, hidden), dtype=x.dtype)
    h_prev[:, 0] = h0 if h0 is not None else 0.0
    if t_len > 1:
        h_prev[:, 1:] = y[:, :-1]
    du = xp.matmul(xp.permute_dims(xp.reshape(h_prev, (n * t_len, hidden)), (1, 0)), dz2)
    return dx, dw, du, db


def transposed_u(xp: Any, u: Array) -> Array:
    """``u.T`` ``(4H, H)`` as a new C-contiguous array (the recurrent gradient's product)."""
    g4, hidden = int(u.shape[1]), int(u.shape[0])
    return xp.reshape(xp.reshape(xp.permute_dims(u, (1, 0)), (-1,)), (g4, hidden))


def lstm(
    xp: Any,
    x: Array,
    w: Array,
    u: Array,
    b: Array,
    h0: Array | None = None,
    c0: Array | None = None,
) -> tuple[Array, Array, Array, Any]:
    """The reference forward pass (see the module's docstring)."""
    n, t_len, _, hidden = check_lstm(xp.isdtype, x, w, u, b, h0, c0)
    dt = x.dtype
    g4 = 4 * hidden
    shift = _per_gate(xp, _SHIFT, hidden, dt)
    xs, us, scale = projection(xp, x, w, u, b)
    y = xp.empty((n, t_len, hidden), dtype=dt)
    cs = xp.empty((n, t_len, hidden), dtype=dt)
    gates = xp.empty((n, t_len, g4), dtype=dt)
    tanh_c = xp.empty((n, t_len, hidden), dtype=dt)
    h, c = h0, c0
    for t in range(t_len):
        if h is None:
            z = xp.tanh(xs[:, t])
        else:
            z = xp.matmul(h, us)
            z += xs[:, t]
            z = xp.tanh(z)
        z *= scale
        z += shift
        gates[:, t] = z
        i, f, g, o = (z[:, k * hidden : (k + 1) * hidden] for k in range(4))
        if c is None:
            c = i * g
        else:
            c = f * c
            c += i * g
        tc = xp.tanh(c)
        h = o * tc
        y[:, t] = h
        cs[:, t] = c
        tanh_c[:, t] = tc
    return y, h, c, (gates, tanh_c, cs)


def lstm_backward(
    xp: Any,
    dy: Array | None,
    dh_n: Array | None,
    dc_n: Array | None,
    x: Array,
    w: Array,
    u: Array,
    b: Array,
    h0: Array | None,
    c0: Array | None,
    y: Array,
    saved: Any,
) -> tuple[Array, Array, Array, Array, Array | None, Array | None]:
    """The reference backward pass: ``(dx, dw, du, db, dh0, dc0)``."""
    n, t_len, _, hidden = check_lstm(xp.isdtype, x, w, u, b, h0, c0)
    gates, tanh_c, cs = saved
    dt = x.dtype
    g4 = 4 * hidden
    blk = [slice(k * hidden, (k + 1) * hidden) for k in range(4)]
    # dz = partner * derivative * (dc or dh): partners i <- g, f <- c_prev, g <- i, o <- tanh(c)
    dz = xp.empty((n, t_len, g4), dtype=dt)
    dz[:, :, blk[0]] = gates[:, :, blk[2]]
    dz[:, :, blk[2]] = gates[:, :, blk[0]]
    dz[:, :, blk[3]] = tanh_c
    if t_len > 1:
        dz[:, 1:, blk[1]] = cs[:, :-1]
    dz[:, 0, blk[1]] = c0 if c0 is not None else 0.0
    deriv = gates * (_per_gate(xp, _ONES, hidden, dt) - gates)
    deriv[:, :, blk[2]] = deriv[:, :, blk[2]] + 1.0
    dz *= deriv
    dcell = gates[:, :, blk[3]] * (1.0 - tanh_c * tanh_c)  # o * (1 - tanh(c)^2)
    u_t = transposed_u(xp, u)
    mult = xp.empty((n, 4, hidden), dtype=dt)
    flat = xp.reshape(mult, (n, g4))
    dh_next, dc_next = dh_n, dc_n
    for t in range(t_len - 1, -1, -1):
        if dh_next is None:
            dh = dy[:, t] if dy is not None else xp.zeros((n, hidden), dtype=dt)
        else:
            dh = dh_next + dy[:, t] if dy is not None else dh_next
        dc = dh * dcell[:, t]
        if dc_next is not None:
            dc += dc_next
        mult[:, 0] = dc
        mult[:, 1] = dc
        mult[:, 2] = dc
        mult[:, 3] = dh
        dzt = dz[:, t] * flat
        dz[:, t] = dzt
        dc_next = dc * gates[:, t, blk[1]]
        dh_next = xp.matmul(dzt, u_t)
    dx, dw, du, db = weight_grads(xp, dz, x, w, h0, y)
    return (
        dx,
        dw,
        du,
        db,
        dh_next if h0 is not None else None,
        dc_next if c0 is not None else None,
    )
