"""The static memory plan of a compiled :class:`~nnlayers.graph.plan.Plan`: the bytes one step
holds, step by step, worked out from the plan before anything runs.

>>> import numpy as np, nnlayers, nnlayers.expr as ex
>>> x = ex.placeholder((None, 256), name="x")
>>> w = nnlayers.Parameter(np.zeros((256, 512), np.float32), name="w")
>>> graph = nnlayers.compile(ex.mean(ex.square(x @ w)))
>>> plan = graph.memory_plan(batch_size=64)  # training step: forward, then backward
>>> plan.peak_bytes, plan.parameter_bytes, plan.input_bytes, plan.gradient_bytes
(655364, 524288, 65540, 524288)
>>> print(plan.table())
step                         made        high  live after
---------------------------------------------------------
forward of matmul #2   128.00 KiB  128.00 KiB  128.00 KiB
forward of square #3   128.00 KiB  256.00 KiB  256.00 KiB
forward of mean #4            4 B  256.00 KiB  128.00 KiB
backward of mean #4           4 B  128.01 KiB  128.01 KiB
backward of square #3  128.00 KiB  256.01 KiB  128.01 KiB
backward of matmul #2  512.00 KiB  640.00 KiB  640.00 KiB  <- peak
gradients handed back         0 B  640.00 KiB  512.00 KiB

The product is kept for the square's backward; the square is dropped once the mean has read
it; at the peak the square's gradient (128 KiB) and the weight's (512 KiB) are live with the
loss. ``print(plan)`` says the same in one paragraph.

The plan is simulated as the step runs it (``Plan.source`` shows the code): every array the
step makes is a buffer of its spec's bytes (shape times item size), held by the slots, the
residuals, the gradients and the generated code's locals that refer to it, and released when
the last of them lets go. What that takes into account, exactly as the plan does it:

- node outputs, freed after their last reader in forward, or in backward where backward reads
  them (``keep_inputs``, ``keep_output``); the outputs of the graph, which the step hands back;
- in-place ops (``forward_inplace`` into a donor input, :meth:`Plan._donor`): no new bytes;
- views and aliases: a reshape of a contiguous array, ``permute_dims``, ``broadcast_to``, basic
  slices, ``stop_gradient``, dropout outside training, the fusions' :class:`Alias` nodes: no new
  bytes, and the viewed buffer lives as long as its views do;
- residuals: what each built-in op keeps for backward beyond its inputs and output (batch-norm
  statistics, dropout masks, the cross-entropy's gradient, layer-norm statistics), freed at the
  op's backward step; an op that is not built in may say how many bytes with a
  ``residual_bytes(*input_specs) -> int | None`` method;
- gradients: each op's gradient arrays (new arrays for ``fresh_grads`` ops; ``dy`` itself or a
  view of it for identities, reshapes, adds without broadcasting, sums), accumulation at
  fan-out (the second contribution adds into a new array, later ones in place), casts, the
  copies the plan makes of ``wrt`` gradients that might share memory, and the generated code's
  ``dy`` and ``gs`` locals, which hold the last step's arrays until the next step replaces them.

What is not known from the specs, and so not counted:

- residuals no rule covers: the LSTM's and GRU's saved workspaces and attention's saved
  log-sum-exp rows or probabilities (each backend chooses its own); they are counted as 0 and
  named in :attr:`MemoryPlan.unknown_residuals`, never left out silently;
- temporaries inside a kernel or a backend's function: a convolution's im2col columns, the
  partial sums of a reduction, a dense copy a kernel makes of a strided or broadcast operand,
  GEMM packing; they come and go within one step and raise the measured peak above the plan.
  (Temporaries of an op's own composition are counted where the op is built in and they are
  large: batch norm with running statistics makes two arrays of its input's size on the way.)
- allocator rounding and minimum sizes (OpenCL's pool hands out at least 8 bytes; CuPy rounds
  to 512), and memory outside the plan: the optimiser's update, state and scratch, feeds copied
  to the device during the step, the previous step's gradients where the caller keeps them
  through the next forward pass (``Model.train_step`` drops them first, as PyTorch's
  ``zero_grad`` does; the plan assumes that).

Measured against the OpenCL backend's own count (``memory_stats()["peak_bytes"]`` after
``reset_memory_stats()``, less the bytes live before the step; its pool counts the bytes each
live array asked for), one step of ``Graph.forward`` (then ``Graph.backward``) gives, as
measured / planned peak, training and evaluation (PoCL, float32; the tests in
``tests/graph/test_memory_plan.py`` hold each to its bound):

- an MLP (256-512-10 with dropout, batch 64): 1.000 and 1.000, every byte accounted for (but
  the pool's 8-byte minimum for the 0-d loss and metric);
- the tests' fan-out graph (three contributions to one gradient): 1.000 and 1.000;
- the tests' views (reshapes, a slice, a transpose, a reshape that copies): 1.000 and 1.000;
- the tests' in-place chain ``sum(relu(tanh(x @ w) + b))``: 1.33 and 1.002: in training
  OpenCL's ``relu_backward`` makes a dense copy of its ``dy``, the sum's gradient (a broadcast
  view of the scalar seed), one array of the layer's size; in evaluation the sum's partials;
- a batch-norm conv net (two 3x3 convolutions with batch norm, ReLU and pooling, an affine
  head, batch 16): 1.84 and 1.000: in training the convolutions' backward-filter kernels make
  the im2col columns of their input (``C * 9`` values per output pixel) and a contiguous copy
  of their transpose, a kernel workspace no spec shows (cuDNN and oneDNN choose their own);
- an LSTM classifier (32 units, 12 steps, batch 16): 4.9 in training, 12 in evaluation: the
  backend's saved gates and states (``xp.nn.lstm``'s workspace, named in
  :attr:`MemoryPlan.unknown_residuals`) and its step kernels' temporaries.

On CUDA ``memory_stats()["peak_bytes"]`` is what CuPy's pool holds (blocks rounded to 512 bytes,
cached free blocks it split, cuDNN's workspaces), an upper bound on the live peak, so a ratio
against it is an upper bound too (an exact one needs a ``cupy.cuda.MemoryHook``, as
``benchmarks/bench_training.py`` uses); not measured in this module's tests, which need no GPU.

Nothing here runs in a step: :func:`memory_plan` walks the plan's step lists when asked
(``Plan.memory_plan``, ``Graph.memory_plan``, ``nnlayers.summary(model, batch_size=...)``,
``Profile.memory``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..expr.spec import Spec
from ..ops.array.indexing import GetItem
from ..ops.array.join import Concat, Pad
from ..ops.array.shape import BroadcastTo, PermuteDims, Reshape
from ..ops.control import Alias, StopGradient
from ..ops.loss.cross_entropy import SoftmaxCrossEntropy
from ..ops.math.arithmetic import Add, Subtract
from ..ops.math.comparison import Astype, Clip
from ..ops.math.reduction import Mean, Sum
from ..ops.nn.attention import ScaledDotProductAttention
from ..ops.nn.dropout import Dropout
from ..ops.nn.normalization import BatchNorm, LayerNorm
from ..ops.nn.recurrent import GRUSequence, LSTMLayer, LSTMPart
from ..ops.nn.sequence import ReverseSequence
from .plan import ADD, ADD_SLICE, ASSIGN, Plan

__all__ = ["MemoryPlan", "MemoryStep", "PlannedBuffer", "format_bytes", "memory_plan"]

#: The kinds of bytes a step makes, as :attr:`MemoryPlan.peak_by_kind` counts them.
KINDS = ("activation", "residual", "gradient", "temporary")


@dataclass(frozen=True)
class MemoryStep:
    """One step of the plan (a forward or backward call of one node's op), or ``gradients``:
    the ``wrt`` gradients the plan hands back at the end of backward."""

    phase: str
    """``"forward"``, ``"backward"`` or ``"gradients"``."""
    node: int
    """The node (the plan's slot) the step computes; -1 for ``gradients``."""
    op: str
    """The plan's op at that node (a fused one where the plan fused)."""
    allocated_bytes: int
    """Bytes of the new arrays the step makes (outputs, residuals, gradients)."""
    peak_bytes: int
    """The step's bytes live at its highest point (after its allocations, before it lets go)."""
    live_bytes: int
    """The step's bytes live once it has let go of what nothing reads any more."""

    @property
    def label(self) -> str:
        """``backward of matmul #2``."""
        return (
            "gradients handed back" if self.node < 0 else f"{self.phase} of {self.op} #{self.node}"
        )


@dataclass(frozen=True)
class PlannedBuffer:
    """An array the step makes: its bytes and the steps it lives through (what an arena, one
    block laid out in advance, would give an offset)."""

    nbytes: int
    kind: str
    """``"activation"`` (a forward output), ``"residual"`` (kept by an op for its backward),
    ``"gradient"``, or ``"temporary"`` (made and dropped inside one op's step)."""
    label: str
    """What it is: ``output of relu #4``, ``residual of batch_norm #7``, ``gradient of #3``."""
    first: int
    """The index in :attr:`MemoryPlan.steps` of the step that makes it."""
    last: int | None
    """The index of the step during which it is released; ``None`` when the step hands it back
    (the graph's outputs, the ``wrt`` gradients)."""


@dataclass(frozen=True)
class MemoryPlan:
    """The bytes one step of a plan holds, worked out from the plan (see the module docstring).

    :attr:`peak_bytes` leaves out the arrays the step does not make (parameters, feeds,
    constants), which are reported beside it, as PyTorch's memory accounting separates
    parameters, inputs, activations and gradients.
    """

    train: bool
    """Whether this is the training step (train phase, forward keeping what backward reads,
    then backward) or the evaluation step (eval phase, forward only)."""
    steps: tuple[MemoryStep, ...]
    """The timeline: one entry per plan step, in the order they run."""
    buffers: tuple[PlannedBuffer, ...]
    """Every array the step makes, in the order it makes them."""
    peak_bytes: int
    """The most bytes of the step's own arrays live at once (activations, residuals and
    gradients; parameters and inputs excluded)."""
    peak_step: int
    """The index in :attr:`steps` of the step where the peak falls (-1 for an empty plan)."""
    peak_by_kind: dict[str, int]
    """The peak split by kind (``activation``, ``residual``, ``gradient``, ``temporary``); sums
    to :attr:`peak_bytes`."""
    forward_peak_bytes: int
    """The peak of the forward steps alone."""
    saved_bytes: int
    """Bytes live when forward has finished: in training what backward needs (plus the graph's
    outputs); in evaluation, the outputs."""
    end_bytes: int
    """Bytes the step leaves live: its outputs, and in training the ``wrt`` gradients."""
    parameter_bytes: int
    """Bytes of the parameters the plan reads (trainable or not): held before and after."""
    input_bytes: int
    """Bytes of the feeds and constants (and the backward seed): held before and after."""
    gradient_bytes: int
    """Bytes of the ``wrt`` gradients the training step hands back (0 in evaluation)."""
    unknown_residuals: tuple[str, ...]
    """Residuals whose size the specs do not tell (counted as 0): ``"lstm #5: ..."``."""

    @property
    def total_peak_bytes(self) -> int:
        """:attr:`peak_bytes` with the parameters and inputs, which are live throughout."""
        return self.peak_bytes + self.parameter_bytes + self.input_bytes

    @property
    def peak_at(self) -> str:
        """The step of the peak, in words (``backward of matmul #2``)."""
        return self.steps[self.peak_step].label if self.steps else "nothing runs"

    def __str__(self) -> str:
        kinds = self.peak_by_kind
        what = "training step" if self.train else "evaluation step"
        text = (
            f"{what}: peak {format_bytes(self.peak_bytes)} (activations "
            f"{format_bytes(kinds['activation'])}, residuals {format_bytes(kinds['residual'])}, "
            f"gradients {format_bytes(kinds['gradient'])}"
            + (f", temporaries {format_bytes(kinds['temporary'])}" if kinds["temporary"] else "")
            + f") at {self.peak_at}; forward peak "
            f"{format_bytes(self.forward_peak_bytes)}"
        )
        if self.train:
            text += (
                f", kept for backward {format_bytes(self.saved_bytes)}; parameter gradients "
                f"{format_bytes(self.gradient_bytes)}"
            )
        text += (
            f"; beside parameters {format_bytes(self.parameter_bytes)} and inputs "
            f"{format_bytes(self.input_bytes)}"
        )
        if self.unknown_residuals:
            text += "; not counted (unknown residuals): " + ", ".join(self.unknown_residuals)
        return text

    def table(self) -> str:
        """The timeline as text: one line per step with its bytes made, at its high point and
        after it lets go; the peak's line is marked."""
        width = max([len("step"), *(len(s.label) for s in self.steps)])
        head = f"{'step':<{width}}  {'made':>10}  {'high':>10}  {'live after':>10}"
        lines = [head, "-" * len(head)]
        for k, s in enumerate(self.steps):
            mark = "  <- peak" if k == self.peak_step else ""
            lines.append(
                f"{s.label:<{width}}  {format_bytes(s.allocated_bytes):>10}  "
                f"{format_bytes(s.peak_bytes):>10}  {format_bytes(s.live_bytes):>10}{mark}"
            )
        return "\n".join(lines)


def memory_plan(plan: Plan, train: bool = True) -> MemoryPlan:
    """The :class:`MemoryPlan` of ``plan``'s training step (``train``: forward in the train
    phase keeping what backward reads, then backward) or of its evaluation step (forward in the
    eval phase). Computed from the plan's step lists and specs only: nothing runs."""
    return _Simulation(plan, train).run()


def format_bytes(n: int) -> str:
    """``512 B``, ``3.04 KiB``, ``1.50 MiB``."""
    if n < 1024:
        return f"{n} B"
    value = float(n)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if value < 1024 or unit == "TiB":
            break
    return f"{value:.2f} {unit}"


# -- the simulation -------------------------------------------------------------------------------
class _Buffer:
    """A block of device memory: its bytes, kind and how many holders refer to it."""

    __slots__ = ("external", "first", "index", "kind", "label", "last", "nbytes", "refs")

    def __init__(self, nbytes: int, kind: str, label: str, first: int, external: bool) -> None:
        self.nbytes, self.kind, self.label = nbytes, kind, label
        self.first = first
        self.last: int | None = None
        self.external = external  # a source's: held outside the step, never counted or freed
        self.refs = 0
        self.index = -1


class _Array:
    """An array value: the buffer it lives in, and whether it is C-contiguous there (a reshape
    of it is a view; of a strided view, a copy)."""

    __slots__ = ("buffer", "contiguous")

    def __init__(self, buffer: _Buffer, contiguous: bool = True) -> None:
        self.buffer, self.contiguous = buffer, contiguous


class _Simulation:
    """Runs a plan's steps on buffer sizes instead of arrays."""

    def __init__(self, plan: Plan, train: bool) -> None:
        self.plan = plan
        self.train = train
        self.training = train  # the phase phase-dependent ops see
        self.specs: list[Spec] = plan.specs
        self.ops = plan.ops
        self.analysis = plan.analysis
        self.holders: dict[tuple[Any, ...], tuple[_Array | None, ...]] = {}
        self.buffers: list[_Buffer] = []
        self.live = 0
        self.live_by_kind = dict.fromkeys(KINDS, 0)
        self.peak = 0
        self.peak_step = -1
        self.peak_by_kind = dict.fromkeys(KINDS, 0)
        self.steps: list[MemoryStep] = []
        self.unknown: list[str] = []
        # the step being simulated
        self.step_index = 0
        self.step_allocated = 0
        self.step_high = 0

    # -- holders and buffers -------------------------------------------------------------------
    def alloc(self, nbytes: int, kind: str, label: str, contiguous: bool = True) -> _Array:
        buffer = _Buffer(int(nbytes), kind, label, self.step_index, external=False)
        buffer.index = len(self.buffers)
        self.buffers.append(buffer)
        self.live += buffer.nbytes
        self.live_by_kind[kind] += buffer.nbytes
        self.step_allocated += buffer.nbytes
        self.step_high = max(self.step_high, self.live)
        if self.live > self.peak:
            self.peak = self.live
            self.peak_step = self.step_index
            self.peak_by_kind = dict(self.live_by_kind)
        return _Array(buffer, contiguous)

    def external(self, nbytes: int, label: str) -> _Array:
        return _Array(_Buffer(int(nbytes), "source", label, -1, external=True))

    def hold(self, key: tuple[Any, ...], *arrays: _Array | None) -> None:
        """``key`` (a slot, a residual, a local of the generated code) now refers to
        ``arrays``; what it referred to before is let go of afterwards."""
        for a in arrays:
            if a is not None:
                a.buffer.refs += 1
        old = self.holders.pop(key, ())
        self.holders[key] = arrays
        self._drop(old)

    def get(self, key: tuple[Any, ...]) -> _Array | None:
        found = self.holders.get(key, ())
        return found[0] if found else None

    def release(self, key: tuple[Any, ...]) -> None:
        self._drop(self.holders.pop(key, ()))

    def _drop(self, arrays: tuple[_Array | None, ...]) -> None:
        for a in arrays:
            if a is None:
                continue
            b = a.buffer
            b.refs -= 1
            if b.refs == 0 and not b.external and b.last is None:
                b.last = self.step_index
                self.live -= b.nbytes
                self.live_by_kind[b.kind] -= b.nbytes

    def retag(self, array: _Array, kind: str) -> None:
        """``array``'s buffer counts as ``kind`` from now on (a residual become a gradient)."""
        b = array.buffer
        if b.refs > 0 and not b.external:
            self.live_by_kind[b.kind] -= b.nbytes
            self.live_by_kind[kind] += b.nbytes
        b.kind = kind

    def begin(self) -> None:
        self.step_allocated = 0
        self.step_high = self.live

    def end(self, phase: str, node: int) -> None:
        op = "" if node < 0 else self.plan._op_title(node)
        self.steps.append(
            MemoryStep(phase, node, op, self.step_allocated, self.step_high, self.live)
        )
        self.step_index += 1

    # -- the run ---------------------------------------------------------------------------------
    def run(self) -> MemoryPlan:
        plan, a = self.plan, self.analysis
        parameters = set(a.parameters)
        parameter_bytes = input_bytes = 0
        for i in range(len(a.nodes)):
            if self.ops[i] is None:
                nbytes = self.specs[i].nbytes
                if i in parameters:
                    parameter_bytes += nbytes
                else:
                    input_bytes += nbytes
                self.hold(("v", i), self.external(nbytes, f"source #{i}"))
        backward = self.train and bool(a.wrt) and plan.seed is not None
        steps = plan.forward_steps_train if self.train else plan.forward_steps_eval
        for _fn, ins, out, residual, frees in steps:
            self.begin()
            self.forward_step(ins, out, residual if self.train else min(residual, 1), frees)
            self.end("forward", out)
        forward_peak = max((s.peak_bytes for s in self.steps), default=0)
        for j in a.outputs:
            self.hold(("out", j), self.get(("v", j)))  # handed back to the caller
        gradient_bytes = 0
        if self.train:
            for j in plan.release_after_train_forward:
                self.release(("v", j))
        saved = self.live
        if backward:
            loss = a.outputs[0]
            seed = self.external(self.specs[loss].nbytes, "seed")
            input_bytes += seed.buffer.nbytes
            self.hold(("g", loss), seed)
            for step in plan.backward_steps:
                self.begin()
                self.backward_step(*step)
                self.end("backward", step[1])
            self.begin()
            for w, copied in plan.wrt_results:
                gradient_bytes += self.specs[w].nbytes
                found = self.get(("g", w))
                if found is None or copied:  # zeros where no gradient reached it, or a copy
                    found = self.alloc(self.specs[w].nbytes, "gradient", f"gradient of #{w}")
                self.hold(("result", w), found)
            self.release_all_but(("result", "out"))
            self.end("gradients", -1)
        else:
            # the slots, the residuals and the generated code's locals go when the step returns
            self.release_all_but(("out",))
            if self.steps:
                last = self.steps[-1]
                self.steps[-1] = MemoryStep(
                    last.phase, last.node, last.op, last.allocated_bytes, last.peak_bytes, self.live
                )
        buffers = tuple(
            PlannedBuffer(b.nbytes, b.kind, b.label, b.first, b.last) for b in self.buffers
        )
        peak_by_kind = dict(self.peak_by_kind)
        return MemoryPlan(
            train=self.train,
            steps=tuple(self.steps),
            buffers=buffers,
            peak_bytes=self.peak,
            peak_step=self.peak_step,
            peak_by_kind=peak_by_kind,
            forward_peak_bytes=forward_peak,
            saved_bytes=saved,
            end_bytes=self.live,
            parameter_bytes=parameter_bytes,
            input_bytes=input_bytes,
            gradient_bytes=gradient_bytes,
            unknown_residuals=tuple(self.unknown),
        )

    def release_all_but(self, kept: tuple[str, ...]) -> None:
        for key in [k for k in self.holders if k[0] not in kept]:
            self.release(key)

    # -- forward -----------------------------------------------------------------------------------
    def forward_step(
        self, ins: tuple[int, ...], out: int, residual: int, frees: tuple[int, ...]
    ) -> None:
        output = self.forward_output(ins, out, frees)
        kept: tuple[_Array | None, ...] = ()
        if residual:
            kept = self.residual(ins, out)
        temporary = self._temporary_bytes(self.ops[out], [self.specs[j] for j in ins])
        if temporary:  # made and dropped inside the op: counts at the step's high point
            label = f"temporaries of {self.plan._op_title(out)} #{out}"
            self._hold_and_drop((self.alloc(temporary, "temporary", label),))
        self.hold(("v", out), output)
        if residual == 2:
            self.hold(("r", out), *kept)  # until the op's backward step
        elif kept:
            self._hold_and_drop(kept)  # ``call[0]``: made, then dropped at once
        for j in frees:
            self.release(("v", j))

    def _hold_and_drop(self, arrays: tuple[_Array | None, ...]) -> None:
        self.hold(("tmp",), *arrays)
        self.release(("tmp",))

    def forward_output(self, ins: tuple[int, ...], out: int, frees: tuple[int, ...]) -> _Array:
        """The output array of node ``out``: a donor's buffer, a view of an input, or new."""
        op, spec = self.ops[out], self.specs[out]
        label = f"output of {self.plan._op_title(out)} #{out}"
        donor = None if self.plan.guard else self.plan._donor(out, frees)
        if donor is not None:
            found = self.get(("v", ins[donor]))
            if found is not None:
                return _Array(found.buffer, True)
        source = self.get(("v", ins[0])) if ins else None
        if source is not None:
            contiguous = self._view_contiguity(op, source, ins, out)
            if contiguous is not None:
                return _Array(source.buffer, contiguous)
        return self.alloc(spec.nbytes, "activation", label)

    def _view_contiguity(
        self, op: Any, source: _Array, ins: tuple[int, ...], out: int
    ) -> bool | None:
        """Whether ``op``'s output is a view of its first input, and then whether it is
        contiguous; ``None`` where it is a new array."""
        kind = type(op)
        if kind in (Alias, StopGradient):
            return source.contiguous
        if isinstance(op, Dropout):
            return source.contiguous if not (self.training and op.rate > 0.0) else None
        if kind is Reshape:
            return True if source.contiguous else None  # a strided input is copied
        if kind is PermuteDims:
            return source.contiguous and _moves_nothing(self.specs[ins[0]].shape, op.order)
        if kind is BroadcastTo:
            return source.contiguous and tuple(self.specs[ins[0]].shape) == tuple(op.out_shape)
        if kind is GetItem:
            return source.contiguous and _slice_is_contiguous(op.index, self.specs[ins[0]].shape)
        if kind is LSTMPart:
            return source.contiguous  # a block of whole rows of the packed array
        if kind is ReverseSequence and len(ins) == 1:
            return False  # xp.flip: a view with a negative stride
        return None

    def _temporary_bytes(self, op: Any, specs: list[Spec]) -> int:
        """Bytes an op's own forward composition holds at its highest point beside its output
        and residual, and drops before it returns, where that is the op's declaration rather
        than a backend's kernel: batch norm with the running statistics (the eval phase, or
        frozen) computes ``(x - mean) * scale + beta`` as three array operations, so the
        centred ``x`` and the product are live when the sum is made, beside ``scale``."""
        if isinstance(op, BatchNorm) and not (self.training and not _frozen(op)):
            x = specs[0]
            return 2 * x.nbytes + x.shape[1] * x.dtype.itemsize  # type: ignore[operator]
        return 0

    def residual(self, ins: tuple[int, ...], out: int) -> tuple[_Array | None, ...]:
        """The arrays op ``out`` keeps for backward: new ones, and inputs it holds on to."""
        op = self.ops[out]
        sizes, refs, unknown = self._residual_rule(op, [self.specs[j] for j in ins], ins)
        name = f"{self.plan._op_title(out)} #{out}"
        if unknown is not None:
            self.unknown.append(f"{name}: {unknown}")
        made = tuple(self.alloc(n, "residual", f"residual of {name}") for n in sizes if n > 0)
        return made + tuple(self.get(("v", j)) for j in refs)

    def _residual_rule(
        self, op: Any, specs: list[Spec], ins: tuple[int, ...]
    ) -> tuple[list[int], list[int], str | None]:
        """``(sizes of new arrays, input slots kept, what is unknown or None)``."""
        training = self.training
        hook = getattr(op, "residual_bytes", None)
        if callable(hook):
            found = hook(*specs)
            if found is None:
                return [], [], "its residual_bytes() does not know"
            return [int(found)], [], None
        x = specs[0]
        item = x.dtype.itemsize
        if isinstance(op, BatchNorm):
            c = int(x.shape[1])  # type: ignore[arg-type]  # concrete in a plan
            if training and not _frozen(op):
                return [c * item, c * item], [], None  # the batch's mean and 1 / std
            return [c * item], [ins[3]], None  # 1 / std beside the running mean
        if isinstance(op, Dropout):
            if training and op.rate > 0.0:
                return [_nbytes(op.mask_shape, item)], [], None
            return [], [], None
        if isinstance(op, SoftmaxCrossEntropy):
            if op.integer:
                return [x.nbytes], [], None  # the gradient for a loss gradient of 1
            return [x.nbytes], [ins[1]], None  # log-probabilities, and the target
        if isinstance(op, LayerNorm):
            if op.norm_shape is not None:
                rows = _nbytes(x.shape[: x.ndim - len(op.norm_shape)], item)
                return [rows, rows], [], None  # each row's mean and 1 / std
            kept = tuple(1 if k in op.axes else d for k, d in enumerate(x.shape))
            return [x.nbytes, _nbytes(kept, item)], [], None  # x_hat and 1 / std
        if isinstance(op, ScaledDotProductAttention):
            sizes = []
            if training and op.dropout:
                scores = (*specs[0].shape[:-1], specs[1].shape[-2])
                sizes.append(_nbytes(scores, item))
            refs = [ins[3]] if len(ins) > 3 else []
            what = "the backend's saved log-sum-exp rows or probabilities"
            return sizes, refs, what
        if isinstance(op, LSTMLayer | GRUSequence):
            return [], [], f"the backend's saved workspace (xp.nn.{op.name})"
        return [], [], "no rule for this op's residual (give it a residual_bytes method)"

    # -- backward ----------------------------------------------------------------------------------
    def backward_step(
        self,
        _bwd: Any,
        out: int,
        _read: Any,
        _keep: Any,
        actions: tuple[Any, ...],
        frees: tuple[int, ...],
        clear: bool,
        assigns: tuple[tuple[int, int], ...],
        others: tuple[Any, ...],
    ) -> None:
        dy = self.get(("g", out))
        self.hold(("dy",), dy)
        if clear:
            self.release(("g", out))
        identity = any(mode == ADD_SLICE for _, _, mode, _, _ in actions)
        grads: dict[int, _Array | None] = {}
        for k, j, _mode, _cast, _fn in actions:
            grads[k] = self.gradient(out, k, j, dy, identity)
        self.hold(("gs",), *grads.values())  # the last step's gs goes now
        self.release(("r", out))
        for k, j in assigns:
            self.hold(("g", j), grads[k])
        for k, j, mode, cast, _fn in others:
            grad = grads[k]
            label = f"gradient of #{j}"
            if cast is not None:
                grad = self.alloc(self.specs[j].nbytes, "gradient", label)
                self.hold(("tmp",), grad)
            if mode == ASSIGN:
                self.hold(("g", j), grad)
            elif mode == ADD:
                self.hold(("g", j), self.alloc(self.specs[j].nbytes, "gradient", label))
            # ADD_INPLACE and ADD_SLICE add into the gradient the plan owns: nothing new
            self.release(("tmp",))
        for j in frees:
            self.release(("v", j))

    def gradient(
        self, out: int, k: int, j: int, dy: _Array | None, identity: bool
    ) -> _Array | None:
        """The gradient op ``out`` hands back for its input ``k`` (node ``j``): new, ``dy``, a
        view of ``dy``, or (the cross-entropy's) its residual."""
        op = self.ops[out]
        kind = type(op)
        spec = self.specs[j]

        def new() -> _Array:
            return self.alloc(spec.nbytes, "gradient", f"gradient of #{j}")

        if identity or kind is Alias:
            return dy
        if isinstance(op, SoftmaxCrossEntropy) and op.integer:
            kept = self.get(("r", out))
            if kept is not None:  # scaled in place: the residual is the gradient
                self.retag(kept, "gradient")
                return kept
            return new()
        if kind is ReverseSequence and len(self.analysis.inputs[out]) == 1:
            return dy if dy is None else _Array(dy.buffer, False)  # flip: a view of dy
        if op.fresh_grads or dy is None:
            return new()
        if isinstance(op, Dropout):
            return new() if self.training and op.rate > 0.0 else dy
        if isinstance(op, Add | Subtract):
            if isinstance(op, Subtract) and k == 1:
                return new()  # -dy (summed where it broadcast)
            plans = getattr(op, "plans", None)
            return new() if plans and plans[k][0] else dy
        if kind is BroadcastTo:
            return new() if op.plan[0] else dy
        if kind is Reshape:
            return _Array(dy.buffer, True) if dy.contiguous else new()
        if kind is PermuteDims:
            order = op.inverse
            contiguous = dy.contiguous and _moves_nothing(self.specs[out].shape, order)
            return _Array(dy.buffer, contiguous)
        if kind is Sum or kind is Mean:
            base = dy
            if kind is Mean or (not op.keepdims and not dy.contiguous):
                # Mean scales dy into a new array; a reshape of a strided dy copies it
                base = self.alloc(self.specs[out].nbytes, "gradient", f"gradient of #{j}")
            broadcast = tuple(self.specs[out].shape) != tuple(spec.shape) and bool(op.axes)
            return _Array(base.buffer, base.contiguous and not broadcast)
        if kind is Concat:
            return _Array(dy.buffer, dy.contiguous and op.ax == 0)
        if kind is Pad:
            return _Array(dy.buffer, False)
        if kind is Astype or kind is Clip:
            return new()
        return new()  # an op no rule covers: a new array (an upper bound)


def _frozen(op: BatchNorm) -> bool:
    """Whether a batch norm's running statistics are frozen (it normalises with them)."""
    return op.running is not None and bool(getattr(op.running, "frozen", False))


def _nbytes(shape: Any, item: int) -> int:
    if any(d is None for d in shape):
        return 0
    return math.prod(int(d) for d in shape) * item


def _moves_nothing(shape: Any, order: tuple[int, ...]) -> bool:
    """Whether permuting ``shape`` by ``order`` keeps C order (only size-1 axes move)."""
    kept = [a for a in order if shape[a] != 1]
    return kept == sorted(kept)


def _slice_is_contiguous(index: tuple[Any, ...], shape: Any) -> bool:
    """Whether the basic index ``index`` of an array of ``shape`` is a C-contiguous block:
    integers first, then at most one slice of step 1, then whole axes."""
    axis = 0
    state = 0  # 0: leading integers; 1: after the one partial slice
    for k in index:
        if k is None:
            continue
        size = shape[axis]
        axis += 1
        if isinstance(k, int):
            if state:
                return False
            continue
        start, stop, step = k.indices(size) if size is not None else (0, 0, k.step or 1)
        whole = (start, stop, step) == (0, size, 1)
        if state and not whole:
            return False
        if not whole:
            if step != 1:
                return False
            state = 1
        elif not state:
            state = 1  # a whole axis: later axes must be whole too
    return True
