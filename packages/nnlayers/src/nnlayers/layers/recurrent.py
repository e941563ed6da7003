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

from ..expr.node import Expr, as_expr
from ..expr.spec import Spec, format_shape
from ..ops.array.join import stack
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
        known(self, spec, (1,), "time axis (sequence length)")
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

    def forward(self, x: Expr, initial_state: Any = None) -> Any:
        """Run over the sequence; the final state is kept in :attr:`state`.

        Returns the last output (N, units), or every output (N, T, units) with
        ``return_sequences``; with ``return_state`` a pair ``(output, state)``.
        """
        steps = x.shape[1]
        state = self.initial(initial_state)
        weight, bias = self._params["weight"], self._params["bias"]
        result: Expr
        if self.fused and type(self).layer is not Recurrent.layer:
            sequence, state = self.layer(x, state)
            result = sequence if self.return_sequences else sequence[:, -1]
        elif self.fused and type(self).sequence is not Recurrent.sequence:
            sequence, state = self.sequence(x @ weight + bias, state)
            result = sequence if self.return_sequences else sequence[:, -1]
        else:
            outputs = []
            projection = x @ weight + bias  # (N, T, gates * units): one GEMM for every step
            for t in range(steps):  # type: ignore[arg-type]
                output, state = self.step(projection[:, t], state)
                outputs.append(output)
            result = stack(outputs, axis=1) if self.return_sequences else outputs[-1]
        self.state = state
        return (result, state) if self.return_state else result

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
