"""Variable-length sequences: ``reverse_sequence`` and ``sequence_mask``.

A batch of sequences of different lengths is stored right-padded, ``(N, T, ...)`` with sequence
``n`` in ``[:lengths[n]]`` (PyTorch's ``pack_padded_sequence`` takes the same ``lengths``).
``reverse_sequence(x, lengths)`` reverses each sequence within its own length and leaves the
padding where it is: what a backward-running recurrent layer must read so that padding never
reaches a real step (TensorFlow's ``tf.reverse_sequence``). Without ``lengths`` it flips the
whole time axis. It is its own inverse, so its gradient is the same reversal of ``dy``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import arraycore
from arraycore import ArrayNamespace

from ...expr.node import Expr, as_expr, constant
from ...expr.spec import Spec, format_shape
from ..array.shape import expand_dims
from ..base import Grads, Inputs, Needs, Op, require_same_dtype
from ..math.comparison import astype, less


def check_lengths(op: str, x: Spec, lengths: Spec) -> None:
    """``lengths`` must be integer ``(N,)`` beside ``x (N, T, ...)``."""
    if x.ndim < 2:
        raise ValueError(f"{op}: needs sequences (N, T, ...), got {format_shape(x.shape)}")
    if lengths.dtype.kind not in "iu" or lengths.ndim != 1:
        raise TypeError(
            f"{op}: lengths must be integers of shape (N,), got {lengths.dtype.name} of shape "
            f"{format_shape(lengths.shape)}"
        )
    if None not in (x.shape[0], lengths.shape[0]) and x.shape[0] != lengths.shape[0]:
        raise ValueError(
            f"{op}: {lengths.shape[0]} lengths for {x.shape[0]} sequences {format_shape(x.shape)}"
        )


class ReverseSequence(Op):
    """See the module docstring; inputs ``x`` and optionally ``lengths``."""

    name = "reverse_sequence"
    nondiff_inputs = (1,)
    keep_inputs = (1,)
    # not fresh_grads: without lengths the gradient is xp.flip(dy), a view of dy

    def infer(self, x: Spec, *lengths: Spec) -> Spec:
        if lengths:
            check_lengths(self.name, x, lengths[0])
        elif x.ndim < 2:
            raise ValueError(
                f"{self.name}: needs sequences (N, T, ...), got {format_shape(x.shape)}"
            )
        return x

    def _reverse(self, xp: ArrayNamespace, x: Any, lengths: Any) -> Any:
        if lengths is None:
            return xp.flip(x, axis=1)
        steps = int(x.shape[1])
        t = self._positions(xp, steps, lengths.dtype)
        n = xp.reshape(xp.clip(lengths, 0, steps), (-1, 1))
        index = xp.where(t < n, n - 1 - t, t)  # (N, T): reversed inside, padding in place
        index = xp.reshape(index, (*index.shape, *(1,) * (x.ndim - 2)))
        # in [0, T) by construction: arraycore's check would only make a device wait
        with arraycore.checks(False, only="indices"):
            return xp.take_along_axis(x, xp.broadcast_to(index, x.shape), axis=1)

    def _positions(self, xp: ArrayNamespace, steps: int, dtype: Any) -> Any:
        """``arange(steps)`` as a row ``(1, T)``, made once per namespace, length and dtype:
        a step makes no new one (a device's arange copies from the host; see capture.md)."""
        cache: dict[Any, Any] = self.__dict__.setdefault("_position_rows", {})
        key = (id(xp), steps, dtype)
        found = cache.get(key)
        if found is None or found[0] is not xp:
            found = cache[key] = (xp, xp.reshape(xp.arange(steps, dtype=dtype), (1, steps)))
        return found[1]

    def forward(self, xp: ArrayNamespace, x: Any, *lengths: Any) -> Any:
        return self._reverse(xp, x, lengths[0] if lengths else None)

    def backward(
        self, xp: ArrayNamespace, dy: Any, inputs: Inputs, output: Any, residual: Any, needs: Needs
    ) -> Grads:
        if len(inputs) == 1:
            return (self._reverse(xp, dy, None),)
        return (self._reverse(xp, dy, inputs[1]), None)


def reverse_sequence(x: Any, lengths: Any = None) -> Expr:
    """``x (N, T, ...)`` with each sequence reversed within ``lengths[n]`` (its padding left in
    place), or the whole time axis flipped without ``lengths``.

    >>> import numpy as np, nnlayers, nnlayers.expr as ex
    >>> x = ex.placeholder((2, 4), "int64", name="x")
    >>> graph = nnlayers.compile(ex.reverse_sequence(x, np.array([3, 4])), wrt=[])
    >>> graph.xp.to_numpy(graph.forward({x: np.array([[1, 2, 3, 0], [1, 2, 3, 4]])})).tolist()
    [[3, 2, 1, 0], [4, 3, 2, 1]]
    """
    x = as_expr(x)
    if lengths is None:
        return ReverseSequence()(x)
    return ReverseSequence()(x, _lengths(lengths))


def _lengths(lengths: Any) -> Expr:
    if isinstance(lengths, Expr):
        return lengths
    host = np.asarray(lengths)
    if host.dtype.kind not in "iu":
        raise TypeError(f"sequence lengths must be integers, got {host.dtype.name}")
    return constant(host.astype(np.int64))


def sequence_mask(lengths: Any, steps: int, dtype: Any = "bool") -> Expr:
    """``(N, steps)``: true (or 1) at ``t < lengths[n]``, the positions that hold data."""
    positions = constant(np.arange(int(steps), dtype=np.int64))
    mask = less(positions, expand_dims(_lengths(lengths), 1))
    return mask if np.dtype(dtype) == np.bool_ else astype(mask, dtype)


class AddPositions(Op):
    """``x + table[:T]``: one vector of ``table (L, d)`` added per position of ``x (N, T, d)``,
    ``T <= L``, the length read from ``x`` in each plan (known or not when the graph is built):
    what positional encodings add. The gradient of the table is ``dy`` summed over the batch in
    its first ``T`` rows, zero below."""

    name = "add_positions"
    fresh_grads = True

    def infer(self, x: Spec, table: Spec) -> Spec:
        require_same_dtype(x=x, table=table)
        if x.ndim != 3 or table.ndim != 2:
            raise ValueError(
                f"needs x (N, T, d) and a table (L, d), got {format_shape(x.shape)} and "
                f"{format_shape(table.shape)}"
            )
        t, (rows, d) = x.shape[1], table.shape
        if None not in (x.shape[2], d) and x.shape[2] != d:
            raise ValueError(f"x's last axis {x.shape[2]} is not the table's width {d}")
        if None not in (t, rows) and t > rows:  # type: ignore[operator]
            raise ValueError(
                f"sequences of {t} positions are longer than the table's {rows} (max_length)"
            )
        self.table_shape = table.shape
        return Spec(x.shape, x.dtype)

    def forward(self, xp: ArrayNamespace, x: Any, table: Any) -> Any:
        return xp.add(x, table[: int(x.shape[1])])

    def backward(
        self, xp: ArrayNamespace, dy: Any, inputs: Inputs, output: Any, residual: Any, needs: Needs
    ) -> Grads:
        dtable = None
        if needs[1]:
            rows, d = (int(s) for s in self.table_shape)  # type: ignore[arg-type]
            part = xp.sum(dy, axis=0)
            t = int(part.shape[0])
            rest = xp.zeros((rows - t, d), dtype=dy.dtype)
            dtable = part if t == rows else xp.concat([part, rest], axis=0)
        return (dy if needs[0] else None), dtable


def add_positions(x: Any, table: Any) -> Expr:
    """``x + table[:T]`` for ``x (N, T, d)`` and ``table (L, d)``, ``T`` known or not until a
    plan runs (:class:`AddPositions`)."""
    x = as_expr(x)
    return AddPositions()(x, as_expr(table, x))
