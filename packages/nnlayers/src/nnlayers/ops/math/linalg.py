"""Linear algebra: matmul (batched, NumPy's rules for 1-D operands) and the L2 norm."""

from __future__ import annotations

import math
from typing import Any

from arraycore import ArrayNamespace

from ...expr.node import Expr
from ...expr.spec import Spec, broadcast_shapes, format_shape
from ..base import (
    Grads,
    Inputs,
    Needs,
    Op,
    reduction_plan,
    require_float,
    result_dtype,
    unbroadcast,
)


class MatMul(Op):
    """``x1 @ x2``: ``dx1 = dy @ x2^T`` and ``dx2 = x1^T @ dy``, batch axes summed back.

    A stack of rows times one matrix, ``(N, T, D) @ (D, U)`` (a dense layer over a sequence), is
    one 2-D product of the ``(N*T, D)`` reshape, not ``N`` batched ``(T, D)`` ones; its gradients
    are ``dy (N*T, U) @ W^T`` and one ``(D, N*T) @ (N*T, U)`` product for ``W``, never an
    ``(N, D, U)`` stack of per-batch products to sum. The reshape is free for a contiguous ``x``
    and one copy of a strided one (per pass that reads it), next to ``2 U`` flops per element.
    """

    fresh_grads = True

    name = "matmul"
    fresh_output = True

    def kept_inputs(self, needs: Needs, n_inputs: int) -> tuple[int, ...]:
        return tuple(i for i, other in ((0, 1), (1, 0)) if needs[other])

    def infer(self, a: Spec, b: Spec) -> Spec:
        require_float(self.name, a, b)
        if a.ndim == 0 or b.ndim == 0:
            raise ValueError("operands must have at least one dimension")
        self.shapes = (a.shape, b.shape)
        a2 = a.shape if a.ndim > 1 else (1, *a.shape)
        b2 = b.shape if b.ndim > 1 else (*b.shape, 1)
        if a2[-1] is not None and b2[-2] is not None and a2[-1] != b2[-2]:
            raise ValueError(
                f"shapes {format_shape(a.shape)} and {format_shape(b.shape)} do not align "
                f"({a2[-1]} != {b2[-2]})"
            )
        batch = broadcast_shapes(a2[:-2], b2[:-2])
        self.out2 = (*batch, a2[-2], b2[-1])
        self.a2, self.b2 = a2, b2
        self.plans = (reduction_plan(a2, self.out2), reduction_plan(b2, self.out2))
        # two matrices: the gradients are plain products, no reshapes or batch sums
        self.plain = a.ndim == 2 and b.ndim == 2
        # rows of any batch shape times one matrix: one 2-D product of the flattened rows
        self.rows = a.ndim > 2 and b.ndim == 2
        shape = batch + (() if a.ndim == 1 else (a2[-2],)) + (() if b.ndim == 1 else (b2[-1],))
        return Spec(shape, result_dtype(a, b))

    def forward(self, xp: ArrayNamespace, a: Any, b: Any) -> Any:
        if self.rows:
            lead = tuple(a.shape[:-1])
            y = xp.matmul(xp.reshape(a, (math.prod(lead), a.shape[-1])), b)
            return xp.reshape(y, (*lead, b.shape[-1]))
        return xp.matmul(a, b)

    def backward(
        self, xp: ArrayNamespace, dy: Any, inputs: Inputs, output: Any, residual: Any, needs: Needs
    ) -> Grads:
        a, b = inputs
        if self.rows:
            lead = tuple(dy.shape[:-1])
            m = math.prod(lead)
            dy2 = xp.reshape(dy, (m, dy.shape[-1]))
            ga = gb = None
            if needs[0]:
                ga = xp.matmul(dy2, xp.matrix_transpose(b))
                ga = xp.reshape(ga, (*lead, ga.shape[-1]))
            if needs[1]:
                a2 = xp.reshape(a, (m, a.shape[-1]))
                gb = xp.matmul(xp.matrix_transpose(a2), dy2)
            return ga, gb
        if self.plain:
            mt = xp.matrix_transpose
            return (
                xp.matmul(dy, mt(b)) if needs[0] else None,
                xp.matmul(mt(a), dy) if needs[1] else None,
            )
        vector = len(self.shapes[0]) == 1 or len(self.shapes[1]) == 1
        if vector:
            dy = xp.reshape(dy, self.out2)
        ga = gb = None
        if needs[0]:
            b2 = xp.reshape(b, self.b2) if vector else b
            ga = unbroadcast(xp, xp.matmul(dy, xp.matrix_transpose(b2)), self.a2, self.plans[0])
            ga = xp.reshape(ga, self.shapes[0]) if vector else ga
        if needs[1]:
            a2 = xp.reshape(a, self.a2) if vector else a
            gb = unbroadcast(xp, xp.matmul(xp.matrix_transpose(a2), dy), self.b2, self.plans[1])
            gb = xp.reshape(gb, self.shapes[1]) if vector else gb
        return ga, gb


class MatMulBias(MatMul):
    """``a @ b + bias`` as one op (``xp.nn.affine``: on the NumPy backend one oneDNN product
    with its bias, no pass over the output to add it), what a plan runs where a matrix product
    of rows by one matrix is read only by the add of a bias along its last axis
    (:func:`nnlayers.graph.fusion.fuse`): a dense layer's ``x @ w + b``. The gradients are
    :class:`MatMul`'s and, for the bias, ``dy`` summed over every axis but the last."""

    plan_only = True
    name = "affine"

    #: the bias's shape where it is not 1-D (``(1, U)``), else None; its 1-D shape; the axes
    #: its gradient sums
    shaped: tuple[int, ...] | None
    flat: tuple[int]
    bias_axes: tuple[int, ...]

    @classmethod
    def replacing(cls, op: MatMul, bias_shape: tuple[int, ...]) -> MatMulBias:
        """This op with the inferred state of the plan's ``op`` (rows or two matrices) and a
        bias of ``bias_shape`` (its units along the last axis, 1 elsewhere)."""
        fused: MatMulBias = cls.copy_of(op)
        fused.shaped = None if len(bias_shape) == 1 else tuple(bias_shape)
        fused.flat = (bias_shape[-1],)
        fused.bias_axes = tuple(range(len(op.out2) - 1))
        return fused

    def kept_inputs(self, needs: Needs, n_inputs: int) -> tuple[int, ...]:
        return super().kept_inputs(needs, 2)

    def forward(self, xp: ArrayNamespace, a: Any, b: Any, bias: Any) -> Any:  # type: ignore[override]
        return xp.nn.affine(a, b, bias if self.shaped is None else xp.reshape(bias, self.flat))

    def backward(
        self, xp: ArrayNamespace, dy: Any, inputs: Inputs, output: Any, residual: Any, needs: Needs
    ) -> Grads:
        a, b, _bias = inputs
        ga, gb = super().backward(xp, dy, (a, b), output, residual, needs[:2])
        gbias = None
        if needs[2]:
            gbias = xp.sum(dy, axis=self.bias_axes)
            if self.shaped is not None:
                gbias = xp.reshape(gbias, self.shaped)
        return ga, gb, gbias


def matmul(x1: Any, x2: Any) -> Expr:
    """Matrix product with NumPy's rules (batched over leading axes, 1-D operands allowed)."""
    return MatMul()(x1, x2)


def norm(x: Any, axis: Any = None, keepdims: bool = False) -> Expr:
    """L2 norm over ``axis`` (all axes by default); its gradient at an all-zero vector is 0."""
    from .reduction import Norm

    return Norm(axis, keepdims)(x)
