"""``Graph``: compile expressions once, then run forward and backward many times.

>>> import numpy as np, nnlayers, nnlayers.expr as ex
>>> x = ex.placeholder((None, 3), name="x")
>>> W = nnlayers.Parameter(np.ones((3, 2)), name="W")
>>> loss = ex.mean(ex.square(x @ W))
>>> graph = nnlayers.compile(loss)
>>> float(graph.forward({x: np.ones((4, 3))}))
9.0
>>> grads = graph.backward()
>>> W.grad.tolist()
[[3.0, 3.0], [3.0, 3.0], [3.0, 3.0]]
"""

from __future__ import annotations

import contextlib
import os
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

import arraycore
from arraycore import checks_enabled

from .. import profiler
from ..errors import FeedError, FeedIndexError, GraphError
from ..expr.node import Expr, as_expr, infer_specs
from ..expr.spec import format_shape
from ..parameter import Parameter, placement_version
from . import debug
from .analysis import analyse
from .guard import check_source
from .memory import MemoryPlan
from .plan import Plan
from .topo import topological_order

_MAX_PLANS = 8


@dataclass
class RunState:
    """What phase-dependent ops read at run time: the phase and the graph's random generator;
    and, for the plan's index-reading steps, the placeholder slots whose values this step are
    known to hold indices in range (see :meth:`Op.index_input`)."""

    training: bool
    rng: Any
    checked_indices: frozenset[int] = frozenset()


class Graph:
    """A compiled graph: shape inference done, gradients planned, ready to run.

    ``outputs`` is one expression or a list; the first is the one :meth:`backward`
    differentiates (the loss). ``wrt`` defaults to every trainable :class:`Parameter` the graph
    uses; placeholders may be listed too. Plans are specialised per set of feed shapes (e.g. the
    last, partial batch) and cached.
    """

    def __init__(
        self,
        outputs: Expr | list[Expr] | tuple[Expr, ...],
        wrt: list[Expr] | None = None,
        *,
        seed: int = 0,
        check_finite: bool = False,
        training: bool = True,
        check_specs: bool | None = None,
        xp: Any = None,
    ) -> None:
        self._options: dict[str, Any] = {
            "seed": seed,
            "check_finite": check_finite,
            "check_specs": check_specs,
        }
        self._single = not isinstance(outputs, list | tuple)
        outs = [as_expr(o) for o in ([outputs] if self._single else list(outputs))]
        if not outs:
            raise GraphError("compile: give at least one output expression")
        self.outputs = outs
        infer_specs(outs)
        nodes = topological_order(outs)
        if wrt is None:
            wrt = [n for n in nodes if isinstance(n, Parameter) and n.trainable]
        self.wrt = list(wrt)
        self._wrt_params = [w for w in self.wrt if isinstance(w, Parameter)]
        self._grad_slots = [(k, w) for k, w in enumerate(self.wrt) if isinstance(w, Parameter)]
        self.analysis = analyse(nodes, outs, self.wrt)
        if self.wrt and not outs[0].spec.is_float:
            raise GraphError(
                f"compile: the first output {outs[0].describe()} must be floating point"
            )
        self.xp = xp = arraycore.namespace() if xp is None else xp
        self.state = RunState(training, xp.random.default_rng(seed))
        self._check_finite = check_finite
        if check_specs is None:
            check_specs = os.environ.get("NNLAYERS_CHECK_SPECS", "") not in ("", "0")
        self._check_specs = check_specs
        a = self.analysis
        self._placeholders = [(i, nodes[i]) for i in a.placeholders]
        self._by_name = {n.name: n for _, n in self._placeholders if n.name}
        self._placeholder_ids = frozenset(id(n) for _, n in self._placeholders)
        #: placeholder slot -> (classes, reader) for placeholders that hold class labels;
        #: ``deferred``: those whose labels arraycore checks where it runs on the host (see _feed)
        self.label_checks, deferred = label_checks(a.nodes, a.inputs)
        #: placeholder slot -> (axis length, reader) for placeholders that ops read as indices
        self.index_checks = index_checks(a.nodes, a.inputs)
        #: per placeholder, in order: (id, node, dtype, its label check or None, whether the
        #: check may be left to arraycore, its index check or None), for _feed
        self._feed_order = [
            (
                id(node),
                node,
                node.spec.dtype,
                self.label_checks.get(i),
                i in deferred,
                (i, *self.index_checks[i]) if i in self.index_checks else None,
            )
            for i, node in self._placeholders
        ]
        #: index placeholders whose feeds a caller checked beforehand (see checked_feeds)
        self._trusted: frozenset[int] = frozenset()
        self._parameters = [(i, nodes[i]) for i in a.parameters]
        for _, p in self._parameters:
            p.to_backend(xp)  # type: ignore[attr-defined]
        self._placement = placement_version()  # where the parameters were checked to live
        self._constants = [
            (i, xp.asarray(nodes[i].value, dtype=nodes[i].spec.dtype))  # type: ignore[attr-defined]
            for i in a.constants
        ]
        self._array_type: type | None = None
        self._plans: OrderedDict[tuple[Any, ...], Plan] = OrderedDict()
        self._pending: tuple[Plan, list[Any], list[Any]] | None = None
        self.gradients: dict[Expr, Any] = {}

    # -- phase -----------------------------------------------------------------------------------
    @property
    def training(self) -> bool:
        """Whether dropout drops and batch-norm uses (and updates) batch statistics."""
        return self.state.training

    def train(self) -> Graph:
        """Switch to the train phase (no rebuild); returns ``self``."""
        self.state.training = True
        return self

    def eval(self) -> Graph:
        """Switch to the eval phase (no rebuild); returns ``self``."""
        self.state.training = False
        return self

    @property
    def check_finite(self) -> bool:
        """NaN/Inf guard: check every step's result and name the first op that made a NaN/Inf."""
        return self._check_finite

    @check_finite.setter
    def check_finite(self, on: bool) -> None:
        if on != self._check_finite:
            self._check_finite = on
            self._plans.clear()

    # -- running ---------------------------------------------------------------------------------
    def forward(
        self, feeds: dict[Any, Any] | None = None, *, keep_for_backward: bool | None = None
    ) -> Any:
        """Run forward; returns the output array (or the list of them, as compiled).

        ``feeds`` maps placeholders (or their names) to arrays (NumPy arrays are moved to the
        backend and cast to the placeholder's dtype). In the train phase the values backward needs
        are kept, unless ``keep_for_backward=False``.
        """
        keep = (
            (self.training and bool(self.wrt)) if keep_for_backward is None else keep_for_backward
        )
        values, key, checked = self._feed(feeds or {})
        if self.index_checks:
            self.state.checked_indices = self._trusted | checked if checked else self._trusted
        plan = self._plan(key)
        slots = self._slots(plan, values)
        residuals: list[Any] | None = [None] * plan.size if keep else None
        self._pending = None
        try:
            outputs = plan.run_forward(slots, residuals)
        except ValueError as error:
            self._name_bad_labels(values, error)
            raise
        if keep:
            self._pending = (plan, slots, residuals)  # type: ignore[assignment]
        return outputs[0] if self._single else outputs

    def moved_to(self, xp: Any) -> Graph:
        """This graph compiled again on the namespace ``xp`` (its parameters must live there:
        :meth:`Parameter.move_to <nnlayers.Parameter.move_to>`), in the same phase."""
        outputs = self.outputs[0] if self._single else list(self.outputs)
        return Graph(outputs, list(self.wrt), training=self.training, xp=xp, **self._options)

    def _check_placement(self) -> None:
        """After a parameter was moved (``move_to``): every parameter of this graph must still
        live on its backend, else a :class:`arraycore.BackendMismatchError` naming it, raised
        before anything runs (as a graph compiled now would)."""
        for _, p in self._parameters:
            home = p._home  # type: ignore[attr-defined]
            if home is not None and home is not self.xp:
                raise arraycore.BackendMismatchError(
                    f"Parameter {p.name!r} was moved to {home} (parameter.move_to), but this "
                    f"graph was compiled on {self.xp} and cannot run with it; build the model "
                    "again on the new backend (its parameters are then moved with it), or move "
                    f"it back with parameter.move_to(arraycore.namespace({self.xp.name!r}))"
                )
        self._placement = placement_version()

    def _slots(self, plan: Plan, values: list[Any]) -> list[Any]:
        """A plan's value slots with the sources filled in (one spare ``None`` slot at the end)."""
        if self._placement != placement_version():
            self._check_placement()
        slots: list[Any] = [None] * (plan.size + 1)
        for (i, _), v in zip(self._placeholders, values, strict=True):
            slots[i] = v
        for i, p in self._parameters:
            slots[i] = p.value  # type: ignore[attr-defined]
        for i, c in self._constants:
            slots[i] = c
        if self._check_finite:
            for i, node in self._placeholders + self._parameters:
                check_source(self.xp, node, slots[i])
        return slots

    def backward(self, seed: Any = None, *, accumulate: bool = False) -> dict[Expr, Any]:
        """Gradients of the first output (seeded with ones, or ``seed``) for every ``wrt`` node.

        Stores each parameter's gradient in its ``grad`` and returns :attr:`gradients`. The
        last backward's gradients are replaced; with ``accumulate=True`` these are added to
        them (PyTorch's ``loss.backward()`` habit, for gradients summed over micro-batches):
        each parameter's ``grad`` becomes the sum since the last :meth:`clear_gradients`.
        """
        if self._pending is None:
            raise GraphError(
                "backward() needs a forward() that kept values for it: call forward() in the "
                "train phase (or with keep_for_backward=True) right before backward()"
            )
        plan, slots, residuals = self._pending
        self._pending = None
        # the sums so far: each parameter's ``grad`` (as PyTorch adds into ``.grad``, so a
        # gradient clipped or edited in place is what accumulates), the graph's own otherwise
        before = (
            {w: w.grad if isinstance(w, Parameter) else self.gradients.get(w) for w in self.wrt}
            if accumulate
            else {}
        )
        # the last step's gradients need not live through this one (train_step, like a loop
        # calling PyTorch's zero_grad, has dropped them before its forward pass already)
        if self.gradients and not accumulate:
            self.clear_gradients()
        grads = list(plan.run_backward(slots, residuals, seed))
        if before:
            for k, node in enumerate(self.wrt):
                old = before.get(node)
                if old is not None and grads[k] is not None:
                    grads[k] = self.xp.add(old, grads[k])
                elif old is not None:
                    grads[k] = old
        self.gradients = dict(zip(self.wrt, grads, strict=True))
        for k, w in self._grad_slots:
            w.grad = grads[k]
        return self.gradients

    def _name_bad_labels(self, values: list[Any], error: ValueError) -> None:
        """After ``error`` in forward: the :class:`FeedError` naming the placeholder of fed labels
        out of range that ``_feed`` left to arraycore's check, if there are any."""
        for (_, node, _, labels, deferred, _), v in zip(self._feed_order, values, strict=True):
            if labels is not None and deferred:
                try:
                    check_labels(node, v, *labels)
                except FeedError as bad:
                    raise bad from error

    def clear_gradients(self) -> None:
        """Drop the last backward's gradients (:attr:`gradients` and each parameter's
        ``grad``), so that their memory is free for the next step: ``Model.train_step`` calls it
        before its forward pass, as a PyTorch loop calls ``optimizer.zero_grad()`` (which sets
        them to ``None``) before its own."""
        self.gradients = {}
        for p in self._wrt_params:
            p.grad = None

    # -- feeds and specialisation --------------------------------------------------------------------
    @property
    def placeholders(self) -> list[Expr]:
        """The placeholders this graph reads (each needs a value in every ``forward``)."""
        return [node for _, node in self._placeholders]

    @contextlib.contextmanager
    def checked_feeds(self, placeholders: Iterable[Expr]) -> Iterator[None]:
        """Inside the block, values fed to ``placeholders`` are known to hold indices in range
        (a caller checked the host data they come from, as ``fit`` does with
        :meth:`Model.check_data <nnlayers.models.Model.check_data>`): the ops reading them as
        indices (``take``: an embedding lookup) skip arraycore's check of each step's values,
        which on a device is a wait for its queue, and the graph does not check host (NumPy)
        feeds of them again either. Values fed there that are not in range then wrap around,
        as under ``arraycore.checks(False)``: trust only what was checked."""
        mine = {id(node): i for i, node in self._placeholders}
        slots = frozenset(mine[id(p)] for p in placeholders if id(p) in mine)
        before = self._trusted
        self._trusted = before | (slots & self.index_checks.keys())
        try:
            yield
        finally:
            self._trusted = before

    def _feed(self, feeds: dict[Any, Any]) -> tuple[list[Any], tuple[Any, ...], frozenset[int]]:
        given: dict[int, Any] = {}
        mine = self._placeholder_ids
        for k, value in feeds.items():
            if isinstance(k, str):
                if k not in self._by_name:
                    known = ", ".join(sorted(self._by_name)) or "none"
                    raise FeedError(
                        f"feed: no placeholder named {k!r} in this graph (named: {known})"
                    )
                k = self._by_name[k]
            elif id(k) not in mine:
                what = k.describe() if isinstance(k, Expr) else repr(k)
                known = ", ".join(node.describe() for _, node in self._placeholders) or "none"
                raise FeedError(
                    f"feed: {what} is not a placeholder of this graph (its placeholders: {known})"
                )
            if id(k) in given:
                raise FeedError(
                    f"feed: {k.describe()} is given twice (as the placeholder and by its name "
                    f"{k.name!r}); give it once"
                )
            given[id(k)] = value
        values = []
        shapes = []
        checked: frozenset[int] = frozenset()
        array_type = self._array_type
        for key, node, dtype, labels, deferred, indices in self._feed_order:
            try:
                v: Any = given[key]
            except KeyError:
                raise FeedError(f"feed: no value for {node.describe()} {node.spec}") from None
            if labels is not None and not (
                # host arrays on a host backend: the reading op's arraycore function checks
                # them on the host, before anything changes (see label_checks)
                deferred and type(v) is array_type is np.ndarray and checks_enabled("labels")
            ):
                check_labels(node, v, *labels)
            if indices is not None and type(v) is np.ndarray and indices[0] not in self._trusted:
                # host indices checked here, on the host: the step's take need not wait for a
                # device to check them again
                check_feed_dtype(node, v)
                check_indices(node, v, *indices[1:])
                checked |= {indices[0]}
            # Arrays already on the backend with the right dtype skip asarray's checks.
            if type(v) is not array_type or getattr(v, "dtype", None) != dtype:
                check_feed_dtype(node, v)
                v = self.xp.asarray(v, dtype=dtype)
                self._array_type = array_type = type(v)
            values.append(v)
            shapes.append(tuple(v.shape))
        return values, tuple(shapes), checked

    def _plan(self, key: tuple[Any, ...]) -> Plan:
        prof = profiler.active()
        plans = self._plans if prof is None else prof.plans_for(self)
        plan = plans.get(key)
        if plan is not None:
            return plan
        shapes = {}
        for (i, node), shape in zip(self._placeholders, key, strict=True):
            want = node.spec.shape
            if len(shape) != len(want) or any(
                w is not None and w != s for w, s in zip(want, shape, strict=True)
            ):
                raise FeedError(
                    f"feed: {node.describe()} expects shape {format_shape(want)}, got "
                    f"{format_shape(shape)}{channels_last_hint(shape, want)}"
                )
            shapes[i] = shape
        plan = Plan(
            self.analysis,
            shapes,
            self.xp,
            self.state,
            guard=self._check_finite,
            check_specs=self._check_specs,
            profile=prof,
        )
        if prof is not None:
            plans[key] = plan  # dropped with the profile
            return plan
        self._plans[key] = plan
        if len(self._plans) > _MAX_PLANS:
            self._plans.popitem(last=False)
        return plan

    def specialise(self, **sizes: int) -> Plan:
        """The plan for placeholders whose unknown sizes are all ``batch_size`` (for inspection)."""
        batch = sizes.get("batch_size")
        key = []
        for _, node in self._placeholders:
            if None in node.spec.shape and batch is None:
                raise GraphError("give batch_size=: a placeholder has an unknown size")
            key.append(tuple(batch if d is None else d for d in node.spec.shape))
        return self._plan(tuple(key))

    # -- inspection --------------------------------------------------------------------------------
    def peak_memory(self, batch_size: int | None = None, train: bool | None = None) -> int:
        """Peak bytes held during one step (forward, plus backward when training), parameters
        and inputs included: :meth:`memory_plan`'s ``total_peak_bytes``. Uses the last-run plan
        unless ``batch_size`` is given."""
        return self.memory_plan(batch_size, train).total_peak_bytes

    def memory_plan(self, batch_size: int | None = None, train: bool | None = None) -> MemoryPlan:
        """The planned bytes of one step, step by step, with its peak and what it is made of
        (activations, residuals, gradients; parameters and inputs beside them): see
        :mod:`nnlayers.graph.memory`. The training step (forward, then backward) where the
        graph trains (``train`` defaults to the train phase with something to differentiate),
        else the evaluation step. Uses the last-run plan unless ``batch_size`` is given."""
        if batch_size is not None or not self._plans:
            plan = self.specialise(batch_size=batch_size)  # type: ignore[arg-type]
        else:
            plan = next(reversed(self._plans.values()))
        return plan.memory_plan(self.training and bool(self.wrt) if train is None else train)

    def dump(self) -> str:
        """The graph as text, one node a line, with shapes, dtypes and names."""
        return debug.dump(self.analysis)

    def to_dot(self) -> str:
        """The graph in Graphviz dot (``dot -Tsvg``)."""
        return debug.to_dot(self.analysis)

    def __repr__(self) -> str:
        phase = "train" if self.training else "eval"
        return (
            f"<Graph {len(self.analysis.nodes)} nodes, {len(self.wrt)} wrt, {phase} phase, "
            f"backend {self.xp.name!r}>"
        )


def compile(outputs: Any, wrt: list[Expr] | None = None, **options: Any) -> Graph:  # noqa: A001
    """Compile ``outputs`` (one expression or a list; the first is the loss) into a :class:`Graph`.

    Options: ``seed`` (dropout), ``check_finite`` (NaN/Inf guard), ``training`` (start phase),
    ``check_specs`` (assert that every op's output and gradients have the shape and dtype setup
    inferred; default: on when the environment variable ``NNLAYERS_CHECK_SPECS=1``, as the test
    suite sets it).
    """
    return Graph(outputs, wrt, **options)


def label_checks(
    nodes: list[Expr], inputs: list[tuple[int, ...]]
) -> tuple[dict[int, tuple[int, str]], set[int]]:
    """Placeholders that hold class labels: slot -> (number of classes, what reads them); and
    the slots of those the graph may leave to arraycore's check.

    Each op says which of its inputs are class labels (:meth:`Op.label_input`: the integer
    target of ``softmax_cross_entropy``, the indices of ``one_hot``); a placeholder fed there
    must hold values in ``[0, classes)``. Arraycore checks them where every op reading the
    placeholder hands it to an arraycore function that checks their range
    (:attr:`Op.arraycore_checks_labels`); the graph leaves that to it only if no op updates
    state in its forward pass (batch-norm running statistics: non-trainable parameters), so
    that a bad label stops the step before anything has changed, as its own check would.
    """
    from ..expr.node import Placeholder

    checks: dict[int, tuple[int, str]] = {}
    by_arraycore: dict[int, bool] = {}  # placeholder slot -> every reader has arraycore check it
    for i, node in enumerate(nodes):
        op = node.op
        if op is None:
            continue
        found = op.label_input(*(nodes[j].spec for j in inputs[i]))
        at, classes = found if found is not None else (-1, None)
        for position, j in enumerate(inputs[i]):
            if not isinstance(nodes[j], Placeholder):
                continue
            labels = position == at
            if labels and classes:
                checks[j] = (int(classes), node.describe())
            by_arraycore[j] = by_arraycore.get(j, True) and labels and op.arraycore_checks_labels
    if any(isinstance(node, Parameter) and not node._trainable for node in nodes):
        return checks, set()
    return checks, {j for j in checks if by_arraycore[j]}


def index_checks(nodes: list[Expr], inputs: list[tuple[int, ...]]) -> dict[int, tuple[int, str]]:
    """Placeholders that ops read as indices (:meth:`Op.index_input`): slot -> (the shortest
    axis length they index, what reads them there); each value must lie in ``[-n, n)``."""
    from ..expr.node import Placeholder

    checks: dict[int, tuple[int, str]] = {}
    for i, node in enumerate(nodes):
        op = node.op
        if op is None:
            continue
        found = op.index_input(*(nodes[j].spec for j in inputs[i]))
        if found is None:
            continue
        j = inputs[i][found[0]]
        if isinstance(nodes[j], Placeholder) and (j not in checks or found[1] < checks[j][0]):
            checks[j] = (int(found[1]), node.describe())
    return checks


def check_indices(node: Expr, value: np.ndarray, n: int, reader: str) -> None:
    """Indices fed from the host must lie in ``[-n, n)`` (arraycore's rule for ``take``)."""
    if value.size == 0:
        return
    lo, hi = int(value.min()), int(value.max())
    if -n <= lo and hi < n:
        return
    raise FeedIndexError(
        f"feed: {node.describe()} holds indices for {reader} into an axis of length {n}, which "
        f"must be in [-{n}, {n}); got {_listing(value, (value < -n) | (value >= n))}"
    )


def _listing(value: np.ndarray, bad: np.ndarray) -> str:
    """The first five values of ``value`` where ``bad`` is set, with their positions, and how
    many more there are."""
    where = np.argwhere(bad)[:5]
    shown = ", ".join(f"{value[tuple(w)]} at {tuple(int(x) for x in w)}" for w in where)
    count = int(bad.sum())
    return shown + (f" and {count - len(where)} more" if count > len(where) else "")


def check_feed_dtype(node: Expr, value: Any) -> None:
    """Refuse floating-point values for an integer placeholder (they would be truncated)."""
    if node.spec.dtype.kind not in "iu":
        return
    dtype = getattr(value, "dtype", None)
    kind = np.dtype(str(dtype)).kind if dtype is not None else np.asarray(value).dtype.kind
    if kind not in "iub":
        raise FeedError(
            f"feed: {node.describe()} holds integers ({node.spec.dtype.name}: class labels or "
            f"indices), got {dtype or np.asarray(value).dtype} values, which would be truncated; "
            "convert them with .astype(np.int64) if they are whole numbers"
        )


#: The unsigned integer dtype of each integer size, for :func:`check_labels`.
_UNSIGNED = {n: np.dtype(f"u{n}") for n in (1, 2, 4, 8)}


def check_labels(node: Expr, value: Any, classes: int, reader: str) -> None:
    """Class labels must lie in ``[0, classes)``. Checked for host (NumPy) arrays only, where it
    costs no device work: every batch on the NumPy backend, and whatever a caller feeds from the
    host elsewhere (``fit`` checks an in-memory feed's host arrays once before training)."""
    if not isinstance(value, np.ndarray) or value.size == 0 or value.dtype.kind not in "iu":
        return
    if np.maximum.reduce(value.view(_UNSIGNED[value.dtype.itemsize]), axis=None) < classes:
        return  # the common case, one reduction: as unsigned, a negative label is huge
    bad = (value < 0) | (value >= classes)
    if bad.any():
        raise FeedError(
            f"feed: {node.describe()} holds class labels for {reader}, which must be in "
            f"[0, {classes}); got {_listing(value, bad)}"
        )


def channels_last_hint(shape: tuple[int, ...], want: tuple[Any, ...]) -> str:
    """For a feed of channels-last images given to a channels-first placeholder (Keras's and
    TensorFlow's habit), a sentence saying so and how to transpose; else ``""``."""
    n = len(shape)
    if n < 3 or len(want) != n:
        return ""
    moved = (shape[0], shape[-1], *shape[1:-1])
    if all(w is None or w == s for w, s in zip(want, moved, strict=True)):
        order = (0, n - 1, *range(1, n - 1))
        return (
            f": it looks channels-last (axis {n - 1}, of size {shape[-1]}, would be the "
            f"channels); nnlayers is channels-first (N, C, H, W), as PyTorch: feed "
            f"x.transpose{order}"
        )
    return ""
