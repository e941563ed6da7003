"""The op table: every differentiable op, float64 central differences plus a NumPy forward check.

One row per (op, shapes) pair, broadcasting and size-1 axes included. On a backend other than
NumPy the same rows run in float32 with looser tolerances (``nnlayers.testing.tolerances``).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import nnlayers.expr as ex
from nnlayers import Parameter
from nnlayers.ops import REGISTRY
from nnlayers.ops.nn.recurrent import lstm_parts
from nnlayers.testing import (
    OpCase,
    away_from_zero,
    check_forward,
    check_gradients,
    distinct,
    integers,
    positive,
    probabilities,
    real,
    unit,
)
from nnlayers.testing import reference as ref

BROADCAST_SHAPES = [
    [(3, 4), (3, 4)],
    [(2, 3, 4), (4,)],
    [(3, 1), (1, 4)],
    [(), (2, 3)],
    [(2, 1, 3), (4, 1)],
]
UNARY_SHAPES = [[(3, 4)], [(2, 1, 3)], [(5,)], [()]]


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3)))


def _gelu(x):
    return np.vectorize(lambda v: 0.5 * v * math.erfc(-v / math.sqrt(2.0)))(x)


def _hinge(z, t):
    rows = np.arange(len(t))
    violations = np.maximum(0.0, 1.0 - z[rows, t][:, None] + z)
    violations[rows, t] = 0.0
    return violations.sum(1).mean() / z.shape[1]


RUNNING_MEAN = np.array([0.3, -0.2, 0.1, 0.5])
RUNNING_VAR = np.array([0.8, 1.5, 0.6, 1.1])


def _batch_norm(c):
    def build(x, gamma, beta):
        mean = Parameter(RUNNING_MEAN[:c], dtype=x.dtype, trainable=False)
        var = Parameter(RUNNING_VAR[:c], dtype=x.dtype, trainable=False)
        return ex.batch_norm(x, gamma, beta, mean, var)

    return build


def _batch_norm_reference(c, train):
    function = ref.batch_norm_train if train else ref.batch_norm_eval
    return lambda x, g, b: function(x, g, b, RUNNING_MEAN[:c], RUNNING_VAR[:c])


def binary(op, fn, reference, samplers=(real, real), shapes=BROADCAST_SHAPES, torch=None):
    return [OpCase(op, fn, s, reference, samplers, torch=torch) for s in shapes]


def unary(op, fn, reference, sampler=real, shapes=UNARY_SHAPES, label="", torch=None):
    return [OpCase(op, fn, s, reference, (sampler,), label=label, torch=torch) for s in shapes]


def _torch_reduce(T, name, x, axis, keepdims):
    """PyTorch's sum/mean/amax/amin with NumPy's axis=None (all axes) and keepdims."""
    fn = {"sum": T.sum, "mean": T.mean, "max": T.amax, "min": T.amin}[name]
    if axis is None:
        out = fn(x.reshape(-1), dim=0)
        return out.reshape([1] * x.ndim) if keepdims else out
    return fn(x, dim=axis, keepdim=keepdims)


def _torch_batch_norm(c, train):
    def run(T, x, g, b):
        mean = T.tensor(RUNNING_MEAN[:c], dtype=x.dtype)
        var = T.tensor(RUNNING_VAR[:c], dtype=x.dtype)
        return T.nn.functional.batch_norm(x, mean, var, g, b, training=train, eps=1e-5)

    return run


def _torch_kl(T, m, lv):
    dist = T.distributions
    q = dist.Normal(m, T.exp(0.5 * lv))
    return dist.kl_divergence(q, dist.Normal(T.zeros_like(m), T.ones_like(m))).sum() / m.shape[0]


def _lstm_steps(lib, xw, u, h=None, c=None):
    """The LSTM recurrence in NumPy (``lib`` is numpy) or PyTorch: ``(2, N, T, H)``."""
    sig = (lambda v: 1.0 / (1.0 + lib.exp(-v))) if lib is np else lib.sigmoid
    hs, cs, width = [], [], u.shape[0]
    for t in range(xw.shape[1]):
        z = xw[:, t] if h is None else xw[:, t] + h @ u
        i, f, g, o = (z[:, k * width : (k + 1) * width] for k in range(4))
        c = sig(i) * lib.tanh(g) if c is None else sig(f) * c + sig(i) * lib.tanh(g)
        h = sig(o) * lib.tanh(c)
        hs.append(h)
        cs.append(c)
    return lib.stack([lib.stack(hs, 1), lib.stack(cs, 1)])


def _lstm_layer(lib, x, w, u, b, h=None, c=None):
    """A whole LSTM layer: every hidden state, then the last cell state, ``(N, T + 1, H)``."""
    both = _lstm_steps(lib, x @ w + b, u, h, c)
    return (
        lib.concatenate([both[0], both[1][:, -1:]], 1)
        if lib is np
        else lib.cat([both[0], both[1][:, -1:]], 1)
    )


def _gru_steps(lib, xw, u, b, h=None):
    """The GRU recurrence (PyTorch's, reset after the recurrent product): ``(N, T, H)``."""
    sig = (lambda v: 1.0 / (1.0 + lib.exp(-v))) if lib is np else lib.sigmoid
    hs, width = [], u.shape[0]
    for t in range(xw.shape[1]):
        hid = b if h is None else h @ u + b
        x_r, x_u, x_n = (xw[:, t, k * width : (k + 1) * width] for k in range(3))
        h_r, h_u, h_n = (hid[..., k * width : (k + 1) * width] for k in range(3))
        r, z = sig(x_r + h_r), sig(x_u + h_u)
        n = lib.tanh(x_n + r * h_n)
        h = (1.0 - z) * n if h is None else (1.0 - z) * n + z * h
        hs.append(h)
    return lib.stack(hs, 1)


def _rnn_steps(lib, xw, u, h=None, activation="tanh"):
    """The plain RNN recurrence: ``(N, T, H)``."""
    act = {
        "tanh": lib.tanh,
        "relu": (lambda v: np.maximum(v, 0)) if lib is np else lib.relu,
        "sigmoid": (lambda v: 1.0 / (1.0 + lib.exp(-v))) if lib is np else lib.sigmoid,
    }[activation]
    hs = []
    for t in range(xw.shape[1]):
        h = act(xw[:, t] if h is None else xw[:, t] + h @ u)
        hs.append(h)
    return lib.stack(hs, 1)


def _rnn_cases():
    n, t, h = 3, 4, 5
    shapes = [(n, t, h), (h, h)]
    rnn = ex.rnn_sequence
    return [
        OpCase("rnn_sequence", rnn, shapes, lambda xw, u: _rnn_steps(np, xw, u),
               torch=lambda T, xw, u: _rnn_steps(T, xw, u)),
        OpCase("rnn_sequence", lambda xw, u, h0: rnn(xw, u, h0, "sigmoid"), [*shapes, (n, h)],
               lambda xw, u, h0: _rnn_steps(np, xw, u, h0, "sigmoid"), label="sigmoid, h0",
               torch=lambda T, xw, u, h0: _rnn_steps(T, xw, u, h0, "sigmoid")),
        # shifted away from 0, where ReLU's kink would spoil the central differences
        OpCase("rnn_sequence", lambda xw, u: rnn(xw + 0.5, u * 0.3, None, "relu"), [(n, 1, h), (h, h)],
               lambda xw, u: _rnn_steps(np, xw + 0.5, u * 0.3, None, "relu"), label="relu, 1 step",
               torch=lambda T, xw, u: _rnn_steps(T, xw + 0.5, u * 0.3, None, "relu")),
    ]  # fmt: skip


def _recurrent_cases():
    n, t, h = 3, 4, 5
    gru = [(n, t, 3 * h), (h, 3 * h), (3 * h,)]
    layer = [(n, t, 2), (2, 4 * h), (h, 4 * h), (4 * h,)]
    return [
        OpCase(
            "lstm_part",
            lambda *a: lstm_parts(*a)[0],
            layer,
            lambda x, w, u, b: _lstm_steps(np, x @ w + b, u)[0],
            label="hidden",
            torch=lambda T, x, w, u, b: _lstm_steps(T, x @ w + b, u)[0],
        ),
        OpCase(
            "lstm_part",
            lambda *a: lstm_parts(*a)[1],
            [*layer, (n, h), (n, h)],
            lambda x, w, u, b, h0, c0: _lstm_steps(np, x @ w + b, u, h0, c0)[1][:, -1],
            label="cell",
            torch=lambda T, x, w, u, b, h0, c0: _lstm_steps(T, x @ w + b, u, h0, c0)[1][:, -1],
        ),
        OpCase(
            "lstm",
            ex.lstm,
            layer,
            lambda *a: _lstm_layer(np, *a),
            torch=lambda T, *a: _lstm_layer(T, *a),
        ),
        OpCase(
            "lstm",
            ex.lstm,
            [*layer, (n, h), (n, h)],
            lambda *a: _lstm_layer(np, *a),
            label="state",
            torch=lambda T, *a: _lstm_layer(T, *a),
        ),
        OpCase(
            "lstm",
            ex.lstm,
            [(2, 1, 3), (3, 8), (2, 8), (8,)],
            lambda *a: _lstm_layer(np, *a),
            label="one step",
            torch=lambda T, *a: _lstm_layer(T, *a),
        ),
        OpCase(
            "gru_sequence",
            ex.gru_sequence,
            gru,
            lambda *a: _gru_steps(np, *a),
            torch=lambda T, *a: _gru_steps(T, *a),
        ),
        OpCase(
            "gru_sequence",
            ex.gru_sequence,
            [*gru, (n, h)],
            lambda *a: _gru_steps(np, *a),
            label="state",
            torch=lambda T, *a: _gru_steps(T, *a),
        ),
    ]


def _attention_reference(q, k, v, mask=None, *, scale=None, causal=False):
    s = q @ np.swapaxes(k, -1, -2) * (1.0 / np.sqrt(q.shape[-1]) if scale is None else scale)
    if mask is not None:
        s = np.where(mask, s, -np.inf) if mask.dtype == bool else s + mask
    if causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return p / p.sum(-1, keepdims=True) @ v


def _attention_cases():
    sdpa = ex.scaled_dot_product_attention
    qkv = [(2, 3, 4, 5), (2, 3, 6, 5), (2, 3, 6, 7)]
    keep = np.random.default_rng(7).uniform(size=(4, 6)) > 0.3
    keep[:, 0] = True  # every row attends somewhere
    bias = np.random.default_rng(8).normal(size=(1, 3, 4, 6))

    def torch_sdpa(mask=None, **kw):
        def run(T, q, k, v):
            m = (
                None
                if mask is None
                else T.as_tensor(mask, dtype=T.bool if mask.dtype == bool else q.dtype)
            )
            return T.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=m, **kw)

        return run

    return [
        OpCase("scaled_dot_product_attention", sdpa, qkv, _attention_reference, torch=torch_sdpa()),
        OpCase(
            "scaled_dot_product_attention",
            lambda q, k, v: sdpa(q, k, v, ex.constant(keep)),
            qkv,
            lambda q, k, v: _attention_reference(q, k, v, keep),
            label="bool mask",
            torch=torch_sdpa(keep),
        ),
        OpCase(
            "scaled_dot_product_attention",
            lambda q, k, v: sdpa(q, k, v, ex.constant(bias, dtype=q.dtype), scale=0.3),
            qkv,
            lambda q, k, v: _attention_reference(q, k, v, bias, scale=0.3),
            label="additive mask, scale",
            torch=torch_sdpa(bias, scale=0.3),
        ),
        OpCase(
            "scaled_dot_product_attention",
            lambda q, k, v: sdpa(q, k, v, causal=True),
            [(3, 5, 4), (3, 5, 4), (3, 5, 2)],
            lambda q, k, v: _attention_reference(q, k, v, causal=True),
            label="causal",
            torch=torch_sdpa(is_causal=True),
        ),
        # the memory-saving form: the fused kernels on OpenCL and CUDA
        OpCase(
            "scaled_dot_product_attention",
            lambda q, k, v: sdpa(q, k, v, ex.constant(keep), recompute=True),
            qkv,
            lambda q, k, v: _attention_reference(q, k, v, keep),
            label="bool mask, recomputed",
            torch=torch_sdpa(keep),
        ),
        OpCase(
            "scaled_dot_product_attention",
            lambda q, k, v: sdpa(q, k, v, ex.constant(bias, dtype=q.dtype), recompute=True),
            qkv,
            lambda q, k, v: _attention_reference(q, k, v, bias),
            label="additive mask, recomputed",
            torch=torch_sdpa(bias),
        ),
        OpCase(
            "scaled_dot_product_attention",
            lambda q, k, v: sdpa(q, k, v, causal=True, recompute=True),
            [(3, 5, 4), (3, 5, 4), (3, 5, 2)],
            lambda q, k, v: _attention_reference(q, k, v, causal=True),
            label="causal, recomputed",
            torch=torch_sdpa(is_causal=True),
        ),
    ]


def _reverse_index(lengths: np.ndarray, steps: int) -> np.ndarray:
    t = np.arange(steps)[None, :]
    n = lengths[:, None]
    return np.where(t < n, n - 1 - t, t)


def _sequence_cases():
    lengths = np.array([3, 5, 1, 0])
    index = _reverse_index(lengths, 5)

    def reference(x):
        return np.take_along_axis(x, index.reshape(4, 5, 1), axis=1)

    def torch_reverse(T, x):
        return T.gather(x, 1, T.as_tensor(index).reshape(4, 5, 1).expand(*x.shape))

    return [
        OpCase(
            "reverse_sequence",
            lambda x: ex.reverse_sequence(x, lengths),
            [(4, 5, 3)],
            reference,
            label="lengths",
            torch=torch_reverse,
        ),
        OpCase(
            "reverse_sequence",
            ex.reverse_sequence,
            [(2, 4, 3, 2)],
            lambda x: x[:, ::-1],
            torch=lambda T, x: T.flip(x, (1,)),
        ),
        # the table longer than the sequence (rows below T get a zero gradient) and as long
        OpCase(
            "add_positions",
            ex.add_positions,
            [(2, 3, 4), (5, 4)],
            lambda x, table: x + table[:3],
            torch=lambda T, x, table: x + table[:3],
        ),
        OpCase(
            "add_positions",
            ex.add_positions,
            [(2, 3, 4), (3, 4)],
            lambda x, table: x + table,
            label="whole table",
            torch=lambda T, x, table: x + table,
        ),
    ]


CASES: list[OpCase] = [
    *_recurrent_cases(),
    *_rnn_cases(),
    *_sequence_cases(),
    *_attention_cases(),
    *binary("add", lambda a, b: a + b, np.add, torch=lambda T, a, b: a + b),
    *binary("subtract", lambda a, b: a - b, np.subtract, torch=lambda T, a, b: a - b),
    *binary("multiply", lambda a, b: a * b, np.multiply, torch=lambda T, a, b: a * b),
    *binary("divide", lambda a, b: a / b, np.divide, (real, positive), torch=lambda T, a, b: a / b),
    *binary("power", lambda a, b: a**b, np.power, (positive, real), torch=lambda T, a, b: a**b),
    # x ** number: products, a reciprocal or a square root for small integer and half exponents
    *[
        OpCase(
            "power_scalar",
            lambda x, p=p: x**p,
            [shape],
            lambda x, p=p: np.power(x, float(p)),
            (sampler,),
            label=f"p={p}",
            torch=lambda T, x, p=p: x**p,
        )
        for p, sampler in [
            (3, real),
            (3.0, real),
            (4, real),
            (5, real),
            (7, real),
            (8, real),
            (-1, away_from_zero),
            (-2, away_from_zero),
            (-3, away_from_zero),
            (-8, positive),
            (0.5, positive),
            (-0.5, positive),
            (0, real),
            (1, real),
            (1.5, positive),
            (9, positive),
            (-2.5, positive),
            (np.float32(3), real),
        ]
        for shape in ([(3, 4), ()] if p in (3, -1, 0.5) else [(2, 3)])
    ],
    OpCase(
        "power_scalar",
        lambda x: ex.power(x, 3.0) * 0.5 + ex.power(x, -0.5),
        [(2, 3)],
        lambda x: 0.5 * x**3 + x**-0.5,
        (positive,),
        label="ex.power",
        torch=lambda T, x: T.pow(x, 3.0) * 0.5 + T.pow(x, -0.5),
    ),
    *binary(
        "maximum",
        ex.maximum,
        np.maximum,
        (distinct, lambda r, s: distinct(r, s) + 0.05),
        torch=lambda T, a, b: T.maximum(a, b),
    ),
    *binary(
        "minimum",
        ex.minimum,
        np.minimum,
        (distinct, lambda r, s: distinct(r, s) + 0.05),
        torch=lambda T, a, b: T.minimum(a, b),
    ),
    OpCase(
        "where",
        lambda a, b: ex.where(ex.constant(np.array([True, False, True])), a, b),
        [(2, 3), (1, 3)],
        lambda a, b: np.where([True, False, True], a, b),
        torch=lambda T, a, b: T.where(T.tensor([True, False, True]), a, b),
    ),
    OpCase(
        "where",
        lambda a, b: ex.where(a > 0.0, a, b),
        [(2, 3), (3,)],
        lambda a, b: np.where(a > 0, a, b),
        (away_from_zero, real),
        label="from-compare",
        torch=lambda T, a, b: T.where(a > 0, a, b),
    ),
    *unary("negative", lambda x: -x, np.negative, torch=lambda T, x: -x),
    *unary("abs", ex.abs, np.abs, away_from_zero, torch=lambda T, x: T.abs(x)),
    *unary("exp", ex.exp, np.exp, torch=lambda T, x: T.exp(x)),
    *unary("log", ex.log, np.log, positive, torch=lambda T, x: T.log(x)),
    *unary("log1p", ex.log1p, np.log1p, positive, torch=lambda T, x: T.log1p(x)),
    *unary("sqrt", ex.sqrt, np.sqrt, positive, torch=lambda T, x: T.sqrt(x)),
    *unary("square", ex.square, np.square, torch=lambda T, x: T.square(x)),
    *unary("square", lambda x: x**2, np.square, label="pow2", torch=lambda T, x: x**2),
    *unary("tanh", ex.tanh, np.tanh, torch=lambda T, x: T.tanh(x)),
    *unary("sigmoid", ex.sigmoid, _sigmoid, torch=lambda T, x: T.sigmoid(x)),
    *unary(
        "log_sigmoid",
        ex.log_sigmoid,
        lambda x: np.log(_sigmoid(x)),
        torch=lambda T, x: T.nn.functional.logsigmoid(x),
    ),
    *unary(
        "relu", ex.relu, lambda x: np.maximum(x, 0), away_from_zero, torch=lambda T, x: T.relu(x)
    ),
    *unary(
        "leaky_relu",
        lambda x: ex.leaky_relu(x, 0.1),
        lambda x: np.where(x > 0, x, 0.1 * x),
        away_from_zero,
        torch=lambda T, x: T.nn.functional.leaky_relu(x, 0.1),
    ),
    *unary(
        "elu",
        ex.elu,
        lambda x: np.where(x > 0, x, np.expm1(x)),
        away_from_zero,
        torch=lambda T, x: T.nn.functional.elu(x),
    ),
    *unary(
        "softplus",
        ex.softplus,
        lambda x: np.log1p(np.exp(x)),
        torch=lambda T, x: T.nn.functional.softplus(x),
    ),
    # ex.gelu is exact by default, as torch.nn.functional.gelu
    *unary("gelu", ex.gelu, _gelu, torch=lambda T, x: T.nn.functional.gelu(x)),
    *unary(
        "gelu",
        lambda x: ex.gelu(x, approximate="tanh"),
        _gelu_tanh,
        label="tanh",
        torch=lambda T, x: T.nn.functional.gelu(x, approximate="tanh"),
    ),
    *unary("sin", ex.sin, np.sin, torch=lambda T, x: T.sin(x)),
    *unary("cos", ex.cos, np.cos, torch=lambda T, x: T.cos(x)),
    OpCase(
        "hinge",
        ex.hinge,
        [(4, 3), (4,)],
        _hinge,
        (real, integers(3)),
        torch=lambda T, z, t: T.nn.functional.multi_margin_loss(z, t),
    ),
    OpCase(
        "l1_penalty",
        lambda a, b: ex.l1_penalty([a, b], 0.1),
        [(2, 3), (4,)],
        lambda a, b: 0.1 * (np.abs(a).sum() + np.abs(b).sum()),
        (away_from_zero, away_from_zero),
        torch=lambda T, a, b: 0.1 * (a.abs().sum() + b.abs().sum()),
    ),
    *unary(
        "clip",
        lambda x: ex.clip(x, -0.5, 0.7),
        lambda x: np.clip(x, -0.5, 0.7),
        distinct,
        torch=lambda T, x: T.clamp(x, -0.5, 0.7),
    ),
    OpCase(
        "astype",
        lambda x: ex.astype(x, "float64") * 2.0,
        [(2, 3)],
        lambda x: 2 * x,
        torch=lambda T, x: x.to(T.float64) * 2.0,
    ),
    *[
        OpCase(
            name,
            lambda x, f=f, kw=kw: f(x, **kw),
            [shape],
            lambda x, r=r, kw=kw: r(x, axis=kw["axis"], keepdims=kw["keepdims"]),
            (distinct,),
            label=f"axis={kw['axis']},keepdims={kw['keepdims']}",
            torch=lambda T, x, name=name, kw=kw: _torch_reduce(
                T, name, x, kw["axis"], kw["keepdims"]
            ),
        )
        for name, f, r in [
            ("sum", ex.sum, np.sum),
            ("mean", ex.mean, np.mean),
            ("max", ex.max, np.max),
            ("min", ex.min, np.min),
        ]
        for shape, kw in [
            ((3, 4), {"axis": None, "keepdims": False}),
            ((3, 4), {"axis": 1, "keepdims": True}),
            ((2, 3, 4), {"axis": (0, 2), "keepdims": False}),
            ((1, 4), {"axis": 0, "keepdims": False}),
            ((5,), {"axis": -1, "keepdims": True}),
        ]
    ],
    *[
        OpCase("matmul", lambda a, b: a @ b, s, np.matmul, torch=lambda T, a, b: T.matmul(a, b))
        for s in [
            [(3, 4), (4, 5)],
            [(2, 3, 4), (4, 5)],
            [(2, 3, 4), (1, 4, 2)],
            [(4,), (4, 3)],
            [(3, 4), (4,)],
            [(2, 1, 3), (3, 1)],
        ]
    ],
    OpCase(
        "norm",
        lambda x: ex.norm(x, axis=1),
        [(3, 4)],
        lambda x: np.linalg.norm(x, axis=1),
        (away_from_zero,),
        torch=lambda T, x: T.linalg.vector_norm(x, dim=1),
    ),
    OpCase(
        "norm",
        ex.norm,
        [(2, 3)],
        np.linalg.norm,
        (away_from_zero,),
        label="all",
        torch=lambda T, x: T.linalg.vector_norm(x),
    ),
    OpCase(
        "reshape",
        lambda x: ex.reshape(x, (4, -1)),
        [(2, 3, 2)],
        lambda x: x.reshape(4, -1),
        torch=lambda T, x: x.reshape(4, -1),
    ),
    OpCase(
        "reshape",
        lambda x: ex.expand_dims(x, 1),
        [(3, 4)],
        lambda x: x[:, None],
        label="expand_dims",
        torch=lambda T, x: x[:, None],
    ),
    OpCase(
        "reshape",
        lambda x: ex.squeeze(x, 1),
        [(3, 1, 4)],
        lambda x: x[:, 0],
        label="squeeze",
        torch=lambda T, x: x[:, 0],
    ),
    OpCase(
        "reshape",
        ex.flatten,
        [(2, 3, 2, 2)],
        lambda x: x.reshape(2, -1),
        label="flatten",
        torch=lambda T, x: x.reshape(2, -1),
    ),
    OpCase("permute_dims", lambda x: x.T, [(3, 4)], lambda x: x.T, torch=lambda T, x: x.T),
    OpCase(
        "permute_dims",
        lambda x: ex.permute_dims(x, (2, 0, 1)),
        [(2, 3, 4)],
        lambda x: x.transpose(2, 0, 1),
        torch=lambda T, x: x.permute(2, 0, 1),
    ),
    OpCase(
        "broadcast_to",
        lambda x: ex.broadcast_to(x, (2, 3, 4)),
        [(3, 1)],
        lambda x: np.broadcast_to(x, (2, 3, 4)),
        torch=lambda T, x: x.expand(2, 3, 4),
    ),
    OpCase(
        "getitem", lambda x: x[:, 2:5], [(3, 6)], lambda x: x[:, 2:5], torch=lambda T, x: x[:, 2:5]
    ),
    OpCase(
        "getitem",
        lambda x: x[1, ::2, None],
        [(3, 5)],
        lambda x: x[1, ::2, None],
        label="int-step-newaxis",
        torch=lambda T, x: x[1, ::2, None],
    ),
    OpCase(
        "getitem",
        lambda x: x[..., -1],
        [(2, 3, 4)],
        lambda x: x[..., -1],
        label="ellipsis",
        torch=lambda T, x: x[..., -1],
    ),
    OpCase(
        "take",
        lambda e, i: ex.take(e, i),
        [(5, 3), (2, 4)],
        lambda e, i: e[i],
        (real, integers(5)),
        label="embedding",
        torch=lambda T, e, i: e[i],
    ),
    OpCase(
        "take",
        lambda x: ex.take(x, np.array([2, 0, 2]), axis=1),
        [(2, 4)],
        lambda x: x[:, [2, 0, 2]],
        label="axis1-repeats",
        torch=lambda T, x: x[:, [2, 0, 2]],
    ),
    OpCase(
        "concat",
        lambda a, b: ex.concat([a, b], axis=1),
        [(2, 3), (2, 1)],
        lambda a, b: np.concatenate([a, b], 1),
        torch=lambda T, a, b: T.cat([a, b], 1),
    ),
    OpCase(
        "concat",
        lambda a, b: ex.stack([a, b], axis=0),
        [(2, 3), (2, 3)],
        lambda a, b: np.stack([a, b]),
        label="stack",
        torch=lambda T, a, b: T.stack([a, b]),
    ),
    OpCase(
        "getitem",
        lambda x: ex.split(x, 3, axis=1)[1] * 2.0 + ex.split(x, [1], axis=1)[0],
        [(2, 3)],
        lambda x: x[:, 1:2] * 2 + x[:, :1],
        label="split",
        torch=lambda T, x: x[:, 1:2] * 2 + x[:, :1],
    ),
    OpCase(
        "pad",
        lambda x: ex.pad(x, ((1, 0), (2, 1))),
        [(2, 3)],
        lambda x: np.pad(x, ((1, 0), (2, 1))),
        torch=lambda T, x: T.nn.functional.pad(x, (2, 1, 1, 0)),
    ),
    OpCase("softmax", ex.softmax, [(3, 4)], ref.softmax, torch=lambda T, x: T.softmax(x, -1)),
    OpCase(
        "softmax",
        lambda x: ex.softmax(x, axis=0),
        [(3, 1, 2)],
        lambda x: ref.softmax(x, 0),
        label="axis0",
        torch=lambda T, x: T.softmax(x, 0),
    ),
    OpCase(
        "log_softmax",
        ex.log_softmax,
        [(3, 4)],
        ref.log_softmax,
        torch=lambda T, x: T.log_softmax(x, -1),
    ),
    OpCase(
        "log_softmax",
        lambda x: ex.log_softmax(x, axis=1),
        [(2, 3, 2)],
        lambda x: ref.log_softmax(x, 1),
        label="axis1",
        torch=lambda T, x: T.log_softmax(x, 1),
    ),
    OpCase(
        "conv2d",
        ex.conv2d,
        [(2, 3, 5, 5), (4, 3, 3, 3)],
        ref.conv2d,
        torch=lambda T, x, w: T.nn.functional.conv2d(x, w),
    ),
    OpCase(
        "conv2d",
        lambda x, w: ex.conv2d(x, w, stride=2, padding="same"),
        [(1, 2, 5, 6), (3, 2, 3, 3)],
        lambda x, w: ref.conv2d(x, w, 2, ((1, 1), (0, 1))),
        label="same-stride2",
        torch=lambda T, x, w: T.nn.functional.conv2d(
            T.nn.functional.pad(x, (0, 1, 1, 1)), w, stride=2
        ),
    ),
    OpCase(
        "conv2d",
        lambda x, w: ex.conv2d(x, w, padding=1, dilation=2),
        [(2, 2, 6, 6), (2, 2, 3, 3)],
        lambda x, w: ref.conv2d(x, w, 1, 1, 2),
        label="dilation2",
        torch=lambda T, x, w: T.nn.functional.conv2d(x, w, padding=1, dilation=2),
    ),
    OpCase(
        "conv2d",
        lambda x, w: ex.conv2d(x, w, padding=((1, 0), (0, 1))),
        [(1, 1, 4, 4), (2, 1, 2, 2)],
        lambda x, w: ref.conv2d(x, w, 1, ((1, 0), (0, 1))),
        label="asymmetric",
        torch=lambda T, x, w: T.nn.functional.conv2d(T.nn.functional.pad(x, (0, 1, 1, 0)), w),
    ),
    OpCase(
        "conv2d_transpose",
        ex.conv2d_transpose,
        [(2, 3, 3, 3), (3, 2, 3, 3)],
        ref.conv2d_transpose,
        torch=lambda T, x, w: T.nn.functional.conv_transpose2d(x, w),
    ),
    OpCase(
        "conv2d_transpose",
        lambda x, w: ex.conv2d_transpose(x, w, stride=2, padding=1, output_padding=1),
        [(1, 2, 3, 3), (2, 3, 3, 3)],
        lambda x, w: ref.conv2d_transpose(x, w, 2, 1, 1, 1),
        label="stride2",
        torch=lambda T, x, w: T.nn.functional.conv_transpose2d(
            x, w, stride=2, padding=1, output_padding=1
        ),
    ),
    OpCase(
        "conv2d_transpose",
        lambda x, w: ex.conv2d_transpose(x, w, stride=1, padding=1, dilation=3, output_padding=2),
        [(1, 2, 3, 3), (2, 2, 2, 2)],
        lambda x, w: ref.conv2d_transpose(x, w, 1, 1, 3, 2),
        label="output_padding>=stride",
        torch=lambda T, x, w: T.nn.functional.conv_transpose2d(
            x, w, stride=1, padding=1, output_padding=2, dilation=3
        ),
    ),
    OpCase(
        "max_pool2d",
        lambda x: ex.max_pool2d(x, 2),
        [(2, 2, 4, 4)],
        lambda x: ref.max_pool2d(x, 2),
        (distinct,),
        torch=lambda T, x: T.nn.functional.max_pool2d(x, 2),
    ),
    OpCase(
        "max_pool2d",
        lambda x: ex.max_pool2d(x, 3, 2, 1),
        [(1, 2, 5, 5)],
        lambda x: ref.max_pool2d(x, 3, 2, 1),
        (distinct,),
        label="overlap-pad",
        torch=lambda T, x: T.nn.functional.max_pool2d(x, 3, 2, 1),
    ),
    OpCase(
        "avg_pool2d",
        lambda x: ex.avg_pool2d(x, 2),
        [(2, 2, 4, 4)],
        lambda x: ref.avg_pool2d(x, 2),
        torch=lambda T, x: T.nn.functional.avg_pool2d(x, 2),
    ),
    OpCase(
        "avg_pool2d",
        lambda x: ex.avg_pool2d(x, 3, 2, 1, count_include_pad=False),
        [(1, 2, 5, 5)],
        lambda x: ref.avg_pool2d(x, 3, 2, 1, False),
        label="exclude-pad",
        torch=lambda T, x: T.nn.functional.avg_pool2d(x, 3, 2, 1, count_include_pad=False),
    ),
    OpCase("dropout", lambda x: ex.dropout(x, 0.5), [(4, 5)], None, reseed=True),
    OpCase(
        "dropout",
        lambda x: ex.dropout(x, 0.5),
        [(4, 5)],
        lambda x: x,
        training=False,
        label="eval",
        torch=lambda T, x: T.nn.functional.dropout(x, 0.5, training=False),
    ),
    OpCase(
        "dropout",
        lambda x: ex.dropout(x, 0.3, spatial=True),
        [(2, 3, 2, 2)],
        None,
        reseed=True,
        label="spatial",
    ),
    *[
        OpCase(
            "batch_norm",
            _batch_norm(c),
            [x_shape, (c,), (c,)],
            _batch_norm_reference(c, train),
            (real, positive, real),
            training=train,
            label=("train" if train else "eval"),
            torch=_torch_batch_norm(c, train),
        )
        for x_shape, c in [((5, 3), 3), ((2, 3, 2, 2), 3)]
        for train in (True, False)
    ],
    OpCase(
        "layer_norm",
        lambda x, g, b: ex.layer_norm(x, g, b),
        [(3, 4), (4,), (4,)],
        lambda x, g, b: (
            (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * g + b
        ),
        torch=lambda T, x, g, b: T.nn.functional.layer_norm(x, (4,), g, b, eps=1e-5),
    ),
    OpCase(
        "layer_norm",
        lambda x, g, b: ex.layer_norm(x, g, b, axis=(1, 2), eps=1e-3),
        [(2, 3, 4), (3, 4), (4,)],
        lambda x, g, b: (
            (x - x.mean((1, 2), keepdims=True)) / np.sqrt(x.var((1, 2), keepdims=True) + 1e-3) * g
            + b
        ),
        label="two axes, beta broadcast",
        torch=lambda T, x, g, b: T.nn.functional.layer_norm(x, (3, 4), g, b.expand(3, 4), eps=1e-3),
    ),
    OpCase(
        "layer_norm",
        lambda x, g, b: ex.layer_norm(x, g, b, axis=(-2, -1), eps=1e-3),
        [(2, 3, 4), (1, 3, 4), (3, 4)],
        lambda x, g, b: (
            (x - x.mean((1, 2), keepdims=True)) / np.sqrt(x.var((1, 2), keepdims=True) + 1e-3) * g
            + b
        ),
        label="two trailing axes, the backend's op",
        torch=lambda T, x, g, b: T.nn.functional.layer_norm(x, (3, 4), g[0], b, eps=1e-3),
    ),
    OpCase(
        "layer_norm",
        lambda x: ex.layer_norm(x),
        [(2, 3, 5)],
        lambda x: (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5),
        label="no gamma, beta",
        torch=lambda T, x: T.nn.functional.layer_norm(x, (5,), eps=1e-5),
    ),
    OpCase(
        "softmax_cross_entropy",
        ex.softmax_cross_entropy,
        [(4, 3), (4,)],
        lambda z, t: -ref.log_softmax(z)[np.arange(4), t].mean(),
        (real, integers(3)),
        label="labels",
        torch=lambda T, z, t: T.nn.functional.cross_entropy(z, t),
    ),
    OpCase(
        "softmax_cross_entropy",
        ex.softmax_cross_entropy,
        [(4, 3), (4, 3)],
        lambda z, t: -(t * ref.log_softmax(z)).sum() / 4,
        (real, probabilities),
        label="probabilities",
        torch=lambda T, z, t: T.nn.functional.cross_entropy(z, t),
    ),
    OpCase(
        "sigmoid_cross_entropy",
        ex.sigmoid_cross_entropy,
        [(4, 3), (4, 3)],
        lambda z, t: (np.logaddexp(0, z) - z * t).sum() / 4,
        (real, unit),
        torch=lambda T, z, t: (
            T.nn.functional.binary_cross_entropy_with_logits(z, t, reduction="sum") / 4
        ),
    ),
    OpCase(
        "squared_error",
        ex.squared_error,
        [(4, 3), (4, 3)],
        lambda p, t: ((p - t) ** 2).sum() / 4,
        torch=lambda T, p, t: T.nn.functional.mse_loss(p, t, reduction="sum") / 4,
    ),
    OpCase(
        "kl_standard_normal",
        ex.kl_standard_normal,
        [(4, 2), (4, 2)],
        lambda m, lv: (-0.5 * (1 + lv - m**2 - np.exp(lv))).sum() / 4,
        torch=_torch_kl,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_gradient(case: OpCase, tol) -> None:
    """Backward agrees with central differences on every floating input."""
    inputs = case.inputs()
    check_gradients(case.build, inputs, tol, training=case.training, reseed=case.reseed)


@pytest.mark.parametrize("case", [c for c in CASES if c.reference is not None], ids=lambda c: c.id)
def test_forward(case: OpCase, tol) -> None:
    """Forward agrees with the NumPy reference."""
    inputs = case.inputs()
    check_forward(case.build, inputs, case.reference, tol, training=case.training)


def test_every_differentiable_op_is_in_the_table() -> None:
    """A new op cannot land without rows here."""
    covered = {c.op for c in CASES}
    missing = sorted(n for n, op in REGISTRY.items() if op.differentiable and n not in covered)
    assert not missing, f"ops without op-table rows: {missing}"


def test_every_differentiable_op_has_a_pytorch_oracle_row() -> None:
    """A new op cannot land without a row that PyTorch checks (tests/oracle, nox -s oracle)."""
    covered = {c.op for c in CASES if c.torch is not None}
    missing = sorted(n for n, op in REGISTRY.items() if op.differentiable and n not in covered)
    assert not missing, f"ops without a PyTorch oracle row (OpCase(..., torch=...)): {missing}"
