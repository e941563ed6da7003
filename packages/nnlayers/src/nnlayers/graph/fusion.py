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

Guarded plans (``check_finite``) are not fused, so that the guard names the op as written, and
none are with ``NNLAYERS_FUSION=0`` in the environment when the plan is made (to compare).
"""

from __future__ import annotations

import os
from typing import Any

from ..ops.control import Alias
from ..ops.math.activation import Relu
from ..ops.nn.normalization import BatchNorm, BatchNormRelu
from .analysis import Analysis


def fusion_enabled() -> bool:
    """Whether plans fuse (``NNLAYERS_FUSION`` is not ``0``), read when a plan is made."""
    return os.environ.get("NNLAYERS_FUSION", "").strip() != "0"


def fuse(analysis: Analysis, ops: list[Any]) -> int:
    """Put fused ops in ``ops`` (the plan's op copies, by node) where the graph allows; returns
    how many pairs were fused."""
    a = analysis
    readers = [0] * len(ops)
    for ins in a.inputs:
        for j in ins:
            readers[j] += 1
    kept = set(a.outputs) | set(a.wrt)
    fused = 0
    for i, op in enumerate(ops):
        if type(op) is not Relu:
            continue
        (j,) = a.inputs[i]
        first = ops[j]
        if type(first) is BatchNorm and readers[j] == 1 and j not in kept:
            ops[j] = BatchNormRelu.replacing(first)
            ops[i] = Alias("relu", "batch_norm")
            fused += 1
    return fused
