"""The GRU recurrence as one kernel pair, ``xp.nn.gru_sequence`` / ``gru_sequence_backward``:
reference.

Batch-first, one layer, one direction, PyTorch's conventions (the reset gate multiplies the
recurrent candidate after its product, "linear before reset"). The input projection is the
caller's (one product for every step, ``xw = x @ w_ih + b_ih``, gate blocks ``r, z, n`` of the
``3H`` columns); the recurrence takes ``u (H, 3H)`` and the recurrent bias ``b (3H,)``::

    hid = h_{t-1} @ u + b
    r, z = sigmoid(xw_r + hid_r), sigmoid(xw_z + hid_z)     n = tanh(xw_n + r * hid_n)
    h_t = n + z * (h_{t-1} - n)                              (h_{-1} = h0, or zero)

``gru_sequence(xw (N, T, 3H), u, b, h0=None)`` returns ``(y (N, T, H), saved)``: every step's
``h`` and what the backward pass needs, an opaque object that only the same backend's
``gru_sequence_backward`` reads (this reference keeps the gates ``r, z``, the candidate ``n``
and ``hid_n``). ``gru_sequence_backward(dy, u, h0, y, saved)`` returns ``(dxw, du, db, dh0)``,
``dh0`` None when ``h0`` was. Sigmoid is ``0.5 * tanh(0.5 x) + 0.5``, as in the LSTM's
reference. Only standard functions (``matmul``, ``tanh``, slicing, ``__setitem__``), so every
backend has it.
"""

from __future__ import annotations

from typing import Any

from ._nn_rnn import Array, _shape, check_floats, transposed_u


def check_gru(
    op: str, isdtype: Any, xw: Array, u: Array, b: Array | None, h0: Array | None
) -> tuple[int, int, int]:
    """``(N, T, H)`` of valid ``gru_sequence`` arguments; a ValueError or TypeError naming
    ``op`` and the shapes otherwise."""
    check_floats(op, isdtype, {"xw": xw, "u": u, "b": b, "h0": h0})
    if xw.ndim != 3 or u.ndim != 2 or (b is not None and b.ndim != 1):
        got = f"xw {_shape(xw)}, u {_shape(u)}" + ("" if b is None else f", b {_shape(b)}")
        raise ValueError(f"{op}: needs xw (N, T, 3H), u (H, 3H), b (3H,), got {got}")
    n, t, g3 = (int(d) for d in xw.shape)
    h = int(u.shape[0])
    if tuple(u.shape) != (h, 3 * h) or g3 != 3 * h or (b is not None and b.shape != (3 * h,)):
        got = f"xw {_shape(xw)}, u {_shape(u)}" + ("" if b is None else f", b {_shape(b)}")
        raise ValueError(
            f"{op}: with u {_shape(u)} (H = {h}), xw must be (N, T, {3 * h}), u ({h}, {3 * h}) "
            f"and b ({3 * h},), got {got}"
        )
    if t < 1:
        raise ValueError(f"{op}: the time axis of xw {_shape(xw)} is empty")
    if h0 is not None and tuple(h0.shape) != (n, h):
        raise ValueError(f"{op}: h0 must be ({n}, {h}), got {_shape(h0)}")
    return n, t, h


def check_gru_backward(
    isdtype: Any, dy: Array, u: Array, h0: Array | None, y: Array, saved: Any
) -> tuple[int, int, int]:
    """``(N, T, H)`` of valid ``gru_sequence_backward`` arguments."""
    op = "nn.gru_sequence_backward"
    if y.ndim != 3 or u.ndim != 2:
        raise ValueError(f"{op}: needs y (N, T, H) and u (H, 3H), got {_shape(y)}, {_shape(u)}")
    n, t, h = (int(d) for d in y.shape)
    arrays = {"u": (u, (h, 3 * h)), "dy": (dy, (n, t, h)), "saved": (saved[0], (n, t, 2 * h))}
    if h0 is not None:
        arrays["h0"] = (h0, (n, h))
    for name, (a, shape) in arrays.items():
        if tuple(a.shape) != shape:
            raise ValueError(f"{op}: with y {_shape(y)}, {name} must be {shape}, got {_shape(a)}")
        if not isdtype(a.dtype, "real floating") or a.dtype != y.dtype:
            raise TypeError(f"{op}: {name} has dtype {a.dtype}, y {y.dtype}: they need one")
    return n, t, h


def gru_sequence(
    xp: Any, xw: Array, u: Array, b: Array, h0: Array | None = None
) -> tuple[Array, Any]:
    """The reference forward pass (see the module's docstring)."""
    n, t_len, hidden = check_gru("nn.gru_sequence", xp.isdtype, xw, u, b, h0)
    dt = xw.dtype
    y = xp.empty((n, t_len, hidden), dtype=dt)
    ru_all = xp.empty((n, t_len, 2 * hidden), dtype=dt)
    cand = xp.empty((n, t_len, hidden), dtype=dt)
    rec_n = xp.empty((n, t_len, hidden), dtype=dt)
    h = h0
    r_blk, n_blk = slice(0, 2 * hidden), slice(2 * hidden, 3 * hidden)
    for t in range(t_len):
        hid = b if h is None else xp.matmul(h, u) + b
        ru = xp.tanh((xw[:, t, r_blk] + hid[..., r_blk]) * 0.5)
        ru *= 0.5
        ru += 0.5
        r, z = ru[..., :hidden], ru[..., hidden:]
        hn = hid[..., n_blk]
        cand_t = xp.tanh(xw[:, t, n_blk] + r * hn)
        h = cand_t - z * cand_t if h is None else cand_t + z * (h - cand_t)
        y[:, t] = h
        ru_all[:, t] = ru
        cand[:, t] = cand_t
        rec_n[:, t] = hn
    return y, (ru_all, cand, rec_n)


def previous_states(xp: Any, y: Array, h0: Array | None) -> Array:
    """``h_{t-1}`` of every step ``(N, T, H)``: ``h0`` (or zero), then ``y[:, :-1]``."""
    h_prev = xp.empty(tuple(int(d) for d in y.shape), dtype=y.dtype)
    h_prev[:, 0] = h0 if h0 is not None else 0.0
    if int(y.shape[1]) > 1:
        h_prev[:, 1:] = y[:, :-1]
    return h_prev


def gru_sequence_backward(
    xp: Any, dy: Array, u: Array, h0: Array | None, y: Array, saved: Any
) -> tuple[Array, Array, Array, Array | None]:
    """The reference backward pass: ``(dxw, du, db, dh0)``.

    ``dxw`` first holds each step's local factors (the derivative of each gate's activation
    times what multiplies it), which the loop over the steps then scales in place by the
    incoming gradient: no factor arrays beside it. Of the recurrent product's gradient ``dhid``
    only the ``n`` block is kept (``dn * r``): its ``r, z`` blocks are ``dxw``'s.
    """
    n, t_len, hidden = check_gru_backward(xp.isdtype, dy, u, h0, y, saved)
    ru_all, cand, rec_n = saved
    dt = y.dtype
    rb, zb, nb = slice(0, hidden), slice(hidden, 2 * hidden), slice(2 * hidden, 3 * hidden)
    r_all, z_all = ru_all[:, :, rb], ru_all[:, :, zb]
    dxw = xp.empty((n, t_len, 3 * hidden), dtype=dt)  # [dr, dz, dn] pre-activations
    dxw[:, :, rb] = rec_n * (r_all * (1.0 - r_all))  # d(pre n) -> pre-activation of r
    dz_act = z_all * (1.0 - z_all)  # dh -> pre-activation of z: (h_{t-1} - n) z (1 - z)
    first = -cand[:, 0] if h0 is None else h0 - cand[:, 0]
    dxw[:, 0, zb] = first * dz_act[:, 0]
    if t_len > 1:
        dxw[:, 1:, zb] = (y[:, :-1] - cand[:, 1:]) * dz_act[:, 1:]
    del dz_act, first
    dxw[:, :, nb] = (1.0 - z_all) * (1.0 - cand * cand)  # dh -> pre-activation of n
    dhid_n = xp.empty((n, t_len, hidden), dtype=dt)
    u_t = transposed_u(xp, u)
    u_rz, u_n = u_t[: 2 * hidden], u_t[2 * hidden :]
    dh_next = None
    for t in range(t_len - 1, -1, -1):
        dh = dy[:, t] if dh_next is None else dy[:, t] + dh_next
        dn = dh * dxw[:, t, nb]
        dxw[:, t, nb] = dn
        dxw[:, t, rb] = dn * dxw[:, t, rb]
        dxw[:, t, zb] = dh * dxw[:, t, zb]
        dhid_n[:, t] = dn * r_all[:, t]
        dh_next = (
            xp.matmul(dxw[:, t, : 2 * hidden], u_rz)
            + xp.matmul(dhid_n[:, t], u_n)
            + dh * z_all[:, t]
        )
    dxw_rz = xp.reshape(dxw, (n * t_len, 3 * hidden))[:, : 2 * hidden]  # dhid's r, z blocks
    du, db = weight_grads(xp, previous_states(xp, y, h0), dxw_rz, dhid_n)
    return dxw, du, db, dh_next if h0 is not None else None


def weight_grads(xp: Any, h_prev: Array, *blocks: Array) -> tuple[Array, Array]:
    """``du = sum_t h_{t-1}^T dhid_t`` (one product over all steps) and ``db = sum dhid``, with
    ``dhid`` given whole ``(N, T, 3H)`` or as column blocks, each ``(N, T, k)`` or already
    ``(N*T, k)`` (a product and a sum per block, joined: no concatenated ``dhid``)."""
    n, t_len, hidden = (int(d) for d in h_prev.shape)
    rows = n * t_len
    hp_t = xp.permute_dims(xp.reshape(h_prev, (rows, hidden)), (1, 0))
    flat = [b if b.ndim == 2 else xp.reshape(b, (rows, int(b.shape[2]))) for b in blocks]
    if len(flat) == 1:
        return xp.matmul(hp_t, flat[0]), xp.sum(flat[0], axis=0)
    du = xp.concat([xp.matmul(hp_t, b) for b in flat], axis=1)
    return du, xp.concat([xp.sum(b, axis=0) for b in flat])
