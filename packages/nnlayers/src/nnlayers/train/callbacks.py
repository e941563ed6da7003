"""Callbacks: code ``fit`` runs at the start and end of training, of every epoch and, for
callbacks that ask for it, of every batch.

Subclass :class:`Callback` and override the hooks you need; ``self.model``, ``self.history``
and ``self.state`` (set ``self.state.stop = True`` to stop after this epoch) are available.
``fit`` looks once, when training begins, for callbacks that override the per-batch hooks
(:meth:`Callback.on_train_batch_begin`, :meth:`Callback.on_train_batch_end`): without one,
its step loop is exactly the loop without callbacks, and callbacks cost nothing while the
device works.

A callback with state that must survive a resume (counters, a best value, best weights) opts
in to the state protocol with :meth:`Callback.state_dict` and :meth:`Callback.load_state_dict`
(PyTorch Lightning's names): a :class:`Checkpoint` stores every such state in its file, and a
``Checkpoint(..., resume=True)`` hands it back once every callback's ``on_train_begin`` has
run, so a resumed run goes on as if it had never stopped.
"""

from __future__ import annotations

import math
import os
import re
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .._atomic import check_target
from ..distributed.context import get_context, is_main_rank
from .history import History, resolve_mode

if TYPE_CHECKING:
    from ..models.model import Model
    from .fit import TrainingState


class Callback:
    """Base class: every hook does nothing.

    Epochs and steps count from 1: ``on_epoch_begin(1)`` comes first, and the first batch of
    each epoch is step 1 (Keras counts its ``batch`` argument from 0).
    """

    state: TrainingState

    #: The name a :class:`Checkpoint` files this callback's state under. ``None`` (the
    #: default): the class name, with ``#2``, ``#3``, ... for the second and later callbacks
    #: of the same class in ``fit``'s list. Set it (in ``__init__`` or on the class) when a
    #: run has several callbacks of one class whose order may change.
    state_key: str | None = None

    def state_dict(self) -> dict[str, Any]:
        """The state that must survive a resume (default: none, ``{}``).

        Values may be JSON's (``str``, ``int``, ``float``, infinities and NaN included,
        ``bool``, ``None``, and lists and ``str``-keyed dicts of them) or arrays (NumPy or
        any backend's, at any depth in dicts and lists), which a :class:`Checkpoint` stores
        as tensors. It is called when a checkpoint is written, after every callback's
        ``on_epoch_end``, and, on resume, to find which callbacks have state (a non-empty
        dict). Return copies, not live references the run goes on changing.
        """
        return {}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Take back what :meth:`state_dict` returned (arrays come back as host NumPy arrays).

        A resuming :class:`Checkpoint` calls it after every callback's ``on_train_begin``
        (which may reset the callback), before the first epoch. Override it with
        :meth:`state_dict`; the default refuses a non-empty state.
        """
        if state:
            raise NotImplementedError(
                f"{type(self).__name__} returns a state_dict() but does not override "
                "load_state_dict(state) to take it back on resume"
            )

    @property
    def model(self) -> Model:
        """The model being trained."""
        return self.state.model

    @property
    def history(self) -> History:
        """The run's history (grows by one record per epoch)."""
        return self.state.history

    def on_train_begin(self) -> None:
        """Before the first epoch (a resuming checkpoint restores here)."""

    def on_epoch_begin(self, epoch: int) -> None:
        """Before epoch ``epoch`` (1-based)."""

    def on_epoch_end(self, epoch: int, logs: Mapping[str, float]) -> None:
        """After epoch ``epoch`` with its metrics (validation ones prefixed ``val_``)."""

    def on_train_batch_begin(self, step: int) -> None:
        """Before training step ``step`` of the epoch (1-based).

        ``fit`` calls the per-batch hooks only of callbacks that override them (in the class,
        or as an attribute of the instance), so keep them cheap: they run between device
        steps, on the host.
        """

    def on_train_batch_end(self, step: int, logs: BatchLogs) -> None:
        """After training step ``step`` of the epoch (1-based). ``logs`` holds the step's loss
        and metrics as device scalars, brought to the host only if read (see
        :class:`BatchLogs`), and the batch size, epoch and global step as host ints."""

    def on_train_end(self) -> None:
        """After the last epoch (also when training stops early or fails)."""


class BatchLogs(Mapping[str, float]):
    """One training step's loss and metrics, as :meth:`Callback.on_train_batch_end` sees them.

    Reading a metric (``logs["loss"]``, ``dict(logs)``) copies all of the step's metrics from
    the device in one transfer, which waits for the step to finish: a synchronisation, so do
    it every ``N`` steps rather than every step. Later reads of the same ``logs`` are free.
    ``logs.raw`` holds the device scalars themselves (no transfer); ``size`` (examples in the
    batch), ``epoch``, ``step`` (1-based within the epoch) and ``global_step`` (see
    :attr:`TrainingState.global_step`) are host ints.

    >>> import numpy as np, arraycore
    >>> logs = BatchLogs(arraycore.namespace("numpy"), ["loss"], [np.float32(0.5)], 32, 1, 1, 1)
    >>> dict(logs), logs.size
    ({'loss': 0.5}, 32)
    """

    __slots__ = ("_host", "_xp", "epoch", "global_step", "raw", "size", "step")

    def __init__(
        self,
        xp: Any,
        names: Sequence[str],
        values: Sequence[Any],
        size: int,
        epoch: int,
        step: int,
        global_step: int,
    ) -> None:
        self._xp = xp
        #: name -> the step's device scalar (nothing is copied to read these)
        self.raw: dict[str, Any] = dict(zip(names, values))
        self.size = size
        self.epoch = epoch
        self.step = step
        self.global_step = global_step
        self._host: dict[str, float] | None = None

    def _fetch(self) -> dict[str, float]:
        if self._host is None:
            values = list(self.raw.values())
            if all(isinstance(v, np.generic | np.ndarray | float | int) for v in values):
                host = [float(v) for v in values]  # the NumPy backend: already on the host
            else:
                xp = self._xp
                host = np.asarray(xp.to_numpy(xp.stack(values)), dtype=np.float64).tolist()
            self._host = dict(zip(self.raw, host))
        return self._host

    def __getitem__(self, name: str) -> float:
        if name not in self.raw:
            raise KeyError(f"no metric {name!r} in this step's logs (have {', '.join(self.raw)})")
        return self._fetch()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.raw)

    def __len__(self) -> int:
        return len(self.raw)

    def __repr__(self) -> str:
        return (
            f"<BatchLogs epoch {self.epoch} step {self.step}: {', '.join(self.raw)} "
            f"({self.size} examples)>"
        )


def overrides(callback: Callback, hook: str) -> bool:
    """Whether ``callback`` has its own ``hook`` (its class overrides it, or the instance has
    it as an attribute) rather than :class:`Callback`'s, which does nothing."""
    method = getattr(callback, hook)
    return getattr(method, "__func__", method) is not getattr(Callback, hook)


class CallbackList:
    """Calls every callback's hook in order.

    Which callbacks have per-batch hooks is found once, here: :meth:`batch_step` wraps the
    model's train step only if there are any.
    """

    def __init__(self, callbacks: Sequence[Callback], state: TrainingState) -> None:
        self.callbacks = list(callbacks)
        for c in self.callbacks:
            if not isinstance(c, Callback):
                raise TypeError(f"fit: callbacks must be Callback objects, got {c!r}")
            c.state = state
        self.keys = _state_keys(self.callbacks)
        for c in self.callbacks:
            if isinstance(c, Checkpoint):  # it writes the file once every on_epoch_end has run
                c._peers, c._deferred = self, True
        self._batch_begin = [c for c in self.callbacks if overrides(c, "on_train_batch_begin")]
        self._batch_end = [c for c in self.callbacks if overrides(c, "on_train_batch_end")]

    @property
    def has_batch_hooks(self) -> bool:
        """Whether any callback overrides a per-batch hook."""
        return bool(self._batch_begin or self._batch_end)

    def batch_step(
        self,
        train_step: Callable[[Any], list[Any]],
        xp: Any,
        names: Sequence[str],
        epoch: int,
        global_step: int,
    ) -> Callable[[Any], list[Any]]:
        """``train_step`` with the per-batch hooks around it, for one epoch (steps count from
        1; ``global_step`` is the global step before the epoch's first)."""
        begin, end = self._batch_begin, self._batch_end
        step = 0

        def hooked(batch: Any) -> list[Any]:
            nonlocal step
            step += 1
            for c in begin:
                c.on_train_batch_begin(step)
            values = train_step(batch)
            if end:
                size = int(batch[0].shape[0])
                logs = BatchLogs(xp, names, values, size, epoch, step, global_step + step)
                for c in end:
                    c.on_train_batch_end(step, logs)
            return values

        return hooked

    def on_train_begin(self) -> None:
        for c in self.callbacks:
            c.on_train_begin()
        # the last checkpoint that resumed restored the model: its callback states come back
        # now, after every on_train_begin (which may have reset them)
        resumed = [c for c in self.callbacks if isinstance(c, Checkpoint) and c._restored]
        if resumed:
            checkpoint = resumed[-1]
            model = checkpoint.model
            if isinstance(getattr(model, "history", None), History):
                checkpoint.state.history = model.history  # a callback may read it to resume
            self.load_states(checkpoint._restored_states, checkpoint.path)
        for c in resumed:
            c._restored, c._restored_states = False, None

    def states(self) -> dict[str, dict[str, Any]]:
        """Each stateful callback's :meth:`Callback.state_dict`, by its key (those that
        return ``{}`` are left out)."""
        found = {}
        for key, c in zip(self.keys, self.callbacks):
            state = c.state_dict()
            if not isinstance(state, Mapping):
                raise TypeError(
                    f"{type(c).__name__}.state_dict() returned {state!r:.80}, not a dict"
                )
            if state:
                found[key] = dict(state)
        return found

    def load_states(self, saved: Mapping[str, Mapping[str, Any]] | None, source: Any) -> None:
        """Hand each callback its saved state; warn, naming them, about callbacks with state
        that ``saved`` lacks (they start afresh) and states no callback here takes."""
        saved = dict(saved or {})
        fresh = []
        for key, c in zip(self.keys, self.callbacks):
            if key in saved:
                c.load_state_dict(saved.pop(key))
            elif c.state_dict():
                fresh.append(key)
        if fresh:
            warnings.warn(
                f"resuming from {source}: it holds no state for the callback "
                f"{', '.join(fresh)} (not passed to the run that wrote it, another state_key, "
                "or a file written before callbacks saved their state), which starts afresh",
                UserWarning,
                stacklevel=4,
            )
        if saved:
            warnings.warn(
                f"resuming from {source}: it holds the state of the callback "
                f"{', '.join(saved)}, not passed to this run (or under another state_key); "
                "that state is ignored",
                UserWarning,
                stacklevel=4,
            )

    def on_epoch_begin(self, epoch: int) -> None:
        for c in self.callbacks:
            c.on_epoch_begin(epoch)

    def on_epoch_end(self, epoch: int, logs: Mapping[str, float]) -> None:
        for c in self.callbacks:
            c.on_epoch_end(epoch, logs)
        for c in self.callbacks:  # the file holds every callback's state after this epoch
            if isinstance(c, Checkpoint):
                c._write_pending()

    def on_train_end(self) -> None:
        for c in self.callbacks:
            c.on_train_end()


def _state_keys(callbacks: Sequence[Callback]) -> list[str]:
    """The key each callback's state is filed under (see :attr:`Callback.state_key`)."""
    keys: list[str] = []
    counts: dict[str, int] = {}
    for c in callbacks:
        key = c.state_key
        if key is None:
            name = type(c).__name__
            counts[name] = counts.get(name, 0) + 1
            key = name if counts[name] == 1 else f"{name}#{counts[name]}"
        elif not isinstance(key, str) or not key:
            raise TypeError(f"fit: {c!r} has state_key {key!r}; it must be a non-empty str")
        if key in keys:
            raise ValueError(
                f"fit: two callbacks have the state key {key!r} ({c!r} and "
                f"{callbacks[keys.index(key)]!r}); give each its own state_key"
            )
        keys.append(key)
    return keys


class EarlyStopping(Callback):
    """Stop when ``monitor`` has not improved by more than ``min_delta`` for ``patience``
    epochs; with ``restore_best`` the parameters of the best epoch are put back at the end of
    training, whether it stopped early or ran all its epochs (Keras 3's
    ``restore_best_weights``), unless the last epoch was the best.

    ``mode="auto"`` maximises accuracies and minimises everything else. The best weights are
    copied to the host only when the monitored value improves.

    Its state (:meth:`state_dict`: the best value and epoch, the epochs waited, the epoch it
    stopped at and, with ``restore_best``, the best weights) goes into every
    :class:`Checkpoint` file, so a resumed run stops where the uninterrupted one would and
    puts back the same weights; a run that had already stopped stays stopped.

    >>> EarlyStopping("val_accuracy", patience=3)
    EarlyStopping(monitor='val_accuracy', patience=3, mode='max')
    """

    def __init__(
        self,
        monitor: str = "val_loss",
        patience: int = 5,
        *,
        min_delta: float = 0.0,
        mode: str = "auto",
        restore_best: bool = True,
    ) -> None:
        if patience < 0:
            raise ValueError(f"EarlyStopping: patience must be >= 0, got {patience}")
        self.monitor = monitor
        self.patience = patience
        self.min_delta = abs(min_delta)
        self.mode = resolve_mode(monitor, mode)
        self.restore_best = restore_best
        self.best = math.inf if self.mode == "min" else -math.inf
        self.best_epoch = 0
        self.wait = 0
        self.stopped_epoch = 0
        self._weights: dict[str, np.ndarray] | None = None

    def on_train_begin(self) -> None:
        self.best = math.inf if self.mode == "min" else -math.inf
        self.best_epoch = 0
        self.wait = 0
        self.stopped_epoch = 0
        self._weights = None

    def _improved(self, value: float) -> bool:
        if self.mode == "min":
            return value < self.best - self.min_delta
        return value > self.best + self.min_delta

    def on_epoch_end(self, epoch: int, logs: Mapping[str, float]) -> None:
        if self.monitor not in logs:
            raise KeyError(
                f"EarlyStopping: no metric {self.monitor!r} this epoch (have "
                f"{', '.join(logs)}); pass validation= to fit for val_ metrics"
            )
        value = float(logs[self.monitor])
        if self._improved(value):
            self.best, self.best_epoch, self.wait = value, epoch, 0
            if self.restore_best:
                self._weights = self.model.state_dict()
            return
        self.wait += 1
        if self.wait >= self.patience:
            self.stopped_epoch = epoch
            self.state.stop = True

    def on_train_end(self) -> None:
        last = self.model.epoch
        if self.restore_best and self._weights is not None and self.best_epoch != last:
            self.model.load_state_dict(self._weights)

    def state_dict(self) -> dict[str, Any]:
        """``monitor``, ``mode``, ``best``, ``best_epoch``, ``wait``, ``stopped_epoch`` and,
        with ``restore_best`` once the monitored value has improved, ``weights`` (the best
        epoch's parameters and buffers, host arrays by name)."""
        state: dict[str, Any] = {
            "monitor": self.monitor,
            "mode": self.mode,
            "best": self.best,
            "best_epoch": self.best_epoch,
            "wait": self.wait,
            "stopped_epoch": self.stopped_epoch,
        }
        if self._weights is not None:
            state["weights"] = self._weights
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Take back a :meth:`state_dict`; one saved on another monitor or mode is ignored
        with a warning. A state that had stopped stops this run before its first epoch."""
        if (state.get("monitor"), state.get("mode")) != (self.monitor, self.mode):
            warnings.warn(
                f"{self!r}: the saved state was for monitor={state.get('monitor')!r}, "
                f"mode={state.get('mode')!r}; it is ignored and early stopping starts afresh",
                UserWarning,
                stacklevel=2,
            )
            return
        self.best = float(state["best"])
        self.best_epoch = int(state["best_epoch"])
        self.wait = int(state["wait"])
        self.stopped_epoch = int(state["stopped_epoch"])
        weights = state.get("weights")
        self._weights = dict(weights) if self.restore_best and weights is not None else None
        if self.restore_best and weights is None and self.best_epoch:
            warnings.warn(
                f"{self!r}: the saved state has no best weights (saved with "
                f"restore_best=False); the weights of epoch {self.best_epoch} cannot be put "
                "back unless a later epoch improves on it",
                UserWarning,
                stacklevel=2,
            )
        if self.stopped_epoch and getattr(self, "state", None) is not None:
            self.state.stop = True  # it had stopped: the run stays stopped

    def __repr__(self) -> str:
        return (
            f"EarlyStopping(monitor={self.monitor!r}, patience={self.patience}, mode={self.mode!r})"
        )


class Checkpoint(Callback):
    """Save the model, its optimisers' state, the epoch and the history to ``path`` (a
    safetensors file, written atomically) after every ``every`` epochs, or only when
    ``monitor`` improves (``save_best_only``).

    With ``resume=True`` an existing file at ``path`` is restored when training begins, so
    running the same script again continues where it stopped (``fit`` then trains the epochs
    still missing).

    Each file also holds the state of every callback of the run that has one (see
    :meth:`Callback.state_dict`: :class:`EarlyStopping`'s counters and best weights, a
    best-only checkpoint's best value, your own callbacks'), taken once every callback's
    ``on_epoch_end`` has run (``fit`` writes the file then, whatever the order of the
    callbacks); resuming hands each its state back after every ``on_train_begin``, with a
    warning naming any callback the file holds no state for, or whose state no callback takes.

    ``path`` is checked when training begins, before the first epoch: an empty path, a folder
    or a path into a folder that does not exist raises there, naming it, rather than after an
    epoch of training.

    With ``save_best_only`` the file records the value it was saved on (metadata
    ``checkpoint.best``, with ``checkpoint.monitor`` and ``checkpoint.mode``). A run that
    continues an earlier one (resumed from a checkpoint, or a later ``fit`` call: its first
    epoch is not epoch 1) reads it back before it compares, so it never replaces the file
    with a model worse than the one already there. A new run (from epoch 1) starts afresh and
    overwrites the file at its first epoch. A best-only checkpoint that also resumes
    continues from the best epoch so far, not from the last one; to continue from the last
    epoch, resume from a second, every-epoch ``Checkpoint``.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        every: int = 1,
        monitor: str | None = None,
        mode: str = "auto",
        save_best_only: bool = False,
        resume: bool = False,
    ) -> None:
        if save_best_only and monitor is None:
            raise ValueError("Checkpoint: save_best_only needs a monitor (e.g. 'val_loss')")
        if not os.fspath(path).strip():
            raise ValueError(
                f"Checkpoint: path {os.fspath(path)!r} is empty: name a file, such as "
                f"'model.safetensors'"
            )
        self.path = Path(path)
        self.every = max(1, int(every))
        self.monitor = monitor
        self.mode = resolve_mode(monitor or "loss", mode)
        self.save_best_only = save_best_only
        self.resume = resume
        self.best = math.inf if self.mode == "min" else -math.inf
        self.saved: list[int] = []
        self.resumed_from: int | None = None
        self._first_epoch = True
        self._peers: CallbackList | None = None  # fit's callbacks, whose states it saves
        self._deferred = False  # in fit: write once every callback's on_epoch_end has run
        self._pending: tuple[int, dict[str, Any]] | None = None
        self._restored = False
        self._restored_states: dict[str, dict[str, Any]] | None = None

    def on_train_begin(self) -> None:
        from .checkpoints import resume

        if is_main_rank():  # in a data-parallel run, rank 0 alone writes the file
            check_target(self.path, "checkpoint")
        self._first_epoch = True
        self._pending = None
        if self.resume and _on_every_rank(self.path):
            self._restored_states = resume(self.model, self.path)
            self._restored = True  # fit's CallbackList hands the states back
            self.resumed_from = self.model.epoch
            if self._peers is None:  # used outside fit: this callback's own state alone
                own = (self._restored_states or {}).get(self.state_key or type(self).__name__)
                if own:
                    self.load_state_dict(own)

    def state_dict(self) -> dict[str, Any]:
        """With ``save_best_only``: ``monitor``, ``mode`` and ``best`` (the value the file
        was saved on), so a resumed run compares against it; otherwise ``{}``."""
        if not self.save_best_only:
            return {}
        return {"monitor": self.monitor, "mode": self.mode, "best": self.best}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Take back the best value of a :meth:`state_dict` saved on the same monitor and
        mode (another is ignored with a warning)."""
        if not state:
            return
        if (state.get("monitor"), state.get("mode")) != (self.monitor, self.mode):
            warnings.warn(
                f"{self!r}: the saved state was for monitor={state.get('monitor')!r}, "
                f"mode={state.get('mode')!r}; it is ignored",
                UserWarning,
                stacklevel=2,
            )
            return
        self.best = float(state["best"])

    def on_epoch_end(self, epoch: int, logs: Mapping[str, float]) -> None:
        first, self._first_epoch = self._first_epoch, False
        extra: dict[str, Any] = {}
        if self.save_best_only:
            assert self.monitor is not None
            if self.monitor not in logs:
                raise KeyError(
                    f"{type(self).__name__}: no metric {self.monitor!r} this epoch (have "
                    f"{', '.join(logs)}); pass validation= to fit for val_ metrics"
                )
            if first and epoch > 1 and self.path.is_file():
                self._best_from_file()  # a continued run: the file may hold a better model
            value = float(logs[self.monitor])
            if not self._better(value, self.best):
                return
            self.best = value
            extra = {
                "checkpoint.monitor": self.monitor,
                "checkpoint.mode": self.mode,
                "checkpoint.best": value,
            }
        elif epoch % self.every and epoch != self.state.epochs:
            return
        self._pending = (epoch, extra)
        if not self._deferred:
            self._write_pending()

    def _write_pending(self) -> None:
        """Write the file this epoch's ``on_epoch_end`` decided on, with every callback's
        state (``fit`` calls this once all of them have run)."""
        from .checkpoints import save

        if self._pending is None:
            return
        (epoch, extra), self._pending = self._pending, None
        if is_main_rank():  # every rank holds the same model: rank 0 writes it
            peers = self._peers
            states = peers.states() if peers is not None else {}
            if peers is None and self.state_dict():
                states = {self.state_key or type(self).__name__: self.state_dict()}
            save(self.model, self.path, extra=extra, callbacks=states)
        self.saved.append(epoch)

    def _better(self, value: float, than: float) -> bool:
        return value < than if self.mode == "min" else value > than

    def _best_from_file(self) -> None:
        """Take the best value recorded in the file, if it was saved on the same monitor and
        mode and is better than the one held."""
        from ..checkpoint import CheckpointError
        from .checkpoints import read_metadata

        meta = read_metadata(self.path)
        if meta.get("checkpoint.monitor") != self.monitor or meta.get("checkpoint.mode") != (
            self.mode
        ):
            return
        best = meta.get("checkpoint.best")
        if isinstance(best, bool) or not isinstance(best, int | float):
            raise CheckpointError(
                f"checkpoint {self.path}: bad metadata 'checkpoint.best' {best!r} (a number)"
            )
        if self._better(float(best), self.best):
            self.best = float(best)

    def __repr__(self) -> str:
        best = f", monitor={self.monitor!r}, save_best_only=True" if self.save_best_only else ""
        return (
            f"{type(self).__name__}({str(self.path)!r}, every={self.every}{best}, "
            f"resume={self.resume})"
        )


def _on_every_rank(path: Path) -> bool:
    """Whether ``path`` exists (a checkpoint to resume from): here, or in a data-parallel run
    on every rank, which then all resume from it; a file some ranks lack is an error, since
    they would train on from other parameters."""
    context = get_context()
    exists = path.exists()
    if context is None or not context.distributed:
        return exists
    found = context.allgather(exists, "the check that every rank finds the checkpoint")
    if all(found) or not any(found):
        return exists
    having = ", ".join(str(r) for r, f in enumerate(found) if f)
    lacking = ", ".join(str(r) for r, f in enumerate(found) if not f)
    from ..errors import DistributedError

    raise DistributedError(
        f"Checkpoint: {path} exists on rank {having} but not on rank {lacking}; to resume, "
        "every rank reads the checkpoint: keep it on a filesystem every host shares, or copy "
        "it to the same path on every host"
    )


class ModelCheckpoint(Checkpoint):
    """Keras's name for :class:`Checkpoint`, with Keras's arguments: ``monitor`` (default
    ``"val_loss"``, used with ``save_best_only``), ``save_best_only``, ``mode``; and
    :class:`Checkpoint`'s ``every`` and ``resume``.

    The file is one safetensors checkpoint holding the model, its optimisers' state, the
    epoch, the history and (best-only) the best value, rewritten atomically: file-name
    templates such as ``"model-{epoch:02d}.keras"`` are refused, since a run resumes from one
    file.

    >>> ModelCheckpoint("best.safetensors", save_best_only=True)
    ModelCheckpoint('best.safetensors', every=1, monitor='val_loss', save_best_only=True, resume=False)
    """

    def __init__(
        self,
        filepath: str | Path,
        monitor: str = "val_loss",
        save_best_only: bool = False,
        mode: str = "auto",
        *,
        every: int = 1,
        resume: bool = False,
    ) -> None:
        if _TEMPLATE.search(os.fspath(filepath)):
            raise ValueError(
                f"ModelCheckpoint: {os.fspath(filepath)!r} is a file-name template (Keras's "
                "{epoch}, {val_loss:.2f}); nnlayers keeps one checkpoint file, rewritten "
                "atomically (the best one with save_best_only=True), so that a run can resume "
                "from it: name one file, such as 'model.safetensors'"
            )
        super().__init__(
            filepath,
            every=every,
            monitor=monitor,
            mode=mode,
            save_best_only=save_best_only,
            resume=resume,
        )


_TEMPLATE = re.compile(r"\{[A-Za-z_][A-Za-z0-9_]*(?::[^{}]*)?\}")


class TerminateOnNaN(Callback):
    """Stop training when the loss becomes NaN or infinite: Keras's name for what ``fit`` does
    by default (``stop_on_nonfinite=True``).

    Passing it turns the check on even with ``fit(..., stop_on_nonfinite=False)``; it adds no
    check of its own (the loss is checked once, by ``fit``, without a synchronisation per
    step on a device). As with the default, training stops with a
    :class:`~nnlayers.errors.NonFiniteError` naming the epoch and step, before the epoch
    ends (so a :class:`Checkpoint` keeps the last good file); Keras instead ends ``fit``
    quietly after that batch.

    >>> TerminateOnNaN()
    TerminateOnNaN()
    """

    def __repr__(self) -> str:
        return "TerminateOnNaN()"


class PlotCurves(Callback):
    """Save the loss and accuracy curves (training and validation) as a PNG after each epoch.

    ``metrics`` picks the panels (default: ``loss`` and, when tracked, ``accuracy``); with
    ``every=k`` it draws every ``k`` epochs and once more at the end. Needs matplotlib
    (``pip install "nnlayers[plot]"``): without it, making the callback raises ``ImportError``,
    before anything trains.
    """

    def __init__(
        self, path: str | Path, metrics: Sequence[str] | None = None, *, every: int = 1
    ) -> None:
        import importlib.util

        if importlib.util.find_spec("matplotlib") is None:
            # here, not after the first epoch has trained
            from ..plotting import _INSTALL

            raise ImportError(f"PlotCurves needs matplotlib, which is not installed: {_INSTALL}")
        self.path = Path(path)
        self.metrics = list(metrics) if metrics is not None else None
        self.every = max(1, int(every))
        self._drawn = 0

    def on_epoch_end(self, epoch: int, logs: Mapping[str, float]) -> None:
        if epoch % self.every == 0 and is_main_rank():
            self._draw()

    def on_train_end(self) -> None:
        if len(self.history) and self._drawn != len(self.history) and is_main_rank():
            self._draw()

    def _draw(self) -> None:
        from ..plotting import plot_history

        names = self.metrics
        if names is None:
            names = [m for m in ("loss", "accuracy") if m in self.history]
            names = names or [k for k in self.history.keys() if not _bookkeeping(k)][:2]  # noqa: SIM118
        plot_history(self.history, self.path, metrics=names)
        self._drawn = len(self.history)

    def __repr__(self) -> str:
        return f"PlotCurves({str(self.path)!r})"


def _bookkeeping(name: str) -> bool:
    named = name in ("time", "examples_per_second", "peak_device_mb", "lr")
    return named or name.startswith(("val_", "lr_"))


__all__ = [
    "BatchLogs", "Callback", "CallbackList", "Checkpoint", "EarlyStopping", "ModelCheckpoint",
    "PlotCurves", "TerminateOnNaN", "overrides",
]  # fmt: skip
