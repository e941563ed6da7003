"""What RNN, LSTM and GRU share: unrolling a cell over the time axis of (N, T, features) input.

LSTM and GRU run as one op each (``nnlayers.ops.nn.recurrent``): the input projection of every
time step is one GEMM (``x @ weight + bias`` over ``(N*T, D)``), then the fused op runs the
recurrence, one recurrent GEMM and a few whole-block element-wise operations per step, forward
and backward. With ``fused=False`` (and for the plain :class:`RNN`) the loop is unrolled into the
graph instead, one node per operation per step, so the gradient through time comes from the
ops' own backward rules: slower, but every intermediate is a node you can inspect. The unrolled
form projects the whole sequence with one GEMM too and each step reads its slice ``[:, t]`` of
the projection; the plan adds the slices' gradients into one gradient of the projection (slice
accumulation, see ``nnlayers.graph.plan``), so the steps share one zero-filled array.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..expr.node import Expr, as_expr
from ..expr.spec import Spec, format_shape
from ..ops.array.join import stack
from ..ops.array.shape import expand_dims
from ..ops.math.comparison import where
from ..ops.nn.sequence import check_lengths, reverse_sequence, sequence_mask
from .base import Layer, float_dtype, known, require_ndim


class Recurrent(Layer):
    """Base of the recurrent layers (see :class:`RNN`, :class:`LSTM`, :class:`GRU`).

    Subclasses set ``gates`` (blocks of ``units`` in the projections) and implement
    :meth:`initial` and :meth:`step` (the unrolled form), and :meth:`sequence` where a fused op
    runs the whole recurrence. ``fused=False`` unrolls even then.
    """

    gates = 1

    def __init__(
        self,
        units: int,
        *,
        return_sequences: bool = False,
        return_state: bool = False,
        init: Any = "glorot_uniform",
        recurrent_init: Any = "orthogonal",
        bias_init: Any = "zeros",
        weight_decay: float | None = None,
        fused: bool = True,
        name: str | None = None,
        seed: int | None = None,
    ) -> None:
        super().__init__(name=name, seed=seed)
        if int(units) < 1:
            raise ValueError(f"{type(self).__name__}: units must be positive, got {units}")
        self.units = int(units)
        self.return_sequences = return_sequences
        self.return_state = return_state
        self.init = init
        self.recurrent_init = recurrent_init
        self.bias_init = bias_init
        self.weight_decay = weight_decay
        self.fused = bool(fused)
        self.state: Any = None

    def build(self, spec: Spec) -> None:
        require_ndim(self, spec, (3,), "(N, T, features)")
        (features,) = known(self, spec, (2,), "feature axis")
        dt = float_dtype(spec)
        width = self.gates * self.units
        decay = self.weight_decay
        self.add_param("weight", (features, width), self.init, dtype=dt, weight_decay=decay)
        self.add_param(
            "recurrent_weight",
            (self.units, width),
            self.recurrent_init,
            dtype=dt,
            weight_decay=decay,
        )
        self.add_param("bias", (width,), self.bias_init, dtype=dt, weight_decay=0.0)

    def forward(self, x: Expr, initial_state: Any = None, lengths: Any = None) -> Any:
        """Run over the sequence; the final state is kept in :attr:`state`.

        Returns the last output (N, units), or every output (N, T, units) with
        ``return_sequences``; with ``return_state`` a pair ``(output, state)``.

        ``lengths`` (N,) integers, an expression or an array, runs a right-padded batch of
        variable-length sequences, sequence ``n`` in ``x[n, :lengths[n]]`` (each at least 1):
        every sequence then gets what it would get alone. Outputs past a sequence's end are
        zero (PyTorch's ``pad_packed_sequence``), the last output and the final state are those
        of its last real step. Padding never changes an earlier step, so the fused op still
        runs and the last real step is gathered; only an LSTM asked for ``return_state`` runs
        the unrolled loop with the state held across the padding (the fused op keeps the last
        step's cell state alone), and without ``return_state`` its :attr:`state` is ``None``.
        """
        steps = x.shape[1]
        state = self.initial(initial_state)
        weight, bias = self._params["weight"], self._params["bias"]
        ids = None if lengths is None else self._lengths(x, lengths)
        if steps is None and ids is not None:
            raise ValueError(self._unknown_length(x, "lengths= (a padded batch)"))
        mask = None if ids is None else sequence_mask(ids, int(steps))  # type: ignore[arg-type]
        held = mask is not None and self.return_state and self.holds_state_in_loop
        last: Expr | None = None
        if self.fused and not held and type(self).layer is not Recurrent.layer:
            sequence, state = self.layer(x, state)
        elif self.fused and not held and type(self).sequence is not Recurrent.sequence:
            sequence, state = self.sequence(x @ weight + bias, state)
        elif steps is None and self.fused and type(self).any_length is not Recurrent.any_length:
            sequence, state = self.any_length(x @ weight + bias, state)
        elif steps is None:
            raise ValueError(self._unknown_length(x, "the unrolled loop"))
        else:
            outputs = []
            projection = x @ weight + bias  # (N, T, gates * units): one GEMM for every step
            for t in range(steps):
                output, new = self.step(projection[:, t], state)
                if mask is not None:  # past a sequence's end: the state stays, the output is 0
                    keep = mask[:, t : t + 1]
                    new = _hold(keep, new, state)
                    output = where(keep, output, as_expr(0.0, output))
                state = new
                outputs.append(output)
            sequence = stack(outputs, axis=1)
            ids = None  # the loop held the state: it is final, the outputs are masked
            last = outputs[-1] if mask is None else self.output_of(state)
        if ids is not None:  # a fused run over a padded batch: gather each last real step
            last = reverse_sequence(sequence, ids)[:, 0]
            state = self.state_from_last(last)
            sequence = where(expand_dims(mask, 2), sequence, as_expr(0.0, sequence))
        elif last is None:
            last = sequence[:, -1]
        result = sequence if self.return_sequences else last
        self.state = state
        return (result, state) if self.return_state else result

    def _unknown_length(self, x: Expr, what: str) -> str:
        """The error for an input whose time axis is unknown where ``what`` needs it."""
        cls = type(self)
        if what.startswith("lengths"):
            hint = ""
        elif (
            cls.layer is not Recurrent.layer
            or cls.sequence is not Recurrent.sequence
            or cls.any_length is not Recurrent.any_length
        ):
            hint = " or leave fused=True (the fused layer takes any length)"
        else:
            hint = " or use LSTM or GRU (their fused ops take any length)"
        return (
            f"{cls.__name__} {self.name!r}: {what} needs the time axis of its input to be "
            f"known, got shape {format_shape(x.shape)}; give the length in the input shape{hint}"
        )

    #: Whether the state has parts the outputs do not show (an LSTM's cell), so that a padded
    #: batch must hold the state through the loop to return it.
    holds_state_in_loop = False

    def state_from_last(self, last: Expr) -> Any:
        """The final state of a padded batch from each sequence's last real output."""
        return last

    def output_of(self, state: Any) -> Expr:
        """The output that goes with ``state`` (the hidden state itself for RNN and GRU)."""
        out: Expr = state
        return out

    def _lengths(self, x: Expr, lengths: Any) -> Expr:
        """``lengths`` as an expression, checked against the batch ``x``."""
        ids = lengths if isinstance(lengths, Expr) else as_expr(np.asarray(lengths))
        check_lengths(f"{type(self).__name__} {self.name!r}", x.spec, ids.spec)
        return ids

    def layer(self, x: Expr, state: Any) -> tuple[Expr, Any]:
        """The whole layer as one op: every output ``(N, T, units)`` and the final state, from the
        input ``(N, T, features)`` (subclasses whose backends run a fused layer kernel override
        it; it comes before :meth:`sequence`)."""
        raise NotImplementedError

    def sequence(self, projected: Expr, state: Any) -> tuple[Expr, Any]:
        """The fused recurrence: every output ``(N, T, units)`` and the final state, from the
        projection of the whole sequence ``(N, T, gates * units)`` (subclasses with a fused op
        override it)."""
        raise NotImplementedError

    def any_length(self, projected: Expr, state: Any) -> tuple[Expr, Any]:
        """The recurrence as one op for a sequence whose length is known only in each plan,
        where the layer otherwise unrolls its loop (subclasses that have one override it)."""
        raise NotImplementedError

    def initial(self, initial_state: Any) -> Any:
        """The state before the first step (``None`` entries: zeros, folded away)."""
        if initial_state is None:
            return None
        h = as_expr(initial_state)
        self._check_state(h, "initial_state")
        return h

    def _check_state(self, h: Expr, what: str) -> None:
        if h.ndim != 2 or h.shape[1] != self.units:
            raise ValueError(
                f"{type(self).__name__} {self.name!r}: {what} must have shape (N, {self.units}), "
                f"got {format_shape(h.shape)}"
            )

    def recur(self, h: Expr | None, block: slice | None = None) -> Expr | None:
        """``h @ recurrent_weight`` (one block of it), or ``None`` while the state is zero."""
        if h is None:
            return None
        u = self._params["recurrent_weight"]
        return h @ (u if block is None else u[:, block])

    def block(self, z: Expr, k: int) -> Expr:
        """Gate block ``k`` (columns ``k*units : (k+1)*units``) of a projection ``z``."""
        return z[:, k * self.units : (k + 1) * self.units]

    def step(self, projected: Expr, state: Any) -> tuple[Expr, Any]:
        """One time step: ``(output, new state)`` from ``x_t @ weight + bias`` and the state."""
        raise NotImplementedError

    def config(self) -> dict[str, Any]:
        return {
            "units": self.units,
            "return_sequences": self.return_sequences,
            "return_state": self.return_state,
            "name": self.name,
        }


def _hold(keep: Expr, new: Any, old: Any) -> Any:
    """``new`` where ``keep`` (N, 1) holds, else ``old`` (zeros where ``old`` is ``None``), for
    a state that is one array or a tuple of them."""
    if isinstance(new, tuple):
        olds = (None,) * len(new) if old is None else old
        return tuple(_hold(keep, n, o) for n, o in zip(new, olds, strict=True))
    return where(keep, new, as_expr(0.0, new) if old is None else old)
