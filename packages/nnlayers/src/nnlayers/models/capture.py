"""Training and evaluation steps captured once and replayed (CUDA graphs), with eager fallback.

A compiled step is a static program: every shape is known and nothing in it depends on data on
the host (optimiser scalars live on the device: :mod:`nnlayers.optim._scalars`). Where the
backend can capture work (``xp.__array_namespace_info__().capture_support()`` is ``None``: the
CUDA backend), :class:`StepCapture` runs a model's steps like this:

1. eager steps until the same step (feed shapes and dtypes, phase, optimiser settings, the
   parameters' arrays, what is frozen) has come :data:`WARMUP` times in a row: they compile the
   kernels, build and tune the library plans and allocate the optimiser's state (one step where
   only the epoch's dropout generator is new: the rest is warm);
2. then one capture of the step, reading its batch from static input buffers of the step's own,
   and a first replay, which takes that step;
3. every later step of that kind: the batch copied into the static inputs, one replay, the loss
   and metrics copied out (so each step's values stay distinct), the optimiser's host counters
   advanced as the capture advanced them.

A new kind of step (a short last batch, the other phase, a frozen layer, a loaded state, a new
learning rate object, an epoch's new dropout generator) runs eagerly until it too has come :data:`WARMUP` times in a row; at most
:data:`MAX_GRAPHS` captured steps are kept per model. Where a step cannot be captured, it runs
eagerly and :attr:`StepCapture.status` says why in one line; a capture that fails warns once
with the reason (an ``arraycore.PerformanceWarning``) and that kind of step stays eager.
``NNLAYERS_CAPTURE=0`` (or ``Model(..., capture=False)``, or ``model.capture = False``) turns it
off.
"""

from __future__ import annotations

import threading
import warnings
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import arraycore
from arraycore import PerformanceWarning
from arraycore.backend import env_switch

from .. import profiler
from ..parameter import trainable_version

#: Environment variable: ``0`` runs every step eagerly.
ENV_CAPTURE = "NNLAYERS_CAPTURE"
#: Eager steps of one kind, in a row, before that kind is captured.
WARMUP = 3
#: Captured steps kept per model (the oldest is dropped first).
MAX_GRAPHS = 4


def capture_enabled() -> bool:
    """Whether ``$NNLAYERS_CAPTURE`` leaves capture on (the default)."""
    return env_switch(ENV_CAPTURE)


def _family(key: Any) -> Any:
    """A step's key without the dropout generator's identity (:meth:`StepCapture._key`)."""
    return key[:4] + key[5:]


class _Entry:
    """One captured step: the replay, its static inputs, its outputs, what it counts."""

    def __init__(
        self, captured: Any, inputs: list[Any], counts: tuple[Any, Any] | None, held: Any
    ) -> None:
        self.captured = captured
        self.inputs = inputs
        self.counts = counts  # (optimiser counters before, after) the captured step
        self.held = held  # what the key names by identity, kept alive (its ids stay unique)
        self.replays = 0


class StepCapture:
    """Captures and replays one model's train or test steps (see the module docstring)."""

    def __init__(self, model: Any, kind: str, eager: Callable[..., list[Any]]) -> None:
        self.model = model
        self.kind = kind  # "train" or "test"
        self.eager = eager  # the step on the graph's feeds (placeholder -> value) of a batch
        self.xp = model.xp
        self._graphs: OrderedDict[Any, _Entry] = OrderedDict()
        self._failed: dict[Any, str] = {}
        self._families: set[Any] = set()  # the keys captured, less their generator
        self._last: Any = None
        self._streak = 0
        self._warned: set[str] = set()
        #: why the last step ran eagerly (``None``: it was a replay, or nothing ran yet)
        self.reason: str | None = None
        #: steps run eagerly and steps replayed so far
        self.eager_steps = self.replayed_steps = 0
        # one step at a time: a replay reads fixed input buffers, and a capture records every
        # launch on the device's queue, so steps from other threads (evaluate called from
        # several) wait their turn
        self._lock = threading.Lock()

    # -- reporting ------------------------------------------------------------------------------
    @property
    def status(self) -> str:
        """One line: how this model's steps of this kind ran (replayed, eager) and why the last
        eager one was."""
        replays = self.replayed_steps
        graphs = len(self._graphs)
        if not graphs:
            return f"{self.kind} steps run eagerly: {self.reason or 'no step has run yet'}"
        description = next(iter(self._graphs.values())).captured.description
        found = (
            f"{self.kind} steps captured: {graphs} graph{'s' * (graphs != 1)} ({description}), "
            f"{replays} replayed, {self.eager_steps} eager"
        )
        if self.reason is not None:
            found += f" (the last step eager: {self.reason})"
        return found

    # -- the step -------------------------------------------------------------------------------
    def step(self, batch: Sequence[Any]) -> list[Any]:
        """One step on ``batch``: a replay where this kind of step is captured, else eager."""
        with self._lock:
            return self._step(batch)

    def _step(self, batch: Sequence[Any]) -> list[Any]:
        model = self.model
        feeds = model._fill(batch)  # a VAE's noise, a GAN's codes: drawn here, each step
        blocker = self._blocker() or self._device_fed_checks(feeds)
        if blocker is not None:
            return self._eager(feeds, batch, blocker)
        key = self._key(feeds)
        entry = self._graphs.get(key)
        if entry is not None:
            return self._replay(key, entry, feeds)
        failed = self._failed.get(key)
        if failed is not None:
            return self._eager(feeds, batch, failed)
        self._streak = self._streak + 1 if key == self._last else 1
        self._last = key
        # a step captured before but for the epoch's new dropout generator has its kernels and
        # plans warm already: one eager step, then the capture
        warmup = 1 if _family(key) in self._families else WARMUP
        if self._streak <= warmup:
            warming = f"warming up ({self._streak} of {warmup} eager steps)"
            return self._eager(feeds, batch, warming)
        return self._capture(key, feeds, batch)

    def _eager(self, feeds: dict[Any, Any], batch: Sequence[Any], reason: str) -> list[Any]:
        self.reason = reason
        self.eager_steps += 1
        return self.eager(feeds, batch)

    def _blocker(self) -> str | None:
        """Why no step of this model can be captured now (``None``: it can)."""
        model = self.model
        if not model.capture:
            return f"capture is off for this model (Model(capture=False) or ${ENV_CAPTURE}=0)"
        if profiler.active() is not None:
            return "nnlayers.profile is timing each op"
        if model.graph._check_finite:
            return "the graph checks values for NaN each step (check_finite), a host read"
        if self.kind == "train":
            if model.loss_scaler is not None:
                return (
                    "loss scaling reads its overflow flag on the host each step (to skip updates)"
                )
            if model.data_parallel is not None:
                return "data-parallel training all-reduces gradients with a host wait per call"
            for optimizer in model.optimizers().values():
                found = getattr(optimizer, "capture_blocker", None)
                if found:
                    return str(found)
                if not hasattr(optimizer, "_host_counters"):
                    return f"the optimiser {type(optimizer).__name__} is not an nnlayers one"
        return None

    def _device_fed_checks(self, feeds: dict[Any, Any]) -> str | None:
        """Why device-fed labels or indices keep this step eager (their range is checked on
        the device each step, a host read), or ``None``."""
        graph = self.model.graph
        given = {id(k): v for k, v in feeds.items()}
        for key, node, _, labels, _, indices in graph._feed_order:
            v = given.get(key)
            if v is None or isinstance(v, np.ndarray):
                continue
            what = None
            if labels is not None and arraycore.checks_enabled("labels"):
                what = "class labels"
            elif (
                indices is not None
                and arraycore.checks_enabled("indices")
                and indices[0] not in graph._trusted
            ):
                what = "indices"
            if what is not None:
                return (
                    f"{node.describe()} is fed device arrays of {what}, which arraycore checks "
                    f"on the device each step (check them on the host, as fit does for an "
                    f"in-memory feed, then step under arraycore.checks(False))"
                )
        return None

    def _key(self, feeds: dict[Any, Any]) -> Any:
        """What the captured step depends on: the feeds' shapes (their dtypes are the
        placeholders'), the phase, what is frozen, the parameters' arrays, the optimisers'."""
        model = self.model
        graph = model.graph
        given = {id(k): v for k, v in feeds.items()}
        shapes = tuple(
            tuple(given[entry[0]].shape) if entry[0] in given else None
            for entry in graph._feed_order
        )
        state: tuple[Any, ...] = ()
        if self.kind == "train":
            state = tuple(opt._capture_key() for opt in model.optimizers().values())
        params = tuple(id(p._value) for p in model._everything)
        # the graph's generator (dropout): start_epoch makes a new one, which a step captured
        # on the old one would not draw from
        return (shapes, graph.training, trainable_version(), params, id(graph.state.rng), state)

    def _capture(self, key: Any, feeds: dict[Any, Any], batch: Sequence[Any]) -> list[Any]:
        model = self.model
        xp = self.xp
        graph = model.graph
        values, _, _ = graph._feed(feeds)  # on the device, cast, host labels checked
        statics = [xp.astype(v, v.dtype, copy=True) for v in values]
        static_feeds = {node: s for (_, node), s in zip(graph._placeholders, statics, strict=True)}
        optimizers = list(model.optimizers().values()) if self.kind == "train" else []
        before = [opt._host_counters() for opt in optimizers]
        eager = self.eager

        def step() -> Any:
            with arraycore.checks(False):  # the feeds' values were checked on the host
                return eager(static_feeds, batch)

        try:
            captured = xp.__array_namespace_info__().capture(step)
        except arraycore.CaptureUnsupported as exc:
            for opt, saved in zip(optimizers, before, strict=True):
                opt._restore_host_counters(saved)
            if self.kind == "train":
                graph.clear_gradients()  # they hold what the device never computed
            reason = f"capture failed: {exc}"
            self._failed[key] = reason
            if reason not in self._warned:
                self._warned.add(reason)
                warnings.warn(
                    f"nnlayers: {type(model).__name__} {self.kind} steps on {xp.name} run "
                    f"eagerly: {reason}",
                    PerformanceWarning,
                    stacklevel=4,
                )
            return self._eager(static_feeds, batch, reason)
        after = [opt._host_counters() for opt in optimizers]
        counts = (before, after) if optimizers else None
        held = (list(model._everything), optimizers, graph.state.rng)
        entry = _Entry(captured, statics, counts, held)
        self._graphs[key] = entry
        self._families.add(_family(key))
        while len(self._graphs) > MAX_GRAPHS:
            self._graphs.popitem(last=False)
        self.reason = None
        captured.replay()  # the captured step, taken (its host counters advanced already)
        entry.replays += 1
        self.replayed_steps += 1
        return self._outputs(entry)

    def _replay(self, key: Any, entry: _Entry, feeds: dict[Any, Any]) -> list[Any]:
        xp = self.xp
        values, _, _ = self.model.graph._feed(feeds)  # host labels checked, uploaded, cast
        for static, v in zip(entry.inputs, values, strict=True):
            xp.inplace.copy(v, out=static)
        entry.captured.replay()
        entry.replays += 1
        self.replayed_steps += 1
        self._graphs.move_to_end(key)
        if entry.counts is not None:
            before, after = entry.counts
            for opt, b, a in zip(self.model.optimizers().values(), before, after, strict=True):
                opt._replayed(b, a)
        self.reason = None
        self._last, self._streak = None, 0
        return self._outputs(entry)

    def _outputs(self, entry: _Entry) -> list[Any]:
        xp = self.xp
        return [xp.astype(v, v.dtype, copy=True) for v in entry.captured.result]
