"""Fusions a plan makes: ops that a graph runs one after the other, run as one op.

A plan works on copies of its graph's ops (one per node), so it may put a fused op in place of
one node's op and an :class:`~nnlayers.ops.control.Alias` in place of the other's: the graph,
its nodes and what users see of them stay as they were, and the plan's slots, gradients and
generated code (``graph.specialise(...).source``) name the fused op.

Fused today (where the first op's output has no other reader, is not an output of the graph and
is not a ``wrt`` node, whose gradient would be asked for before the ReLU):

- ``batch_norm`` then ``relu`` becomes ``batch_norm_relu`` (``xp.nn.batch_norm_relu`` and its
  backward; one pass each way on the NumPy backend), the pair every convolutional block of a
  VGG or ResNet runs.
- ``add`` of a bias then ``relu`` becomes ``bias_relu`` (``xp.nn.bias_relu`` and its backward:
  the ReLU's gradient and the bias's sum in one pass) where one operand has the sum's shape and
  the other is a bias along one of its axes, of one floating dtype, and the sum has at least
  :data:`BIAS_RELU_MIN_ITEMS` items: ``Conv2D(..., activation="relu")`` (``conv2d(x, w) +
  b.reshape(1, -1, 1, 1)``) and ``Affine(..., activation="relu")`` (``x @ w + b``).

- a matrix product of rows by one matrix (two matrices, or a stack of rows: ``(N, T, D) @ (D,
  U)``), read only by the add of a bias along its last axis, becomes ``affine``
  (``xp.nn.affine``: on the NumPy backend one oneDNN product with the bias, no pass over the
  output to add it) where the output has at least :data:`AFFINE_MIN_ITEMS` items and no ReLU
  fusion took the add: a dense layer's ``x @ w + b`` without a ReLU, an attention's projections.
  The fused op reads the bias too, so the plan's copy of the analysis gives it that input.
- an LSTM layer read only by its hidden part (``LSTM(...)`` without ``return_state``) becomes
  ``lstm`` with the hidden states ``(N, T, H)`` for output, as ``xp.nn.lstm`` gives them: no
  packed array to copy them into, nor a packed gradient to copy them out of.

Guarded plans (``check_finite``) are not fused, so that the guard names the op as written, and
none are with ``NNLAYERS_FUSION=0`` in the environment when the plan is made (to compare).
"""

from __future__ import annotations

import dataclasses
import math
import os
from typing import Any

from ..expr.spec import Spec
from ..ops.control import Alias
from ..ops.math.activation import Relu
from ..ops.math.arithmetic import Add, BiasRelu
from ..ops.math.linalg import MatMul, MatMulBias
from ..ops.nn.normalization import BatchNorm, BatchNormRelu
from ..ops.nn.recurrent import LSTMLayer, LSTMPart, LSTMSequence
from .analysis import Analysis


def fusion_enabled() -> bool:
    """Whether plans fuse (``NNLAYERS_FUSION`` is not ``0``), read when a plan is made."""
    return os.environ.get("NNLAYERS_FUSION", "").strip() != "0"


#: Items below which a bias and ReLU stay two ops: an in-place add and an in-place maximum are
#: two bare calls on the NumPy backend, and on arrays this small the fused op's argument checks
#: cost more than the pass over memory it saves (a 64-unit layer at batch 32: 3 us a step more).
BIAS_RELU_MIN_ITEMS = 1 << 15


#: Output items below which a product and its bias stay two ops (a bare product and an
#: in-place add; the fused op's checks would cost more than the pass it saves).
AFFINE_MIN_ITEMS = 1 << 14


def bias_layout(specs: list[Spec], min_items: int = BIAS_RELU_MIN_ITEMS) -> tuple[int, int] | None:
    """``(full, axis)`` where the two operands of an add (``specs``, the sum's last) are a full
    array (operand ``full``, of the sum's shape) and a bias along its ``axis`` (one axis of
    more than one entry, ``shape[axis]`` of them, the others 1), all of one floating dtype and
    known shapes, the sum of at least ``min_items`` items; else ``None`` (a scalar or one-entry
    bias, a sum of two full arrays: the residual add of a ResNet block)."""
    *operands, out = specs
    if len(operands) != 2 or not out.is_float or any(s.dtype != out.dtype for s in operands):
        return None
    shape = out.shape
    if not shape or any(not isinstance(d, int) for s in specs for d in s.shape):
        return None
    if math.prod(shape) < min_items:  # type: ignore[arg-type]  # ints: tested above
        return None
    for full in (0, 1):
        bias = operands[1 - full].shape
        if operands[full].shape != shape or len(bias) > len(shape):
            continue
        padded = (1,) * (len(shape) - len(bias)) + tuple(bias)
        along = [a for a, d in enumerate(padded) if d != 1]
        if len(along) == 1 and padded[along[0]] == shape[along[0]]:
            return full, along[0]
    return None


def fuse(analysis: Analysis, ops: list[Any], specs: list[Spec]) -> Analysis:
    """Put fused ops in ``ops`` (the plan's op copies, by node; ``specs``, their inferred
    outputs) where the graph allows; returns the analysis the plan compiles, ``analysis``
    itself unless a fused op reads an input its node did not (then a copy that says so)."""
    a = analysis
    readers = [0] * len(ops)
    for ins in a.inputs:
        for j in ins:
            readers[j] += 1
    kept = set(a.outputs) | set(a.wrt)
    for i, op in enumerate(ops):
        if type(op) is LSTMPart and op.part == "hidden":
            j = a.inputs[i][0]  # (a second input, the LSTM's x, gives an unknown length)
            if type(ops[j]) is LSTMLayer and readers[j] == 1 and j not in kept:
                ops[j] = LSTMSequence.copy_of(ops[j])
                ops[i] = Alias("lstm_part", "lstm")
                specs[j] = specs[i]  # the fused op's output is the part's
            continue
        if type(op) is not Relu:
            continue
        (j,) = a.inputs[i]
        first = ops[j]
        if readers[j] != 1 or j in kept:
            continue
        if type(first) is BatchNorm:
            ops[j] = BatchNormRelu.copy_of(first)
            ops[i] = Alias("relu", "batch_norm")
        elif type(first) is Add:
            layout = bias_layout([specs[k] for k in a.inputs[j]] + [specs[j]])
            if layout is not None:
                ops[j] = BiasRelu.replacing(first, *layout)
                ops[i] = Alias("relu", "bias_relu")
    copy = None
    for i, op in enumerate(ops):
        found = _product_and_bias(a, ops, specs, readers, kept, i) if type(op) is Add else None
        if found is None:
            continue
        j, k, m = found  # the product's node, the bias's node, the product's place in the add
        if copy is None:
            copy = dataclasses.replace(
                a, inputs=list(a.inputs), needs=list(a.needs), on_path=list(a.on_path)
            )
        ops[j] = MatMulBias.replacing(ops[j], tuple(specs[k].shape))  # type: ignore[arg-type]
        ops[i] = Alias("add", "affine")
        copy.inputs[j] = (*a.inputs[j], k)
        copy.inputs[i] = (j,)
        if a.needs[i]:  # the add is on the loss's path: the fused op sends what it sent
            bias_needs = a.needs[i][1 - m]
            copy.needs[j] = (*(a.needs[j] or (False, False)), bias_needs)
            copy.on_path[j] = a.on_path[j] or bias_needs
            copy.needs[i] = (copy.on_path[j],)
    return a if copy is None else copy


def _product_and_bias(
    a: Analysis, ops: list[Any], specs: list[Spec], readers: list[int], kept: set[int], i: int
) -> tuple[int, int, int] | None:
    """``(product, bias, place)``: the nodes of the add ``i``'s operands where one (at
    ``place``) is a :class:`MatMul` of rows by one matrix that nothing else reads and the other a
    bias along the sum's last axis (:func:`bias_layout`, from :data:`AFFINE_MIN_ITEMS` items)
    available before the product runs (a source or an earlier node); else ``None``."""
    ins = a.inputs[i]
    if len(ins) != 2 or ins[0] == ins[1]:
        return None
    layout = bias_layout([specs[k] for k in ins] + [specs[i]], AFFINE_MIN_ITEMS)
    if layout is None or layout[1] != len(specs[i].shape) - 1:
        return None
    m = layout[0]
    j, k = ins[m], ins[1 - m]
    product = ops[j]
    if type(product) is not MatMul or not (product.rows or product.plain):
        return None
    if readers[j] != 1 or j in kept or (ops[k] is not None and k > j):
        return None
    return j, k, m
