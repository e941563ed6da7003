"""The ONNX converters: one function per op (or family of ops), registered by op name.

A converter receives the :class:`~nnlayers.export.onnx.Builder`, the expression node (its op,
with the attributes shape inference stored on it, and its inputs' specs) and the names of the
tensors holding its inputs; it emits ONNX nodes and returns the name of the tensor holding the
node's value. Each one writes what the op's eval-phase forward computes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..expr.node import Expr

if TYPE_CHECKING:
    from .onnx import Builder

Converter = Callable[["Builder", Expr, list[str]], str]
"""``(builder, node, input names) -> output name``: emits the ONNX nodes of one expression."""

#: Op name -> converter: every op the ONNX export handles.
CONVERTERS: dict[str, Converter] = {}

#: Ops left out on purpose, and why (the error names the reason).
NOT_EXPORTED = {
    "softmax_cross_entropy": "a training loss: export the model's outputs, not its loss",
    "sigmoid_cross_entropy": "a training loss: export the model's outputs, not its loss",
}

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)


def converter(*names: str) -> Callable[[Converter], Converter]:
    """Register the decorated function as the ONNX converter of the ops ``names``."""

    def register(fn: Converter) -> Converter:
        for name in names:
            CONVERTERS[name] = fn
        return fn

    return register


def _op(node: Expr) -> Any:
    return node.op


def _dtype(node: Expr) -> np.dtype:
    return node.spec.dtype


def _cast_inputs(b: Builder, node: Expr, xs: list[str], dtype: Any = None) -> list[str]:
    """Inputs converted to ``dtype`` (the node's own by default): ONNX has no type promotion."""
    dt = _dtype(node) if dtype is None else dtype
    return [b.cast(x, i.dtype, dt) for x, i in zip(xs, node.inputs, strict=True)]


# -- element-wise ------------------------------------------------------------------------------
_UNARY = {
    "tanh": "Tanh",
    "sigmoid": "Sigmoid",
    "relu": "Relu",
    "softplus": "Softplus",
    "exp": "Exp",
    "log": "Log",
    "sqrt": "Sqrt",
    "abs": "Abs",
    "negative": "Neg",
    "sin": "Sin",
    "cos": "Cos",
    "stop_gradient": "Identity",
    # the eval phase: dropout (and DropConnect on a weight) passes its input through
    "dropout": "Identity",
}

_BINARY = {
    "add": "Add",
    "subtract": "Sub",
    "multiply": "Mul",
    "divide": "Div",
    "power": "Pow",
    "maximum": "Max",
    "minimum": "Min",
}


@converter(*_UNARY)
def unary(b: Builder, node: Expr, xs: list[str]) -> str:
    """One ONNX op of the same name (dropout and stop_gradient: Identity)."""
    return b.node(_UNARY[_op(node).name], xs)


@converter(*_BINARY)
def binary(b: Builder, node: Expr, xs: list[str]) -> str:
    """A broadcasting ONNX op, the inputs cast to the result's dtype first."""
    return b.node(_BINARY[_op(node).name], _cast_inputs(b, node, xs))


@converter("square")
def square(b: Builder, node: Expr, xs: list[str]) -> str:
    """``x * x``."""
    return b.node("Mul", [xs[0], xs[0]])


@converter("power_scalar")
def power_scalar(b: Builder, node: Expr, xs: list[str]) -> str:
    """``x ** p`` for a number ``p``."""
    return b.node("Pow", [xs[0], b.scalar(_op(node).exponent, _dtype(node))])


@converter("log1p")
def log1p(b: Builder, node: Expr, xs: list[str]) -> str:
    """``log(1 + x)`` (ONNX has no log1p: less accurate than nnlayers' for ``|x|`` near 1e-8)."""
    return b.node("Log", [b.node("Add", [xs[0], b.scalar(1.0, _dtype(node))])])


@converter("log_sigmoid")
def log_sigmoid(b: Builder, node: Expr, xs: list[str]) -> str:
    """``-softplus(-x)``."""
    return b.node("Neg", [b.node("Softplus", [b.node("Neg", xs)])])


@converter("leaky_relu")
def leaky_relu(b: Builder, node: Expr, xs: list[str]) -> str:
    """LeakyRelu with the op's slope."""
    return b.node("LeakyRelu", xs, alpha=float(_op(node).slope))


@converter("elu")
def elu(b: Builder, node: Expr, xs: list[str]) -> str:
    """Elu with the op's alpha."""
    return b.node("Elu", xs, alpha=float(_op(node).alpha))


@converter("gelu")
def gelu(b: Builder, node: Expr, xs: list[str]) -> str:
    """Gelu (opset 20 on), else its formula: exact ``0.5 x (1 + erf(x / sqrt 2))`` or the tanh
    approximation ``0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x**3)))``."""
    approximate = _op(node).approximate
    if b.opset >= 20:
        return b.node("Gelu", xs, approximate=approximate)
    x, dt = xs[0], _dtype(node)
    if approximate == "none":
        inner = b.node("Erf", [b.node("Mul", [x, b.scalar(1.0 / math.sqrt(2.0), dt)])])
    else:
        cube = b.node("Mul", [b.node("Mul", [x, x]), x])
        z = b.node("Add", [x, b.node("Mul", [cube, b.scalar(0.044715, dt)])])
        inner = b.node("Tanh", [b.node("Mul", [z, b.scalar(math.sqrt(2.0 / math.pi), dt)])])
    half_x = b.node("Mul", [x, b.scalar(0.5, dt)])
    return b.node("Mul", [half_x, b.node("Add", [inner, b.scalar(1.0, dt)])])


@converter("clip")
def clip(b: Builder, node: Expr, xs: list[str]) -> str:
    """Clip, a missing bound an empty input."""
    op, dt = _op(node), _dtype(node)
    low = "" if op.low is None else b.scalar(op.low, dt)
    high = "" if op.high is None else b.scalar(op.high, dt)
    return b.node("Clip", [xs[0], low, high])


@converter("where")
def where(b: Builder, node: Expr, xs: list[str]) -> str:
    """Where, the two branches cast to the result's dtype."""
    dt = _dtype(node)
    x1 = b.cast(xs[1], node.inputs[1].dtype, dt)
    x2 = b.cast(xs[2], node.inputs[2].dtype, dt)
    return b.node("Where", [xs[0], x1, x2])


_COMPARE = {
    "less": "Less",
    "less_equal": "LessOrEqual",
    "greater": "Greater",
    "greater_equal": "GreaterOrEqual",
    "equal": "Equal",
    "not_equal": "Equal",
}


@converter("compare")
def compare(b: Builder, node: Expr, xs: list[str]) -> str:
    """Less, Greater, Equal, ... (``not_equal``: Not of Equal), on the promoted dtype."""
    function = _op(node).function
    common = np.result_type(*(i.dtype for i in node.inputs))
    out = b.node(_COMPARE[function], _cast_inputs(b, node, xs, common))
    return b.node("Not", [out]) if function == "not_equal" else out


@converter("astype")
def astype(b: Builder, node: Expr, xs: list[str]) -> str:
    """Cast."""
    return b.node("Cast", xs, to=b.tensor_type(_dtype(node)))


# -- reductions and linear algebra --------------------------------------------------------------
_REDUCE = {
    "sum": "ReduceSum",
    "mean": "ReduceMean",
    "max": "ReduceMax",
    "min": "ReduceMin",
    "norm": "ReduceL2",
}


@converter(*_REDUCE)
def reduce(b: Builder, node: Expr, xs: list[str]) -> str:
    """Reduce* over the op's axes."""
    op = _op(node)
    return b.reduce(_REDUCE[op.name], xs[0], op.axes, op.keepdims)


@converter("arg_reduce")
def arg_reduce(b: Builder, node: Expr, xs: list[str]) -> str:
    """ArgMax / ArgMin (the first extreme, int64)."""
    op = _op(node)
    kind = "ArgMax" if op.function == "argmax" else "ArgMin"
    return b.node(kind, xs, axis=op.ax, keepdims=int(op.keepdims), select_last_index=0)


@converter("matmul")
def matmul(b: Builder, node: Expr, xs: list[str]) -> str:
    """MatMul (NumPy's rules, as ONNX's)."""
    return b.node("MatMul", _cast_inputs(b, node, xs))


# -- shapes, indexing and joining ----------------------------------------------------------------
@converter("reshape")
def reshape(b: Builder, node: Expr, xs: list[str]) -> str:
    """Reshape; the one unknown size (the batch) is -1. The leading axes a ``lead=k`` reshape
    keeps, known or not, are ONNX's 0 (copy the input's size) where a size is unknown or 0
    would be ambiguous otherwise."""
    op = _op(node)
    lead = getattr(op, "lead", 0)
    shape = [-1 if d is None else int(d) for d in op.out_shape]
    if lead and (shape[:lead].count(-1) + shape[lead:].count(-1) > 1) and 0 not in shape:
        shape[:lead] = [0] * lead  # the rest has at most one -1
        return b.node("Reshape", [xs[0], b.ints(shape)])
    return b.node("Reshape", [xs[0], b.ints(shape)], allowzero=1 if 0 in shape else None)


@converter("permute_dims")
def permute_dims(b: Builder, node: Expr, xs: list[str]) -> str:
    """Transpose."""
    return b.node("Transpose", xs, perm=list(_op(node).order))


@converter("broadcast_to")
def broadcast_to(b: Builder, node: Expr, xs: list[str]) -> str:
    """Expand; an unknown size is 1 there, which Expand's broadcasting keeps as the input's."""
    shape = [1 if d is None else int(d) for d in _op(node).out_shape]
    return b.node("Expand", [xs[0], b.ints(shape)])


def _slice_bounds(k: slice, size: int | None) -> tuple[int, int, int] | None:
    """ONNX Slice's start, end and step for ``k`` on an axis of ``size`` (None: all of it)."""
    if k == slice(None):
        return None
    step = 1 if k.step is None else int(k.step)
    if size is not None:
        start, stop, step = k.indices(size)
        if step < 0 and stop < 0:
            stop = INT64_MIN  # Python's "before index 0"; ONNX would read -1 as the last
        return start, stop, step
    if step > 0:
        start = 0 if k.start is None else int(k.start)
        stop = INT64_MAX if k.stop is None else int(k.stop)
    else:
        start = INT64_MAX if k.start is None else int(k.start)
        stop = INT64_MIN if k.stop is None else int(k.stop)
    return start, stop, step


@converter("getitem")
def getitem(b: Builder, node: Expr, xs: list[str]) -> str:
    """Basic indexing: Slice, then Squeeze for integer indices and Unsqueeze for ``None``."""
    op = _op(node)
    starts: list[int] = []
    ends: list[int] = []
    axes: list[int] = []
    steps: list[int] = []
    squeeze: list[int] = []
    unsqueeze: list[int] = []
    axis = out_axis = 0
    for k in op.index:
        if k is None:
            unsqueeze.append(out_axis)
            out_axis += 1
            continue
        size = op.in_shape[axis]
        if isinstance(k, int):
            if size is not None:
                k %= size
            bounds: tuple[int, int, int] | None = (k, INT64_MAX if k == -1 else k + 1, 1)
            squeeze.append(axis)
        else:
            bounds = _slice_bounds(k, size)
            out_axis += 1
        if bounds is not None:
            starts.append(bounds[0])
            ends.append(bounds[1])
            steps.append(bounds[2])
            axes.append(axis)
        axis += 1
    y = xs[0]
    if axes:
        y = b.node("Slice", [y, b.ints(starts), b.ints(ends), b.ints(axes), b.ints(steps)])
    if squeeze:
        y = b.node("Squeeze", [y, b.ints(squeeze)])
    if unsqueeze:
        y = b.node("Unsqueeze", [y, b.ints(unsqueeze)])
    return y if y != xs[0] else b.node("Identity", [y])


def _int64(b: Builder, name: str, expr: Expr) -> str:
    """Integer indices as int32 or int64 (what Gather and OneHot take)."""
    return name if expr.dtype in (np.int32, np.int64) else b.cast(name, expr.dtype, np.int64)


@converter("take")
def take(b: Builder, node: Expr, xs: list[str]) -> str:
    """Gather (an embedding lookup): the same shape rule as ``take``."""
    indices = _int64(b, xs[1], node.inputs[1])
    return b.node("Gather", [xs[0], indices], axis=_op(node).ax)


@converter("one_hot")
def one_hot(b: Builder, node: Expr, xs: list[str]) -> str:
    """``indices[..., None] == arange(num_classes)`` cast to the op's dtype: arraycore's own
    definition (an index outside ``[0, num_classes)`` gives zeros; ONNX's OneHot would count a
    negative one from the end, and onnxruntime has it for few index types)."""
    op = _op(node)
    classes = b.constant(np.arange(op.num_classes, dtype=np.int64), f"{b.base}/classes")
    indices = b.cast(xs[0], node.inputs[0].dtype, np.int64)
    hits = b.node("Equal", [b.node("Unsqueeze", [indices, b.ints([-1])]), classes])
    return b.node("Cast", [hits], to=b.tensor_type(op.dtype))


@converter("concat")
def concat(b: Builder, node: Expr, xs: list[str]) -> str:
    """Concat, the inputs cast to the result's dtype."""
    return b.node("Concat", _cast_inputs(b, node, xs), axis=_op(node).ax)


def _pad_pairs(width: Any, ndim: int) -> list[tuple[int, int]]:
    """``numpy.pad``'s ``pad_width`` as one (before, after) pair per axis (the op's rule)."""
    if isinstance(width, int):
        return [(width, width)] * ndim
    if len(width) == 2 and all(isinstance(w, int) for w in width):
        return [(int(width[0]), int(width[1]))] * ndim
    return [(w, w) if isinstance(w, int) else (int(w[0]), int(w[1])) for w in width]


@converter("pad")
def pad(b: Builder, node: Expr, xs: list[str]) -> str:
    """Pad with a constant."""
    op = _op(node)
    pairs = _pad_pairs(op.pad_width, node.ndim)
    pads = [p[0] for p in pairs] + [p[1] for p in pairs]
    value = b.scalar(op.value, _dtype(node))
    return b.node("Pad", [xs[0], b.ints(pads), value], mode="constant")


@converter("reverse_sequence")
def reverse_sequence(b: Builder, node: Expr, xs: list[str]) -> str:
    """ReverseSequence (each sequence within its length, lengths clipped to ``[0, T]``), or
    without lengths the whole time axis reversed by a Slice of step -1."""
    if len(xs) == 1:
        ends = b.ints([INT64_MIN])
        return b.node("Slice", [xs[0], b.ints([-1]), ends, b.ints([1]), b.ints([-1])])
    lengths = b.cast(xs[1], node.inputs[1].dtype, np.int64)
    steps = node.inputs[0].shape[1]
    if steps is not None:
        lengths = b.node("Clip", [lengths, b.scalar(0, np.int64), b.scalar(steps, np.int64)])
    return b.node("ReverseSequence", [xs[0], lengths], batch_axis=0, time_axis=1)


@converter("add_positions")
def add_positions(b: Builder, node: Expr, xs: list[str]) -> str:
    """``x + table[:T]`` with ``T`` read from ``x``'s shape (Shape, Slice): any length runs."""
    steps = b.node("Shape", [xs[0]], start=1, end=2)
    rows = b.node("Slice", [xs[1], b.ints([0]), steps, b.ints([0])])
    return b.node("Add", [xs[0], rows])


# -- neural-network ops -----------------------------------------------------------------------------
def _pads(pads: Any) -> list[int]:
    """nnlayers' ``((top, bottom), (left, right))`` as ONNX's ``[top, left, bottom, right]``."""
    (top, bottom), (left, right) = pads
    return [int(top), int(left), int(bottom), int(right)]


@converter("softmax", "log_softmax")
def softmax(b: Builder, node: Expr, xs: list[str]) -> str:
    """Softmax / LogSoftmax along the op's axis."""
    kind = "Softmax" if _op(node).name == "softmax" else "LogSoftmax"
    return b.node(kind, xs, axis=_op(node).ax)


@converter("conv2d")
def conv2d(b: Builder, node: Expr, xs: list[str]) -> str:
    """Conv (NCHW, the filters ``(O, C, KH, KW)`` as ONNX has them)."""
    op = _op(node)
    return b.node("Conv", xs, strides=list(op.s), pads=_pads(op.pad), dilations=list(op.d))


@converter("conv2d_transpose")
def conv2d_transpose(b: Builder, node: Expr, xs: list[str]) -> str:
    """ConvTranspose (the filters ``(C_in, C_out, KH, KW)`` as ONNX has them)."""
    op = _op(node)
    return b.node(
        "ConvTranspose",
        xs,
        strides=list(op.s),
        pads=_pads(op.pad),
        dilations=list(op.d),
        output_padding=list(op.op),
    )


@converter("max_pool2d", "avg_pool2d")
def pool2d(b: Builder, node: Expr, xs: list[str]) -> str:
    """MaxPool (padding never wins) or AveragePool (``count_include_pad`` as the op's)."""
    op = _op(node)
    average = op.name == "avg_pool2d"
    return b.node(
        "AveragePool" if average else "MaxPool",
        xs,
        kernel_shape=list(op.k),
        strides=list(op.s),
        pads=_pads(op.pad),
        count_include_pad=int(op.count_include_pad) if average else None,
    )


@converter("batch_norm")
def batch_norm(b: Builder, node: Expr, xs: list[str]) -> str:
    """BatchNormalization in inference mode: the running mean and variance."""
    return b.node("BatchNormalization", xs, epsilon=float(_op(node).eps))


@converter("layer_norm")
def layer_norm(b: Builder, node: Expr, xs: list[str]) -> str:
    """LayerNormalization over trailing axes of known sizes (``gamma`` and ``beta`` as its scale
    and bias where they have the normalised shape, else applied after it); over other axes its
    formula from reductions."""
    op = _op(node)
    x, dt, ndim = xs[0], _dtype(node), node.ndim
    params = list(zip(xs[1:], node.inputs[1:], strict=True))
    gamma = params.pop(0) if op.has_gamma else None
    beta = params.pop(0) if op.has_beta else None
    k = len(op.axes)
    sizes = node.inputs[0].shape[ndim - k :]
    if op.axes == tuple(range(ndim - k, ndim)) and None not in sizes:
        norm = tuple(int(d) for d in sizes if d is not None)

        def fitted(param: tuple[str, Expr] | None) -> str | None:
            """The parameter reshaped to the normalised shape, if it has exactly that size."""
            if param is None or _strip_ones(param[1].shape) != _strip_ones(norm):
                return None
            return b.node("Reshape", [param[0], b.ints(norm)])

        scale, bias = fitted(gamma), fitted(beta)
        ones = b.constant(np.ones(norm, dtype=dt), f"{b.base}/ones") if scale is None else scale
        y = b.node(
            "LayerNormalization",
            [x, ones] + ([bias] if bias is not None else []),
            axis=ndim - k,
            epsilon=op.eps,
        )
        if scale is None and gamma is not None:
            y = b.node("Mul", [y, gamma[0]])
        if bias is None and beta is not None:
            y = b.node("Add", [y, beta[0]])
        return y
    mean = b.reduce("ReduceMean", x, op.axes, True)
    centred = b.node("Sub", [x, mean])
    var = b.reduce("ReduceMean", b.node("Mul", [centred, centred]), op.axes, True)
    std = b.node("Sqrt", [b.node("Add", [var, b.scalar(op.eps, dt)])])
    y = b.node("Div", [centred, std])
    if gamma is not None:
        y = b.node("Mul", [y, gamma[0]])
    if beta is not None:
        y = b.node("Add", [y, beta[0]])
    return y


def _strip_ones(shape: Sequence[Any]) -> tuple[Any, ...]:
    k = 0
    while k < len(shape) and shape[k] == 1:
        k += 1
    return tuple(shape[k:])


@converter("scaled_dot_product_attention")
def attention(b: Builder, node: Expr, xs: list[str]) -> str:
    """``softmax(q @ k^T * scale + mask) @ v`` from MatMul, Mul, Where/Add and Softmax; the
    causal mask a constant lower triangle (or built from the lengths where they are unknown);
    with a mask, a row left without keys (its max score -inf) gets weights 0 by ReduceMax, Equal
    and Where, as the op. Attention dropout is off in the eval phase."""
    op, dt = _op(node), _dtype(node)
    q, k, v = xs[:3]
    ndim = node.inputs[0].ndim
    perm = [*range(ndim - 2), ndim - 1, ndim - 2]
    scores = b.node("MatMul", [q, b.node("Transpose", [k], perm=perm)])
    scores = b.node("Mul", [scores, b.scalar(op.factor, dt)])
    minus_inf = b.scalar(-math.inf, dt)
    if len(xs) == 4:
        if op.mask_kind == "bool":
            scores = b.node("Where", [xs[3], scores, minus_inf])
        else:
            scores = b.node("Add", [scores, xs[3]])
    if op.causal:
        tq, tk = node.inputs[0].shape[-2], node.inputs[1].shape[-2]
        if tq is not None and tk is not None:
            allowed = b.constant(np.tril(np.ones((tq, tk), dtype=bool)), f"{b.base}/causal")
        else:
            shape = b.node("Shape", [scores])
            rows, cols = (
                b.node(
                    "Range", [b.scalar(0, np.int64), _size(b, shape, axis), b.scalar(1, np.int64)]
                )
                for axis in (-2, -1)
            )
            rows = b.node("Unsqueeze", [rows, b.ints([1])])
            allowed = b.node("GreaterOrEqual", [rows, cols])
        scores = b.node("Where", [allowed, scores, minus_inf])
    weights = b.node("Softmax", [scores], axis=-1)
    if len(xs) == 4:  # a query whose every key is masked out gets weights 0, as the op gives
        top = b.reduce("ReduceMax", scores, [-1], True)
        empty = b.node("Equal", [top, minus_inf])
        weights = b.node("Where", [empty, b.scalar(0.0, dt), weights])
    return b.node("MatMul", [weights, v])


def _size(b: Builder, shape: str, axis: int) -> str:
    """Element ``axis`` of a Shape output as a 0-d int64."""
    return b.node("Gather", [shape, b.scalar(axis, np.int64)], axis=0)


# -- recurrent layers ---------------------------------------------------------------------------
def _gates(b: Builder, name: str, axis: int, hidden: int, order: Sequence[int]) -> str:
    """The gate blocks (each ``hidden`` wide along ``axis``) of ``name`` put in ``order``."""
    parts = b.multi("Split", [name, b.ints([hidden] * len(order))], len(order), axis=axis)
    return b.node("Concat", [parts[i] for i in order], axis=axis)


def _weights(b: Builder, name: str, hidden: int, order: Sequence[int]) -> str:
    """nnlayers' ``(inputs, gates * H)`` weight as ONNX's ``(1, gates * H, inputs)``, the gates
    reordered (nodes on the initializer, which onnxruntime folds when it loads the model)."""
    rows = b.node("Transpose", [_gates(b, name, 1, hidden, order)], perm=[1, 0])
    return b.node("Unsqueeze", [rows, b.ints([0])])


def _time_major(b: Builder, x: str) -> str:
    return b.node("Transpose", [x], perm=[1, 0, 2])


def _batch_major(b: Builder, y: str) -> str:
    """ONNX's ``Y (T, 1, N, H)`` as ``(N, T, H)``."""
    return _time_major(b, b.node("Squeeze", [y, b.ints([1])]))


def _state(b: Builder, h: str) -> str:
    """An initial state ``(N, H)`` as ONNX's ``(1, N, H)``."""
    return b.node("Unsqueeze", [h, b.ints([0])])


#: ONNX's LSTM gates are i, o, f, c; nnlayers' (PyTorch's and cuDNN's) are i, f, g (= c), o.
LSTM_ORDER = (0, 3, 1, 2)
#: ONNX's GRU gates are z, r, h; nnlayers' are r, u (= z), n (= h).
GRU_ORDER = (1, 0, 2)


@converter("lstm")
def lstm(b: Builder, node: Expr, xs: list[str]) -> str:
    """ONNX's LSTM: the gates reordered, the input bias and zeros for the recurrent bias; the
    output packed as the op's, ``(N*T + N, H)`` (every hidden state, then the last cell state),
    and each part noted for ``lstm_part``, which takes it from the LSTM node directly."""
    x, w, u, bias, *state = xs
    dt = _dtype(node)
    hidden = int(node.inputs[2].shape[0])  # type: ignore[arg-type]
    zeros = b.constant(np.zeros(4 * hidden, dtype=dt), f"{b.base}/recurrent_bias")
    biases = b.node("Concat", [_gates(b, bias, 0, hidden, LSTM_ORDER), zeros], axis=0)
    initial = [_state(b, s) for s in state]
    y, _, c = b.multi(
        "LSTM",
        [
            _time_major(b, x),
            _weights(b, w, hidden, LSTM_ORDER),
            _weights(b, u, hidden, LSTM_ORDER),
            b.node("Unsqueeze", [biases, b.ints([0])]),
            "",
            *initial,
        ],
        3,
        hidden_size=hidden,
    )
    hidden_states = _batch_major(b, y)
    cell = b.node("Squeeze", [c, b.ints([0])])
    b.parts[id(node)] = {"hidden": hidden_states, "cell": cell}
    flat = b.node("Reshape", [hidden_states, b.ints([-1, hidden])])
    return b.node("Concat", [flat, cell], axis=0)


@converter("lstm_part")
def lstm_part(b: Builder, node: Expr, xs: list[str]) -> str:
    """A part of the packed LSTM output: the tensor the LSTM's converter noted for it."""
    return b.parts[id(node.inputs[0])][node.op.part]  # type: ignore[union-attr]


@converter("gru_sequence")
def gru_sequence(b: Builder, node: Expr, xs: list[str]) -> str:
    """ONNX's GRU with ``linear_before_reset=1`` (nnlayers' ``reset_after`` form). When the
    projected input is ``x @ weight + bias`` (as the GRU layer makes it) the GRU takes ``x`` and
    that weight and bias, and the projection itself drops out of the graph; otherwise it takes
    the projection through an identity weight."""
    xw, u, recurrent_bias, *state = xs
    dt = _dtype(node)
    hidden = int(node.inputs[1].shape[0])  # type: ignore[arg-type]
    projection = _projection(node.inputs[0], 3 * hidden)
    if projection is not None:
        x, w, bias = (b.name_of(e) for e in projection)
        weight = _weights(b, w, hidden, GRU_ORDER)
        input_bias = _gates(b, bias, 0, hidden, GRU_ORDER)
    else:
        x = xw
        blocks = [np.arange(g * hidden, (g + 1) * hidden) for g in GRU_ORDER]
        eye = np.eye(3 * hidden, dtype=dt)[np.concatenate(blocks)]
        weight = b.constant(eye[None], f"{b.base}/identity")
        input_bias = b.constant(np.zeros(3 * hidden, dtype=dt), f"{b.base}/input_bias")
    biases = b.node("Concat", [input_bias, _gates(b, recurrent_bias, 0, hidden, GRU_ORDER)], axis=0)
    y, _ = b.multi(
        "GRU",
        [
            _time_major(b, x),
            weight,
            _weights(b, u, hidden, GRU_ORDER),
            b.node("Unsqueeze", [biases, b.ints([0])]),
            "",
            *(_state(b, s) for s in state),
        ],
        2,
        hidden_size=hidden,
        linear_before_reset=1,
    )
    return _batch_major(b, y)


@converter("rnn_sequence")
def rnn_sequence(b: Builder, node: Expr, xs: list[str]) -> str:
    """ONNX's RNN (its activation Tanh, Relu or Sigmoid); the projection ``x @ weight + bias``
    folded in as for the GRU, else an identity input weight."""
    xw, u, *state = xs
    dt = _dtype(node)
    hidden = int(node.inputs[1].shape[0])  # type: ignore[arg-type]
    projection = _projection(node.inputs[0], hidden)
    if projection is not None:
        x, w, bias = (b.name_of(e) for e in projection)
        weight = _weights(b, w, hidden, (0,))
        input_bias = bias
    else:
        x = xw
        weight = b.constant(np.eye(hidden, dtype=dt)[None], f"{b.base}/identity")
        input_bias = b.constant(np.zeros(hidden, dtype=dt), f"{b.base}/input_bias")
    zeros = b.constant(np.zeros(hidden, dtype=dt), f"{b.base}/recurrent_bias")
    biases = b.node("Concat", [input_bias, zeros], axis=0)
    activation = {"tanh": "Tanh", "relu": "Relu", "sigmoid": "Sigmoid"}[_op(node).activation]
    y, _ = b.multi(
        "RNN",
        [
            _time_major(b, x),
            weight,
            _weights(b, u, hidden, (0,)),
            b.node("Unsqueeze", [biases, b.ints([0])]),
            "",
            *(_state(b, s) for s in state),
        ],
        2,
        hidden_size=hidden,
        activations=[activation],
    )
    return _batch_major(b, y)


def _projection(xw: Expr, width: int) -> tuple[Expr, Expr, Expr] | None:
    """``(x, weight, bias)`` when ``xw`` is ``x @ weight + bias`` with ``x (N, T, C)``, ``weight
    (C, width)`` and ``bias (width,)`` of one dtype; else None."""
    if xw.op is None or xw.op.name != "add":
        return None
    first, second = xw.inputs
    for product, bias in ((first, second), (second, first)):
        if product.op is None or product.op.name != "matmul":
            continue
        x, w = product.inputs
        if (
            x.ndim == 3
            and w.ndim == 2
            and w.shape[1] == width
            and bias.shape == (width,)
            and x.dtype == w.dtype == bias.dtype == xw.dtype
        ):
            return x, w, bias
    return None
