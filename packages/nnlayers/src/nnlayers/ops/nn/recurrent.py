"""Recurrent layers as single ops: ``lstm`` (a whole LSTM layer) and ``gru_sequence``.

``lstm(x, weight, recurrent_weight, bias, h0, c0)`` is one backend kernel pair,
``xp.nn.lstm`` / ``xp.nn.lstm_backward`` (input projection, recurrence and every gradient):
oneDNN's LSTM primitive on the NumPy backend where ``arraycore[onednn]`` is installed, arraycore's
reference (:mod:`arraycore._nn_rnn`: one GEMM for the projection, per step one GEMM and
whole-block element-wise updates) on every other backend. Its gates are the blocks ``i, f, g, o``
of the ``4H`` columns, as in PyTorch and cuDNN::

    i, f, o = sigmoid(z_i), sigmoid(z_f), sigmoid(z_o)    g = tanh(z_g)    z = x_t @ W + h @ U + b
    c_t = f * c_{t-1} + i * g                               h_t = o * tanh(c_t)

``gru_sequence`` takes the input projection of every time step at once (``xw = x @ weight +
bias``, one GEMM over ``(N*T, D)`` made by the caller) and runs the recurrence inside one op:
per time step one GEMM with the recurrent weight and a handful of whole-block element-wise
operations, forward and backward, so the graph holds one node per layer instead of a dozen per
time step, and the weight gradient is one large GEMM over all steps. Everything goes through the
arraycore namespace (matmul, ``tanh``, the array operators and ``__setitem__``), so every
backend runs it; in-place operators are used only on arrays the op made, never on views (whether
a slice is a view is up to the backend). GRU gates are ``r, u, n`` (``u`` is PyTorch's ``z``),
with the recurrent bias inside the reset product (``reset_after``)::

    r = sigmoid(xw_r + h @ U_r + b_r)    u = sigmoid(xw_u + h @ U_u + b_u)
    n = tanh(xw_n + r * (h @ U_n + b_n))  h_t = (1 - u) * n + u * h_{t-1}

The sigmoid blocks are computed as ``0.5 * tanh(0.5 z) + 0.5`` on the whole gate matrix at once
(a per-column scale turns the tanh block into ``tanh(z)``): four passes for all gates of a step.
"""

from __future__ import annotations

from typing import Any

from arraycore import ArrayNamespace

from ...expr.node import Expr, as_expr
from ...expr.spec import Spec, format_shape
from ..base import Grads, Inputs, Needs, Op, require_float, require_same_dtype


def _check_sequence(op: str, gates: int, xw: Spec, u: Spec, state: tuple[Spec, ...]) -> int:
    """The hidden size ``H`` from ``xw (N, T, gates*H)`` and ``U (H, gates*H)``; the state
    (``(N, H)`` each) must match."""
    require_float(op, xw, u, *state)
    require_same_dtype(xw=xw, U=u, **{f"state{i}": s for i, s in enumerate(state)})
    if xw.ndim != 3 or u.ndim != 2:
        raise ValueError(
            f"{op}: needs xw (N, T, {gates}*H) and U (H, {gates}*H), got "
            f"{format_shape(xw.shape)} and {format_shape(u.shape)}"
        )
    hidden = u.shape[0]
    if hidden is None or u.shape[1] != gates * hidden:
        raise ValueError(f"{op}: U must be (H, {gates}*H), got {format_shape(u.shape)}")
    if xw.shape[2] is not None and xw.shape[2] != gates * hidden:
        raise ValueError(
            f"{op}: xw's last axis must be {gates}*H = {gates * hidden}, got "
            f"{format_shape(xw.shape)}"
        )
    if xw.shape[1] is not None and xw.shape[1] < 1:
        raise ValueError(f"{op}: the time axis must be non-empty, got {xw.shape[1]}")
    for s in state:
        if (
            s.ndim != 2
            or s.shape[1] != hidden
            or (None not in (s.shape[0], xw.shape[0]) and s.shape[0] != xw.shape[0])
        ):
            raise ValueError(
                f"{op}: the initial state must be (N, {hidden}) with xw's N, got "
                f"{format_shape(s.shape)} for xw {format_shape(xw.shape)}"
            )
    return int(hidden)


class GRUSequence(Op):
    """The GRU recurrence over projected inputs ``xw (N, T, 3H)`` with recurrent weight
    ``U (H, 3H)``, recurrent bias ``b (3H,)`` and optionally the initial ``h0 (N, H)``, as one
    backend kernel pair (``xp.nn.gru_sequence`` / ``gru_sequence_backward``: one kernel per
    time step each way on the device backends, arraycore's reference elsewhere).

    The output ``(N, T, H)`` holds every step's hidden state; the residual is what the
    backend's backward pass needs.
    """

    name = "gru_sequence"
    has_residual = True
    keep_output = True
    keep_inputs = (1,)
    fresh_grads = True

    def infer(self, xw: Spec, u: Spec, b: Spec, *state: Spec) -> Spec:
        if len(state) > 1:
            raise ValueError(f"{self.name}: one initial state h0 at most, got {len(state)}")
        hidden = _check_sequence(self.name, 3, xw, u, state)
        require_same_dtype(xw=xw, b=b)
        if b.shape != (3 * hidden,):
            raise ValueError(
                f"{self.name}: the recurrent bias must be ({3 * hidden},), got "
                f"{format_shape(b.shape)}"
            )
        return Spec((xw.shape[0], xw.shape[1], hidden), xw.dtype)

    def forward(self, xp: ArrayNamespace, xw: Any, u: Any, b: Any, *state: Any) -> Any:
        return xp.nn.gru_sequence(xw, u, b, state[0] if state else None)

    def backward(
        self, xp: ArrayNamespace, dy: Any, inputs: Inputs, output: Any, residual: Any, needs: Needs
    ) -> Grads:
        has_state = len(needs) == 4
        h0 = inputs[3] if has_state else None
        dxw, du, db, dh0 = xp.nn.gru_sequence_backward(dy, inputs[1], h0, output, residual)
        grads = (dxw if needs[0] else None, du if needs[1] else None, db if needs[2] else None)
        return (*grads, dh0 if needs[3] else None) if has_state else grads

    def kept_inputs(self, needs: tuple[bool, ...], n_inputs: int) -> tuple[int, ...]:
        return (1, 3) if n_inputs == 4 else (1,)


class LSTMLayer(Op):
    """A whole LSTM layer over ``x (N, T, C)``: input projection ``x @ w + b`` (``w (C, 4H)``,
    ``b (4H,)``), recurrence with ``u (H, 4H)`` from ``h0, c0 (N, H)`` (zero without them), as
    one backend kernel pair (``xp.nn.lstm`` / ``lstm_backward``: oneDNN's LSTM primitive on the
    NumPy backend where installed, the reference elsewhere).

    Its output is packed, ``(N*T + N, H)``: the first ``N*T`` rows are every step's hidden state,
    ``(N, T, H)`` in C order, and the last ``N`` rows the last cell state. :class:`LSTMPart`
    views either part without a copy, so the hidden states reach the next product contiguous
    (an ``(N, T + 1, H)`` layout made them a strided slice, copied by each product that read
    them: the LSTM benchmark's step 4% slower); the residual is what the backend's backward pass
    needs.
    """

    name = "lstm"
    has_residual = True
    keep_inputs = True
    keep_output = True  # its hidden part is the states the backward pass reads
    fresh_grads = True

    def infer(self, x: Spec, w: Spec, u: Spec, b: Spec, *state: Spec) -> Spec:
        if len(state) not in (0, 2):
            raise ValueError(f"{self.name}: give both h0 and c0 or neither, got {len(state)}")
        require_float(self.name, x, w, u, b, *state)
        require_same_dtype(x=x, w=w, u=u, b=b, **{f"state{i}": s for i, s in enumerate(state)})
        if x.ndim != 3 or w.ndim != 2 or b.ndim != 1:
            raise ValueError(
                f"{self.name}: needs x (N, T, C), w (C, 4H), u (H, 4H), b (4H,), got x "
                f"{format_shape(x.shape)}, w {format_shape(w.shape)}, b {format_shape(b.shape)}"
            )
        hidden = _check_sequence(
            self.name, 4, Spec((x.shape[0], x.shape[1], w.shape[1]), x.dtype), u, state
        )
        if w.shape[0] is not None and x.shape[2] is not None and w.shape[0] != x.shape[2]:
            raise ValueError(
                f"{self.name}: w must be ({x.shape[2]}, {4 * hidden}) for x "
                f"{format_shape(x.shape)}, got {format_shape(w.shape)}"
            )
        if b.shape[0] is not None and b.shape[0] != 4 * hidden:
            raise ValueError(f"{self.name}: b must be ({4 * hidden},), got {format_shape(b.shape)}")
        n, steps = x.shape[0], x.shape[1]
        rows = None if n is None or steps is None else n * (steps + 1)
        return Spec((rows, hidden), x.dtype)

    def forward(self, xp: ArrayNamespace, x: Any, w: Any, u: Any, b: Any, *state: Any) -> Any:
        h0, c0 = state if state else (None, None)
        y, _h_n, c_n, saved = xp.nn.lstm(x, w, u, b, h0, c0)
        n, steps, hidden = (int(s) for s in y.shape)
        return xp.concat([xp.reshape(y, (n * steps, hidden)), c_n], axis=0), saved

    def backward(
        self, xp: ArrayNamespace, dy: Any, inputs: Inputs, output: Any, residual: Any, needs: Needs
    ) -> Grads:
        x, w, u, b, *state = inputs
        h0, c0 = state if state else (None, None)
        n, steps = int(x.shape[0]), int(x.shape[1])
        hidden = int(output.shape[1])
        rows = n * steps
        y = xp.reshape(output[:rows], (n, steps, hidden))
        dys = xp.reshape(dy[:rows], (n, steps, hidden))
        grads = xp.nn.lstm_backward(dys, None, dy[rows:], x, w, u, b, h0, c0, y, residual)
        dx, dw, du, db, dh0, dc0 = grads
        return (dx, dw, du, db) if not state else (dx, dw, du, db, dh0, dc0)


class LSTMSequence(LSTMLayer):
    """:class:`LSTMLayer` whose output is every step's hidden state alone, ``(N, T, H)``, as
    ``xp.nn.lstm`` gives it: what a plan runs where the layer's only reader is its hidden part
    (:func:`nnlayers.graph.fusion.fuse`), so that neither pass copies the states into or out of
    the packed array (a 32x32x128 LSTM: two copies of 0.5 MB a step, ~0.1 ms)."""

    plan_only = True

    def forward(self, xp: ArrayNamespace, x: Any, w: Any, u: Any, b: Any, *state: Any) -> Any:
        h0, c0 = state if state else (None, None)
        y, _h_n, _c_n, saved = xp.nn.lstm(x, w, u, b, h0, c0)
        return y, saved

    def backward(
        self, xp: ArrayNamespace, dy: Any, inputs: Inputs, output: Any, residual: Any, needs: Needs
    ) -> Grads:
        x, w, u, b, *state = inputs
        h0, c0 = state if state else (None, None)
        grads = xp.nn.lstm_backward(dy, None, None, x, w, u, b, h0, c0, output, residual)
        dx, dw, du, db, dh0, dc0 = grads
        return (dx, dw, du, db) if not state else (dx, dw, du, db, dh0, dc0)


class LSTMPart(Op):
    """One part of :class:`LSTMLayer`'s packed output, as a view: ``"hidden"``, every step's
    hidden state ``(N, T, H)``, or ``"cell"``, the last cell state ``(N, H)``. The gradient is
    ``dy`` joined with zeros for the other part, or added into the part of a gradient the plan
    already holds (:meth:`accumulate_grad`: both parts read, one array).

    Where the sequence length is unknown when the graph is built (``steps=None``), the layer's
    input ``x`` is a second input, read for its length alone (no gradient flows to it), so
    that each plan learns the length from its concrete shapes."""

    name = "lstm_part"
    fresh_grads = True
    nondiff_inputs = (1,)  # the LSTM's input, read for its length

    def __init__(self, part: str, steps: int | None) -> None:
        if part not in ("hidden", "cell"):
            raise ValueError(f"lstm_part: part must be 'hidden' or 'cell', got {part!r}")
        self.part, self.steps = part, steps

    def infer(self, packed: Spec, *like: Spec) -> Spec:
        if like:  # the length from the LSTM's input: known in every plan
            self.steps = like[0].shape[1]
        rows, hidden = packed.shape
        steps = self.steps
        n = None if rows is None or steps is None else rows // (steps + 1)
        shape = (n, steps, hidden) if self.part == "hidden" else (n, hidden)
        return Spec(shape, packed.dtype)

    def _steps(self) -> int:
        """The length, known in every plan (from the second input where it was not before)."""
        assert self.steps is not None, "lstm_part: the length is known once a plan infers it"
        return self.steps

    def _rows(self, packed_rows: int) -> slice:
        """This part's rows of a packed array of ``packed_rows`` rows."""
        steps = self._steps()
        hidden_rows = packed_rows // (steps + 1) * steps
        return slice(hidden_rows, None) if self.part == "cell" else slice(0, hidden_rows)

    def forward(self, xp: ArrayNamespace, packed: Any, *like: Any) -> Any:
        rows, hidden = (int(s) for s in packed.shape)
        part = packed[self._rows(rows)]
        if self.part == "cell":
            return part
        steps = self._steps()
        return xp.reshape(part, (rows // (steps + 1), steps, hidden))

    def kept_inputs(self, needs: Needs, n_inputs: int) -> tuple[int, ...]:
        return ()

    def backward(
        self, xp: ArrayNamespace, dy: Any, inputs: Inputs, output: Any, residual: Any, needs: Needs
    ) -> Grads:
        # dy and zeros for the other part, one copy (not a zero-filled packed array and an add)
        n, hidden = int(dy.shape[0]), int(dy.shape[-1])
        rows = n * self._steps()
        if self.part == "cell":
            grad = xp.concat([xp.zeros((rows, hidden), dtype=dy.dtype), dy], axis=0)
            return (grad, None) if len(needs) == 2 else (grad,)
        other = xp.zeros((n, hidden), dtype=dy.dtype)
        grad = xp.concat([xp.reshape(dy, (rows, hidden)), other], axis=0)
        return (grad, None) if len(needs) == 2 else (grad,)

    def accumulate_grad(self, xp: ArrayNamespace, acc: Any, dy: Any) -> None:
        """Add ``dy`` into this part of ``acc`` (the packed gradient) in place."""
        key = self._rows(int(acc.shape[0]))
        part = acc[key]
        part = xp.inplace.add(part, xp.reshape(dy, tuple(part.shape)), out=part)
        acc[key] = part  # a no-op where basic indexing gives a view


def lstm_parts(
    x: Any, weight: Any, recurrent_weight: Any, bias: Any, h0: Any = None, c0: Any = None
) -> tuple[Expr, Expr]:
    """A whole LSTM layer over ``x (N, T, C)`` as one op: ``(hidden, cell)``, every step's
    hidden state ``(N, T, H)`` and the last cell state ``(N, H)`` (views of the op's packed
    output, see :class:`LSTMLayer`)."""
    if (h0 is None) != (c0 is None):
        raise ValueError("lstm: give both h0 and c0 or neither")
    x = as_expr(x)
    state = () if h0 is None else (as_expr(h0, x), as_expr(c0, x))
    packed = LSTMLayer()(
        x, as_expr(weight, x), as_expr(recurrent_weight, x), as_expr(bias, x), *state
    )
    steps = x.shape[1]
    like = () if steps is not None else (x,)  # an unknown length: read from x in each plan
    return LSTMPart("hidden", steps)(packed, *like), LSTMPart("cell", steps)(packed, *like)


def lstm(
    x: Any, weight: Any, recurrent_weight: Any, bias: Any, h0: Any = None, c0: Any = None
) -> Expr:
    """A whole LSTM layer over ``x (N, T, C)``: ``(N, T + 1, H)``, every step's hidden state in
    ``[:, :T]`` and the last cell state in ``[:, T]`` (one op, :class:`LSTMLayer`; the LSTM
    layer takes :func:`lstm_parts`, which skips this concatenation)."""
    from ..array.join import concat
    from ..array.shape import expand_dims

    hidden, cell = lstm_parts(x, weight, recurrent_weight, bias, h0, c0)
    return concat([hidden, expand_dims(cell, 1)], axis=1)


def gru_sequence(xw: Any, recurrent_weight: Any, recurrent_bias: Any, h0: Any = None) -> Expr:
    """Every hidden state of a GRU over the projected inputs ``xw (N, T, 3H)``: ``(N, T, H)``
    (see the module docstring)."""
    xw = as_expr(xw)
    state = () if h0 is None else (as_expr(h0, xw),)
    return GRUSequence()(xw, as_expr(recurrent_weight, xw), as_expr(recurrent_bias, xw), *state)


#: The derivative of each activation :class:`RNNSequence` takes, from its output ``h``.
_RNN_DERIVATIVES = {
    "tanh": lambda xp, h: xp.subtract(1.0, xp.multiply(h, h)),
    "relu": lambda xp, h: xp.astype(xp.greater(h, 0.0), h.dtype),
    "sigmoid": lambda xp, h: xp.multiply(h, xp.subtract(1.0, h)),
}


class RNNSequence(Op):
    """The plain (Elman) recurrence ``h_t = act(xw_t + h_{t-1} @ U)`` over projected inputs
    ``xw (N, T, H)`` with ``U (H, H)`` and optionally ``h0 (N, H)``, as one op: what the
    :class:`~nnlayers.layers.RNN` layer runs where the sequence length is known only in each
    plan (for a known length it unrolls the loop into the graph). ``activation`` is ``tanh``,
    ``relu`` or ``sigmoid`` (their derivatives come from the outputs). Everything goes through
    the arraycore namespace; the weight's gradient is one GEMM over every step."""

    name = "rnn_sequence"
    keep_output = True
    keep_inputs = (1,)
    fresh_grads = True

    def __init__(self, activation: str) -> None:
        if activation not in _RNN_DERIVATIVES:
            raise ValueError(
                f"rnn_sequence: activation must be one of {sorted(_RNN_DERIVATIVES)}, got "
                f"{activation!r}"
            )
        self.activation = activation

    def infer(self, xw: Spec, u: Spec, *state: Spec) -> Spec:
        if len(state) > 1:
            raise ValueError(f"{self.name}: one initial state h0 at most, got {len(state)}")
        hidden = _check_sequence(self.name, 1, xw, u, state)
        return Spec((xw.shape[0], xw.shape[1], hidden), xw.dtype)

    def _act(self, xp: ArrayNamespace, z: Any) -> Any:
        if self.activation == "tanh":
            return xp.tanh(z)
        if self.activation == "relu":
            return xp.maximum(z, xp.zeros_like(z))
        return xp.divide(1.0, xp.add(1.0, xp.exp(xp.negative(z))))

    def forward(self, xp: ArrayNamespace, xw: Any, u: Any, *state: Any) -> Any:
        h = state[0] if state else None
        outputs = []
        for t in range(int(xw.shape[1])):
            z = xw[:, t] if h is None else xp.add(xw[:, t], xp.matmul(h, u))
            h = self._act(xp, z)
            outputs.append(h)
        return xp.stack(outputs, axis=1)

    def kept_inputs(self, needs: tuple[bool, ...], n_inputs: int) -> tuple[int, ...]:
        return (1, 2) if n_inputs == 3 else (1,)

    def backward(
        self, xp: ArrayNamespace, dy: Any, inputs: Inputs, output: Any, residual: Any, needs: Needs
    ) -> Grads:
        u = inputs[1]
        h0 = inputs[2] if len(needs) == 3 else None
        _, steps, hidden = (int(s) for s in output.shape)
        derivative = _RNN_DERIVATIVES[self.activation]
        ut = xp.matrix_transpose(u)
        dzs: list[Any] = [None] * steps
        carried = None  # dL/dh_t from step t + 1
        for t in reversed(range(steps)):
            g = dy[:, t] if carried is None else xp.add(dy[:, t], carried)
            dz = xp.multiply(g, derivative(xp, output[:, t]))
            dzs[t] = dz
            if t > 0 or h0 is not None:
                carried = xp.matmul(dz, ut)
        dxw = xp.stack(dzs, axis=1)
        du = None
        if needs[1]:
            # every step's previous state beside its dz: one (H, N*T') @ (N*T', H) product
            first = 0 if h0 is not None else 1
            previous = [h0] if h0 is not None else []
            previous += [output[:, t] for t in range(steps - 1)]
            if previous:
                prev = xp.reshape(xp.stack(previous, axis=1), (-1, hidden))
                dz_all = xp.reshape(dxw[:, first:], (-1, hidden))
                du = xp.matmul(xp.matrix_transpose(prev), dz_all)
            else:  # one step from a zero state: the weight is never read
                du = xp.zeros((hidden, hidden), dtype=output.dtype)
        grads = (dxw if needs[0] else None, du)
        return (*grads, carried if needs[2] else None) if h0 is not None else grads


def rnn_sequence(xw: Any, recurrent_weight: Any, h0: Any = None, activation: str = "tanh") -> Expr:
    """Every hidden state of a plain RNN over the projected inputs ``xw (N, T, H)``:
    ``(N, T, H)`` (:class:`RNNSequence`)."""
    xw = as_expr(xw)
    state = () if h0 is None else (as_expr(h0, xw),)
    return RNNSequence(activation)(xw, as_expr(recurrent_weight, xw), *state)
