"""``summary``: a table of a model's layers, output shapes and parameter counts, as Keras's
``model.summary()`` and torchinfo's ``summary(model)`` print, found by shape inference alone.

Nothing runs and no array is made: the layers are applied to the model's input placeholder (or
to a new one of ``input_shape``), which builds expressions, and their shapes come from the ops'
shape rules. So it works the same on every backend, for models of any size.

>>> import nnlayers
>>> from nnlayers.layers import Affine, Conv2D, Flatten, Pool2D, Sequential
>>> net = Sequential([Conv2D(8, 3, padding="same"), "relu", Pool2D(2), Flatten(), Affine(10)])
>>> s = nnlayers.summary(net, input_shape=(1, 8, 8))
>>> [(row.name, row.output_shape, row.params) for row in s.rows]  # doctest: +NORMALIZE_WHITESPACE
[('sequential', (None, 10), 0), ('conv2d', (None, 8, 8, 8), 80),
 ('pool2d', (None, 8, 4, 4), 0), ('flatten', (None, 128), 0), ('affine', (None, 10), 1290)]
>>> s.total_params, s.trainable_params, s.non_trainable_params, s.param_bytes
(1370, 1370, 0, 5480)
>>> print(s)
Sequential 'sequential', input (None, 1, 8, 8) float32
======================================================
Layer (type)               Output shape       Param #
======================================================
sequential (Sequential)    (None, 10)         --
  conv2d (Conv2D)          (None, 8, 8, 8)    80
  pool2d (Pool2D)          (None, 8, 4, 4)    --
  flatten (Flatten)        (None, 128)        --
  affine (Affine)          (None, 10)         1,290
======================================================
Total params: 1,370 (5.35 KiB)
Trainable params: 1,370 (5.35 KiB)
Non-trainable params: 0 (0 B)
Input per example: 256 B
Layer outputs per example (forward): 3.04 KiB
======================================================

How the rows come about:

- A :class:`~nnlayers.layers.Layer` gives a row each time it is applied, indented under the layer
  that applied it (a :class:`~nnlayers.layers.Sequential`'s items, a block's
  :meth:`~nnlayers.layers.Layer.add_sublayer` parts). ``depth`` (default 3, as torchinfo) hides
  rows nested deeper than that; the row that hides them counts their parameters. Functions in a
  ``Sequential`` (``"relu"``) are no layers and get no row, as ``F.relu`` in torchinfo.
- Each parameter is counted once, in the first row that holds it, so the ``Param #`` column
  sums to the total: a layer applied twice (shared weights) shows ``(shared)`` the second time.
- ``Non-trainable params`` are those whose ``trainable`` is False: batch-norm running
  statistics and frozen weights.
- ``Layer outputs per example`` is Keras's and torchinfo's estimate of the forward pass's
  activation memory: the sum of every distinct layer output's size for one example (the
  leading ``None`` axis is the batch), with its dtype's item size. It is ``None`` when another
  size is known only when fed (a sequence length of ``None``).
- ``batch_size=`` (models only) adds the planned memory of one training step and one
  evaluation step at that batch size (:mod:`nnlayers.graph.memory`): the peak of the step's own
  arrays, split into activations, residuals kept for backward and gradients (a part of none
  left out), beside the parameters and inputs, worked out from the model's compiled plan for
  that batch (which the graph keeps for its first step; that plan makes one array, the
  backward seed). Residuals whose size no spec tells (an LSTM's saved workspace) are named,
  counted as 0.
- A :class:`~nnlayers.models.Model` that keeps the network it was built from
  (:class:`~nnlayers.Classifier`, :class:`~nnlayers.Regressor`: ``model.network``) is
  summarised layer by layer on its input placeholder. Any other model (a ``Model`` subclass of
  your own, :class:`~nnlayers.VAE`, :class:`~nnlayers.GAN`, ``Model(loss, inputs=...)``) is
  summarised by the layers it holds, as Keras's and torchinfo's summaries of a subclassed
  model: the layers assigned to its public attributes (also in lists, tuples and dicts) and
  the layers that own its parameters, outermost first, each with its parts nested under it
  (``res_block/conv1``), in the order their parameters enter the model's graph (a part whose
  block the model does not hold, as in ``Model(loss, ...)``, shows alone under its full name,
  ``bidirectional/forward``). Each is
  applied again to a placeholder of the input it was first applied to, which gives its output
  shape; a layer never applied, or one that needs more than that input, shows ``?`` and its
  parts without shapes. Parameters no layer holds get a row ``(other parameters)``.
  ``ops=True`` lists the model's graph op by op instead (each op a row, its parameters in its
  name), as expressions always are.
- The table is at most 100 columns wide (:data:`WIDTH`): a long name or shape wraps within
  its column, as Keras's does.
"""

from __future__ import annotations

import math
import textwrap
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Any

from .errors import ShapeError
from .expr.node import Expr, Placeholder, infer_specs, placeholder
from .expr.spec import Shape, Spec, format_shape
from .graph.memory import MemoryPlan, format_bytes
from .graph.topo import topological_order
from .init import _SEEDS
from .layers.base import Layer, _parts_in
from .models.model import _unique
from .parameter import Parameter

__all__ = ["WIDTH", "Summary", "SummaryRow", "summary"]

#: The widest line of a summary's table: longer names and shapes wrap within their column.
WIDTH = 100


class _Counts:
    """The trainable / non-trainable split of a row's or a summary's ``parameters``."""

    parameters: tuple[Parameter, ...]

    @property
    def trainable_params(self) -> int:
        """Number of values training updates."""
        return _count(self.parameters, trainable=True)

    @property
    def non_trainable_params(self) -> int:
        """Number of values training leaves alone (running statistics, frozen weights)."""
        return _count(self.parameters, trainable=False)


@dataclass(frozen=True, eq=False)
class SummaryRow(_Counts):
    """One row of a :class:`Summary`: a layer application (or, for a graph, an op)."""

    name: str
    """The layer's name, made unique as a model makes parameter names (``affine_1``)."""
    type: str
    """The layer's class (``Conv2D``) or the op (``matmul``)."""
    depth: int
    """How deeply the layer is nested: 0 for the layer summarised, 1 for its parts, ..."""
    output_shapes: tuple[Shape, ...]
    """The shape of each output (several for a layer returning a tuple, such as an LSTM's
    ``(outputs, (h, c))``); ``None`` marks the batch axis and sizes known only when fed."""
    output_dtypes: tuple[Any, ...]
    """The dtype of each output."""
    parameters: tuple[Parameter, ...]
    """The parameters counted in this row (not counted in an earlier row, nor in a row shown
    below it)."""
    shared: bool = False
    """Whether the layer was applied before (its parameters were counted there)."""
    layer: Layer | None = field(default=None, repr=False)
    """The layer (``None`` for a row of a graph)."""

    @property
    def output_shape(self) -> Any:
        """The output's shape; a tuple of shapes for a layer with several outputs."""
        return self.output_shapes[0] if len(self.output_shapes) == 1 else self.output_shapes

    @property
    def params(self) -> int:
        """Number of parameter values counted in this row."""
        return _count(self.parameters)

    @property
    def output_bytes(self) -> int | None:
        """Bytes of the outputs for one example (``None`` while a size other than the batch is
        unknown)."""
        sizes = [
            _bytes_per_example(Spec(s, d)) for s, d in zip(self.output_shapes, self.output_dtypes)
        ]
        return None if None in sizes else sum(sizes)  # type: ignore[arg-type]


@dataclass(frozen=True, eq=False)
class Summary(_Counts):
    """What :func:`summary` finds: ``str(summary)`` (and ``repr``) is the table; the rows and
    totals are attributes for programs and tests."""

    title: str
    """What was summarised and its inputs (the table's first line)."""
    inputs: tuple[Spec, ...]
    """The specs of the inputs the layers were applied to."""
    rows: tuple[SummaryRow, ...]
    """The rows shown, in the order the layers were applied (parents before their parts)."""
    parameters: tuple[Parameter, ...]
    """Every parameter, each once."""
    activation_bytes: int | None
    """Bytes of all the distinct layer (or op) outputs for one example: the forward pass's
    activation memory as Keras and torchinfo estimate it; ``None`` while a size other than the
    batch axis is known only when fed."""
    depth: int
    """The deepest nesting shown."""
    batch_size: int | None = None
    """The batch size the step memory was planned for (``summary(model, batch_size=...)``)."""
    training_memory: MemoryPlan | None = field(default=None, repr=False)
    """The planned memory of one training step (forward, backward) at :attr:`batch_size`:
    :attr:`~nnlayers.graph.memory.MemoryPlan.peak_bytes` and its parts; ``None`` unless asked."""
    evaluation_memory: MemoryPlan | None = field(default=None, repr=False)
    """The planned memory of one evaluation step (forward in the eval phase)."""

    @property
    def total_params(self) -> int:
        """Number of parameter values, trainable or not."""
        return _count(self.parameters)

    @property
    def param_bytes(self) -> int:
        """Bytes of all parameter values (each with its own dtype)."""
        return sum(_param_bytes(p) for p in self.parameters)

    @property
    def trainable_param_bytes(self) -> int:
        """Bytes of the trainable parameter values."""
        return sum(_param_bytes(p) for p in self.parameters if _trainable(p))

    @property
    def input_bytes(self) -> int | None:
        """Bytes of the inputs for one example (``None`` while a size is unknown)."""
        sizes = [_bytes_per_example(s) for s in self.inputs]
        return None if None in sizes else sum(sizes)  # type: ignore[arg-type]

    def __str__(self) -> str:
        header = ("Layer (type)", "Output shape", "Param #")
        body = [(_label(row), _shapes_text(row), _count_text(row)) for row in self.rows]
        widths = _column_widths([header, *body])

        def lines_of(cells: tuple[str, str, str]) -> list[str]:
            parts = [_wrap(cell, width - 2) for cell, width in zip(cells[:2], widths)]
            parts.append([cells[2]])
            out = []
            for i in range(max(len(part) for part in parts)):
                name, shape, count = (part[i] if i < len(part) else "" for part in parts)
                out.append(f"{name:<{widths[0]}}{shape:<{widths[1]}}{count}".rstrip())
            return out

        title = textwrap.wrap(self.title, WIDTH, subsequent_indent="  ") or [""]
        rule = "=" * min(WIDTH, max(sum(widths), *(len(t) for t in title)))
        trainable, total = self.trainable_param_bytes, self.param_bytes
        activations = self.activation_bytes
        inputs = self.input_bytes
        footer = [
            f"Total params: {self.total_params:,} ({_bytes_text(total)})",
            f"Trainable params: {self.trainable_params:,} ({_bytes_text(trainable)})",
            f"Non-trainable params: {self.non_trainable_params:,} "
            f"({_bytes_text(total - trainable)})",
            f"Input per example: {_bytes_text(inputs)}",
            f"Layer outputs per example (forward): {_bytes_text(activations)}",
            *self._memory_lines(),
        ]
        lines = [
            *title,
            rule,
            *lines_of(header),
            rule,
            *(line for cells in body for line in lines_of(cells)),
            rule,
            *(wrapped for text in footer for wrapped in _wrap(text, WIDTH, "  ")),
            rule,
        ]
        return "\n".join(lines)

    def _memory_lines(self) -> list[str]:
        """The planned step memory's lines (none unless ``batch_size=`` was given)."""
        lines = []
        unknown: list[str] = []
        for what, plan in (
            ("training", self.training_memory),
            ("evaluation", self.evaluation_memory),
        ):
            if plan is None:
                continue
            kinds = plan.peak_by_kind
            parts = [f"activations {format_bytes(kinds['activation'])}"]
            if kinds["residual"]:  # parts of nothing are left out, to keep the line short
                parts.append(f"residuals {format_bytes(kinds['residual'])}")
            if plan.train:
                parts.append(f"gradients {format_bytes(kinds['gradient'])}")
            if kinds["temporary"]:
                parts.append(f"temporaries {format_bytes(kinds['temporary'])}")
            lines.append(
                f"Planned {what} step, batch {self.batch_size}: peak "
                f"{format_bytes(plan.peak_bytes)} ({', '.join(parts)}) + inputs "
                f"{format_bytes(plan.input_bytes)}"
            )
            unknown += [u for u in plan.unknown_residuals if u not in unknown]
        if unknown:
            lines.append("Not counted (size unknown): " + "; ".join(unknown))
        return lines

    __repr__ = __str__


def summary(
    target: Any,
    input_shape: Any = None,
    *,
    input_dtype: Any = None,
    depth: int = 3,
    call_kwargs: Mapping[str, Any] | None = None,
    batch_size: int | None = None,
    ops: bool = False,
) -> Summary:
    """A :class:`Summary` of a model, a layer, a function of an expression or an expression:
    each layer's output shape and parameter count, the totals (trainable and not, with their
    memory) and the layer outputs' memory per example, found without running anything.

    ``input_shape`` is the shape of one example, without the batch axis (as
    :class:`~nnlayers.Classifier`'s): ``(1, 28, 28)``; a list of shapes for a layer of several
    inputs. ``input_dtype`` (one, or one per input) defaults to float32. A layer that was
    applied already may leave it out (its first input's shape is used); a layer that was not is
    built by the summary, as its first application would. ``call_kwargs`` go to the layer's
    call (``{"causal": True}``). Models know their inputs. ``depth`` hides rows nested deeper.

    ``print(summary(...))`` shows the table; ``Model.summary()`` and ``Layer.summary()``
    print it, as Keras does. A layer whose output shape cannot be inferred raises
    :class:`~nnlayers.ShapeError` naming it and the layers around it.

    ``batch_size`` (a model's only) adds the planned memory of a training step and of an
    evaluation step at that batch size (:attr:`Summary.training_memory`,
    :attr:`Summary.evaluation_memory`): peak bytes of the step's activations, residuals and
    gradients, beside the parameters and inputs.

    ``ops=True`` (a model's only) lists the model's graph op by op instead of its layers.

    >>> from nnlayers.layers import Affine, Sequential
    >>> s = summary(Sequential([Affine(32, activation="relu"), Affine(2)]), (4,))
    >>> s.total_params, [row.output_shape for row in s.rows]
    (226, [(None, 2), (None, 32), (None, 2)])
    """
    from .models.model import Model

    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 0:
        raise ValueError(f"summary: depth must be a non-negative integer, got {depth!r}")
    if batch_size is not None and (
        isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1
    ):
        raise ValueError(f"summary: batch_size must be a positive integer, got {batch_size!r}")
    if isinstance(target, Model):
        if input_shape is not None or input_dtype is not None:
            raise ValueError(
                f"summary: a {type(target).__name__} knows its input shapes; input_shape= and "
                "input_dtype= are for layers and functions"
            )
        found = _summarise_model(target, depth, call_kwargs, bool(ops))
        return found if batch_size is None else _with_memory(found, target, batch_size)
    if ops and not isinstance(target, Expr | list | tuple):
        raise ValueError(
            "summary: ops=True lists a model's graph op by op; an expression is always listed "
            f"so, got {type(target).__name__} (summarise the expression it returns instead)"
        )
    if batch_size is not None:
        raise ValueError(
            "summary: batch_size= plans the memory of a model's training and evaluation steps "
            f"(its compiled graph); got {type(target).__name__}, so wrap it in a model "
            "(nnlayers.Classifier(network, input_shape)) or leave out batch_size="
        )
    if isinstance(target, Expr) or (
        isinstance(target, list | tuple) and target and all(isinstance(t, Expr) for t in target)
    ):
        if input_shape is not None:
            raise ValueError("summary: an expression has its shapes; leave out input_shape=")
        roots = [target] if isinstance(target, Expr) else list(target)
        what = roots[0].describe() if len(roots) == 1 else f"{len(roots)} expressions"
        return _summarise_graph(f"expression {what}", roots, [], depth)
    if not callable(target):
        raise TypeError(
            "summary: give a model, a layer, a function of an expression or an expression, "
            f"got {type(target).__name__}"
        )
    what = _describe(target)
    inputs = _make_inputs(target, what, input_shape, input_dtype)
    return _summarise_calls(what, target, inputs, [], depth, call_kwargs)


# -- what is summarised ---------------------------------------------------------------------------
def _summarise_model(
    model: Any, depth: int, call_kwargs: Mapping[str, Any] | None, ops: bool
) -> Summary:
    name = type(model).__name__
    everything = [*model.params, *model.buffers]
    roots = [*model.outputs.values(), model.loss, *model.metrics.values()]
    if ops:
        return _summarise_graph(f"{name} (graph)", roots, everything, depth)
    network = getattr(model, "network", None)
    seeds = (_SEEDS.base, _SEEDS.count)
    try:  # tracing must not move the seed sequence (a network that makes layers draws seeds)
        if callable(network) and model.inputs:
            what = f"{name} (network: {_describe(network)})"
            traced = _summarise_calls(
                what, network, [model.inputs[0]], everything, depth, call_kwargs
            )
            known = {id(p) for p in everything}
            if all(id(p) in known for p in traced.parameters):
                return traced
            # the network made new layers (a function that makes them when called): the
            # model's own ones are those it holds
        layers = _held_layers(model, everything)
        if not layers:  # parameters of no layer (made with nnlayers.Parameter): the graph
            return _summarise_graph(f"{name} (graph)", roots, everything, depth)
        calls: list[_Call] = []
        for layer in layers:
            calls += _trace_again(layer, everything)
    finally:
        _SEEDS.base, _SEEDS.count = seeds
    rows = _layer_rows(calls, depth)
    outs = _unique(o for call in calls for o in call.outputs if o.op is not None)
    inputs = [p for p in model.inputs if isinstance(p, Placeholder)]
    return _finish(f"{name} (layers)", inputs, rows, everything, outs, depth)


def _held_layers(model: Any, parameters: list[Parameter]) -> list[Layer]:
    """The outermost layers ``model`` holds: those assigned to its public attributes (also in
    lists, tuples and dicts) and those owning its parameters, none of them a part of another,
    in the order their parameters enter the model's graph (a layer without any follows the
    attribute before it)."""
    attributes = [
        part
        for key, value in vars(model).items()
        if not key.startswith("_")
        for _, part in _parts_in(value, key)
        if isinstance(part, Layer)
    ]
    owners = [p.owner for p in parameters if isinstance(getattr(p, "owner", None), Layer)]
    found = _unique([*attributes, *owners])
    inside: set[int] = set()
    for layer in found:
        inside.update(id(part) for part in _descendants(layer))
    outermost = [layer for layer in found if id(layer) not in inside]
    order = {id(p): i for i, p in enumerate(parameters)}
    keys: dict[int, float] = {}
    last = -1.0
    for layer in outermost:  # attributes first, in their order, then owners
        places = [order[id(p)] for p in layer._all_parameters() if id(p) in order]
        last = float(min(places)) if places else last + 1e-6
        keys[id(layer)] = last
    return sorted(outermost, key=lambda layer: keys[id(layer)])


def _descendants(layer: Layer) -> list[Layer]:
    """Every layer ``layer`` is made of, at any depth, each once."""
    found: list[Layer] = []
    seen = {id(layer)}
    todo = list(layer.sublayers())
    while todo:
        part = todo.pop()
        if id(part) not in seen:
            seen.add(id(part))
            found.append(part)
            todo += part.sublayers()
    return found


def _trace_again(layer: Layer, known: list[Parameter]) -> list[_Call]:
    """The recorded applications of ``layer`` (and its parts) to a placeholder of the input it
    was first applied to, which give their output shapes; if it was never applied, has a part
    never applied, needs more than that input or makes new layers when applied, its parts
    without shapes."""
    spec = layer.input_spec
    if spec is not None and all(part.built for part in [layer, *_descendants(layer)]):
        recorder = _Recorder()
        allowed = {id(p) for p in [*known, *layer._all_parameters()]}
        try:
            with _recording(recorder):
                layer(placeholder(spec.shape, spec.dtype, name="inputs"))
        except Exception:  # a layer of more inputs (or kwargs it needs): shown without shapes
            pass
        else:
            found = (p for call in recorder.calls for p in call.layer._all_parameters())
            if recorder.calls and all(id(p) in allowed for p in found):
                return recorder.calls
    return _parts_of(layer, 0, None)


def _parts_of(layer: Layer, depth: int, parent: _Call | None) -> list[_Call]:
    """``layer`` and its parts as unrecorded applications: rows without output shapes."""
    call = _Call(layer, depth, parent, [])
    calls = [call]
    for part in layer.sublayers():
        below = _parts_of(part, depth + 1, call)
        call.children.append(below[0])
        calls += below
    return calls


def _with_memory(found: Summary, model: Any, batch_size: int) -> Summary:
    """``found`` with the planned step memory of ``model``'s graph at ``batch_size``."""
    graph = model.graph
    plan = graph.specialise(batch_size=batch_size)
    training = plan.memory_plan(train=True) if graph.wrt else None
    return replace(
        found,
        batch_size=batch_size,
        training_memory=training,
        evaluation_memory=plan.memory_plan(train=False),
    )


def _make_inputs(target: Any, what: str, input_shape: Any, input_dtype: Any) -> list[Expr]:
    if input_shape is None:
        spec = target.input_spec if isinstance(target, Layer) else None
        if spec is None:
            applied = "has not been applied yet" if isinstance(target, Layer) else "is no layer"
            raise ValueError(
                f"summary: {what} {applied}, so the shape of its input is unknown; pass "
                "input_shape= (one example's shape, without the batch axis), e.g. "
                "summary(layer, input_shape=(1, 28, 28))"
            )
        return [placeholder(spec.shape, spec.dtype, name="inputs")]
    several = (
        isinstance(input_shape, list | tuple)
        and len(input_shape) > 0
        and all(isinstance(s, list | tuple) for s in input_shape)
    )
    shapes = list(input_shape) if several else [input_shape]
    dtypes = list(input_dtype) if isinstance(input_dtype, list | tuple) else [input_dtype]
    if len(dtypes) == 1:
        dtypes = dtypes * len(shapes)
    if len(dtypes) != len(shapes):
        raise ValueError(f"summary: {len(shapes)} input shapes but {len(dtypes)} input dtypes")
    inputs: list[Expr] = []
    for i, (shape, dtype) in enumerate(zip(shapes, dtypes)):
        if isinstance(shape, int):
            shape = (shape,)
        if not isinstance(shape, list | tuple):
            raise TypeError(
                f"summary: input_shape must be a tuple of sizes (or a list of them), got {shape!r}"
            )
        name = "inputs" if len(shapes) == 1 else f"inputs_{i}"
        inputs.append(placeholder((None, *shape), dtype, name=name))
    return inputs


def _summarise_calls(
    what: str,
    function: Callable[..., Any],
    inputs: list[Expr],
    extra: list[Parameter],
    depth: int,
    call_kwargs: Mapping[str, Any] | None,
) -> Summary:
    recorder = _Recorder()
    try:
        with _recording(recorder):
            result = function(*inputs, **dict(call_kwargs or {}))
        outputs = _exprs(result)
        infer_specs(outputs)
    except _LayerFailed as exc:
        raise ShapeError(f"summary of {what}: {exc}") from exc.__cause__
    except (ValueError, TypeError) as exc:
        raise ShapeError(f"summary of {what}: {exc}") from exc
    rows = _layer_rows(recorder.calls, depth)
    outs = _unique(o for call in recorder.calls for o in call.outputs if o.op is not None)
    return _finish(what, inputs, rows, extra, outs, depth)


def _summarise_graph(what: str, roots: list[Expr], extra: list[Parameter], depth: int) -> Summary:
    try:
        infer_specs(roots)
    except (ValueError, TypeError) as exc:
        raise ShapeError(f"summary of {what}: {exc}") from exc
    nodes = topological_order(roots)
    seen: set[int] = set()
    rows = []
    for node in nodes:
        if node.op is None:
            continue
        counted = _claim((i for i in node.inputs if isinstance(i, Parameter)), seen)
        label = node.name or ", ".join(str(p.name) for p in counted)
        rows.append(SummaryRow(label, node.kind, 0, (node.shape,), (node.dtype,), counted))
    inputs = [n for n in nodes if isinstance(n, Placeholder)]
    params = [n for n in nodes if isinstance(n, Parameter)]
    ops = [n for n in nodes if n.op is not None]
    return _finish(what, inputs, rows, [*params, *extra], ops, depth)


def _finish(
    what: str,
    inputs: Sequence[Expr],
    rows: list[SummaryRow],
    extra: list[Parameter],
    outputs: list[Expr],
    depth: int,
) -> Summary:
    counted = {id(p) for row in rows for p in row.parameters}
    rest = tuple(p for p in _unique(extra) if id(p) not in counted)
    if rest:  # parameters no layer of the network holds (a model's own)
        rows.append(SummaryRow("(other parameters)", "Parameter", 0, (), (), rest))
    parameters = tuple(p for row in rows for p in row.parameters)
    sizes = [_bytes_per_example(o.spec) for o in outputs]
    activations = None if None in sizes else sum(sizes)  # type: ignore[arg-type]
    specs = tuple(i.spec for i in inputs)
    shown = ", ".join(str(s) for s in specs)
    title = f"{what}, input{'s' if len(specs) > 1 else ''} {shown}" if specs else what
    return Summary(title, specs, tuple(rows), parameters, activations, depth)


# -- recording layer applications ------------------------------------------------------------
@dataclass(eq=False)
class _Call:
    layer: Layer
    depth: int
    parent: _Call | None
    inputs: list[Expr]
    outputs: list[Expr] = field(default_factory=list)
    children: list[_Call] = field(default_factory=list)

    def path(self) -> str:
        names = []
        call: _Call | None = self
        while call is not None:
            names.append(f"{type(call.layer).__name__} {call.layer.name!r}")
            call = call.parent
        inside = ", ".join(f"inside {n}" for n in names[1:])
        return f"{names[0]} ({inside})" if inside else names[0]


class _LayerFailed(ShapeError):
    """A layer's application failed while recording (raised once, by the innermost layer)."""


class _Recorder:
    """The layer applications of one trace, in order, each knowing its parent."""

    def __init__(self) -> None:
        self.calls: list[_Call] = []
        self.stack: list[_Call] = []

    def call(self, apply: Callable[..., Any], layer: Layer, args: Any, kwargs: Any) -> Any:
        parent = self.stack[-1] if self.stack else None
        inputs = [a for a in args if isinstance(a, Expr)]
        record = _Call(layer, len(self.stack), parent, inputs)
        if parent is not None:
            parent.children.append(record)
        self.calls.append(record)
        self.stack.append(record)
        try:
            out = apply(layer, *args, **kwargs)
            record.outputs = _exprs(out)
            # shapes are inferred lazily: ask here, so a failure names the innermost layer
            infer_specs(record.outputs)
        except _LayerFailed:
            raise
        except (ValueError, TypeError) as exc:
            given = ", ".join(str(i.spec) for i in _unique(inputs) if i._spec is not None)
            raise _LayerFailed(
                f"cannot infer the output of {record.path()} for input {given or '?'}:\n  "
                + str(exc).replace("\n", "\n  ")
            ) from exc
        finally:
            self.stack.pop()
        return out


_ACTIVE: ContextVar[_Recorder | None] = ContextVar("nnlayers_summary", default=None)
_LOCK = threading.RLock()
_INSTALLED: list[Callable[..., Any]] = []  # Layer.__call__ as it was, while the hook is in


@contextmanager
def _recording(recorder: _Recorder) -> Iterator[None]:
    """Record every layer application in this context into ``recorder``.

    ``Layer.__call__`` is wrapped for the duration (subclasses that override it call it through
    ``super()``); the recorder lives in a ContextVar, so other threads applying layers meanwhile
    go straight through, unrecorded.
    """
    with _LOCK:
        if not _INSTALLED:
            original = Layer.__dict__["__call__"]

            def recorded(self: Layer, *args: Any, **kwargs: Any) -> Any:
                active = _ACTIVE.get()
                if active is None:
                    return original(self, *args, **kwargs)
                return active.call(original, self, args, kwargs)

            _INSTALLED.append(original)
            setattr(Layer, "__call__", recorded)  # noqa: B010 - a method, set on the class
            owner = True
        else:
            owner = False
        token = _ACTIVE.set(recorder)
        try:
            yield
        finally:
            _ACTIVE.reset(token)
            if owner:
                setattr(Layer, "__call__", _INSTALLED.pop())  # noqa: B010


def _layer_rows(calls: list[_Call], depth: int) -> list[SummaryRow]:
    everything: dict[int, list[Parameter]] = {}

    def subtree(call: _Call) -> list[Parameter]:
        if id(call) not in everything:
            found = list(call.layer._all_parameters())
            for child in call.children:
                found += subtree(child)
            everything[id(call)] = _unique(found)
        return everything[id(call)]

    names = _Names()
    seen: set[int] = set()
    applied: set[int] = set()
    rows = []
    for call in calls:
        if call.depth > depth:
            continue
        if call.depth < depth and call.children:
            below = {id(p) for child in call.children for p in subtree(child)}
            candidates = [p for p in call.layer._all_parameters() if id(p) not in below]
        else:
            candidates = subtree(call)
        rows.append(
            SummaryRow(
                names.of(call.layer),
                type(call.layer).__name__,
                call.depth,
                tuple(o.shape for o in call.outputs),
                tuple(o.dtype for o in call.outputs),
                _claim(candidates, seen),
                shared=id(call.layer) in applied,
                layer=call.layer,
            )
        )
        applied.add(id(call.layer))
    return rows


class _Names:
    """Unique row names: a second layer called ``affine`` becomes ``affine_1``, as a model names
    its parameters; the same layer keeps its name. A part named under its block (``self.conv1``:
    ``block/conv1``) follows its block's row name (``block_1/conv1``), as the model's parameter
    names do."""

    def __init__(self) -> None:
        self.by_layer: dict[int, str] = {}
        self.taken: set[str] = set()

    def of(self, layer: Layer) -> str:
        if id(layer) not in self.by_layer:
            root = layer._naming_root()
            if root is not layer and id(root) in self.by_layer:
                name = f"{self.by_layer[id(root)]}/{str(layer.name)[len(root.name) + 1 :]}"
                if name not in self.taken:
                    self.taken.add(name)
                    self.by_layer[id(layer)] = name
                    return name
            name, k = str(layer.name), 1
            while name in self.taken:
                name = f"{layer.name}_{k}"
                k += 1
            self.taken.add(name)
            self.by_layer[id(layer)] = name
        return self.by_layer[id(layer)]


# -- helpers --------------------------------------------------------------------------------------
def _trainable(p: Any) -> bool:
    return bool(getattr(p, "trainable", True))


def _count(parameters: Sequence[Parameter], trainable: bool | None = None) -> int:
    """Values in ``parameters``, or in those whose ``trainable`` is ``trainable``."""
    return sum(p.size for p in parameters if trainable is None or _trainable(p) == trainable)


def _param_bytes(p: Parameter) -> int:
    return p.size * p.dtype.itemsize


def _bytes_per_example(spec: Spec) -> int | None:
    """Bytes of one example: a leading ``None`` is the batch; a value without one counts whole."""
    shape = spec.shape[1:] if spec.shape and spec.shape[0] is None else spec.shape
    if None in shape:
        return None
    return math.prod(shape) * spec.dtype.itemsize  # type: ignore[arg-type]


def _claim(candidates: Any, seen: set[int]) -> tuple[Parameter, ...]:
    out = []
    for p in candidates:
        if id(p) not in seen:
            seen.add(id(p))
            out.append(p)
    return tuple(out)


def _exprs(value: Any) -> list[Expr]:
    """The expressions in a layer's result (an expression, or tuples, lists and dicts of them)."""
    if isinstance(value, Expr):
        return [value]
    if isinstance(value, Mapping):
        value = list(value.values())
    if isinstance(value, list | tuple):
        return [e for item in value for e in _exprs(item)]
    return []


def _describe(target: Any) -> str:
    if isinstance(target, Layer):
        return f"{type(target).__name__} {target.name!r}"
    qualname = getattr(target, "__qualname__", None) or type(target).__name__
    return f"function {qualname.rpartition('<locals>.')[2]}"  # not f.<locals>.g: g


def _label(row: SummaryRow) -> str:
    # a part is named under its parent's name ("block/self_attn"): the indentation says whose
    name = row.name.rpartition("/")[2] if row.depth > 0 and row.layer is not None else row.name
    indent = "  " * row.depth
    return f"{indent}{name} ({row.type})" if name else f"{indent}({row.type})"


def _shapes_text(row: SummaryRow) -> str:
    if not row.output_shapes:  # a layer never applied or not traced; parameters of no layer
        return "?" if row.layer is not None else ""
    shapes = [format_shape(s) for s in row.output_shapes]
    return shapes[0] if len(shapes) == 1 else "[" + ", ".join(shapes) + "]"


def _count_text(row: SummaryRow) -> str:
    if row.params:
        return f"{row.params:,}"
    if row.shared and row.layer is not None and any(True for _ in row.layer._all_parameters()):
        return "(shared)"
    return "--"


def _column_widths(table: list[tuple[str, str, str]]) -> list[int]:
    """Widths of the name and shape columns (each with its 4 spaces of gap) and of the counts,
    together at most :data:`WIDTH`: the wider of the first two gives way first."""
    natural = [max(len(cells[i]) for cells in table) for i in range(3)]
    name, shape, count = natural[0] + 4, natural[1] + 4, natural[2]
    room = WIDTH - count
    if name + shape > room:
        half = room // 2
        if name <= half:
            shape = room - name
        elif shape <= half:
            name = room - shape
        else:
            name, shape = half, room - half
    return [name, shape, count]


def _wrap(text: str, width: int, indent: str | None = None) -> list[str]:
    """``text`` in lines of at most ``width``; continuation lines keep its indentation plus two
    spaces (or take ``indent``)."""
    if len(text) <= width:
        return [text]
    lead = text[: len(text) - len(text.lstrip(" "))]
    more = indent if indent is not None else lead + "  "
    return textwrap.wrap(
        text.lstrip(" "),
        width,
        initial_indent=lead,
        subsequent_indent=more,
        break_on_hyphens=False,
    ) or [text]


def _bytes_text(n: int | None) -> str:
    if n is None:
        return "unknown (a size other than the batch is known only when fed)"
    return format_bytes(n)
