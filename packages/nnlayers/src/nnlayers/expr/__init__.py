"""Build expressions as you would write NumPy: ``import nnlayers.expr as ex``.

>>> import numpy as np
>>> import nnlayers.expr as ex
>>> x = ex.placeholder((None, 4), name="x")
>>> W = ex.constant(np.ones((4, 3)))
>>> h = ex.relu(x @ W + 1.0)
>>> p = ex.softmax(h[:, 1:], axis=1)
>>> p.shape, p.dtype.name
((None, 2), 'float32')

Nothing is computed here; :func:`nnlayers.compile` turns expressions into a runnable graph.
"""

from ..ops.array.indexing import getitem, one_hot, take
from ..ops.array.join import concat, pad, split, stack
from ..ops.array.shape import (
    broadcast_to,
    expand_dims,
    flatten,
    permute_dims,
    reshape,
    squeeze,
    transpose,
)
from ..ops.control import stop_gradient
from ..ops.loss.cross_entropy import (
    binary_cross_entropy_with_logits,
    sigmoid_cross_entropy,
    softmax_cross_entropy,
)
from ..ops.loss.divergence import kl_standard_normal
from ..ops.loss.margin import hinge
from ..ops.loss.penalty import l1_penalty, l2_penalty
from ..ops.loss.regression import squared_error
from ..ops.math.activation import (
    elu,
    gelu,
    leaky_relu,
    log_sigmoid,
    relu,
    sigmoid,
    softplus,
    tanh,
)
from ..ops.math.elementwise import (
    abs,
    add,
    astype,
    clip,
    divide,
    equal,
    exp,
    greater,
    greater_equal,
    less,
    less_equal,
    log,
    log1p,
    maximum,
    minimum,
    multiply,
    negative,
    not_equal,
    power,
    sqrt,
    square,
    subtract,
    where,
)
from ..ops.math.linalg import matmul, norm
from ..ops.math.reduction import argmax, argmin, max, mean, min, sum
from ..ops.math.trigonometric import cos, sin
from ..ops.nn.attention import scaled_dot_product_attention
from ..ops.nn.convolution import conv2d, conv2d_transpose
from ..ops.nn.dropout import drop_connect, dropout
from ..ops.nn.normalization import batch_norm, layer_norm
from ..ops.nn.pooling import avg_pool2d, max_pool2d
from ..ops.nn.recurrent import gru_sequence, lstm, rnn_sequence
from ..ops.nn.sequence import add_positions, reverse_sequence, sequence_mask
from ..ops.nn.softmax import log_softmax, softmax
from .node import Constant, Expr, Placeholder, as_expr, constant, placeholder
from .spec import Spec

pow = power  # noqa: A001 - the Array API name

__all__ = [
    "Constant", "Expr", "Placeholder", "Spec", "abs", "add", "add_positions", "argmax", "argmin", "as_expr", "astype", "avg_pool2d",
    "batch_norm", "binary_cross_entropy_with_logits", "broadcast_to", "clip", "concat",
    "constant", "conv2d", "conv2d_transpose", "cos", "divide", "drop_connect", "dropout", "elu", "equal", "exp",
    "expand_dims", "flatten", "gelu", "getitem", "greater", "greater_equal", "gru_sequence", "hinge",
    "kl_standard_normal", "l1_penalty", "l2_penalty",
    "layer_norm", "leaky_relu", "less", "less_equal", "log", "log1p", "log_sigmoid",
    "log_softmax", "lstm", "matmul", "max", "max_pool2d", "maximum", "mean", "min", "minimum",
    "multiply", "negative", "norm", "not_equal", "one_hot", "pad", "permute_dims", "placeholder",
    "pow", "power", "relu", "reshape", "reverse_sequence", "rnn_sequence", "scaled_dot_product_attention", "sequence_mask", "sigmoid", "sigmoid_cross_entropy", "sin", "softmax",
    "softmax_cross_entropy", "softplus", "split", "sqrt", "square", "squared_error", "squeeze",
    "stack", "stop_gradient", "subtract", "sum", "take", "tanh", "transpose", "where",
]  # fmt: skip
