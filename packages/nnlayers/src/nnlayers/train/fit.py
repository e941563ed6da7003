"""``fit``: the training loop, with progress, validation, history and callbacks."""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

import arraycore

from ..errors import EmptyEpochError, NonFiniteError
from ..feeds import Feed, StreamFeed
from ..models.model import Means, Model
from .callbacks import Callback, CallbackList, TerminateOnNaN
from .history import History
from .progress import Progress


def fit(
    model: Model,
    feed: Iterable[Any],
    epochs: int | None = None,
    *,
    until_epoch: int | None = None,
    validation: Any = None,
    validation_split: float | None = None,
    callbacks: Sequence[Callback] = (),
    optimizer: Any = None,
    progress: bool = True,
    refresh: float | None = None,
    stop_on_nonfinite: bool = True,
) -> History:
    """Train ``model`` on the batches of ``feed`` for ``epochs`` epochs (default 1).

    - ``feed`` yields batches (tuples of arrays in the order of ``model.inputs``); a
      :class:`nnlayers.Feed` reshuffles itself each epoch.
    - ``epochs``: a run resumes, a trained model trains on. For a new model, or one a
      checkpoint just restored (``model.restore(...)``, or a ``Checkpoint(resume=True)``
      among the callbacks), it is the epoch the run ends at, counted from the start of
      training: restored at epoch 4, ``epochs=10`` trains epochs 5 to 10, so the same script
      run again after a crash finishes the same run. After a ``fit`` of this model it counts
      on from there, as Keras's second ``fit`` does: ``fit(model, feed, epochs=2)`` twice
      trains epochs 1-2, then 3-4.
    - ``until_epoch``: train up to that epoch, whatever came before (``until_epoch=10`` on a
      model at epoch 6 trains 7 to 10). Give ``epochs`` or ``until_epoch``, not both. A call
      with nothing left to train (a restored run already past ``epochs``, ``epochs=0``) warns
      and returns the history.
    - ``validation``: a feed, or a tuple of arrays ``(x, y)``, evaluated after every epoch;
      its metrics enter the history as ``val_loss``, ``val_accuracy``, ...
    - ``validation_split``: Keras's: the last fraction of a :class:`~nnlayers.Feed`'s
      examples (taken before shuffling) is held out as the validation data, and training
      uses the rest (:meth:`Feed.split <nnlayers.Feed.split>`); not with ``validation``.
    - ``callbacks``: :class:`~nnlayers.train.EarlyStopping`, :class:`~nnlayers.train.Checkpoint`
      (:class:`~nnlayers.train.ModelCheckpoint`), :class:`~nnlayers.train.PlotCurves`,
      :class:`~nnlayers.train.CSVLogger`, :class:`~nnlayers.train.TensorBoard`,
      :class:`~nnlayers.train.ReduceLROnPlateau`, :class:`~nnlayers.train.LearningRateScheduler`,
      :class:`~nnlayers.train.TerminateOnNaN` or your own :class:`~nnlayers.train.Callback`.
      Per-batch hooks run only for callbacks that override them (found once, when training
      begins); without any, no step pays for callbacks.
    - ``optimizer`` replaces the model's (``model.optimizer``) before training.
    - ``progress``: a tqdm bar per epoch with examples per second and the running mean of the
      metrics, brought from the device every ``refresh`` seconds (default: 0.5 on a terminal,
      30 in a log file) and at the end of an epoch, never per step.
    - ``stop_on_nonfinite``: a loss that becomes NaN or infinite stops training with a
      :class:`~nnlayers.errors.NonFiniteError` naming the epoch and step, before the epoch ends,
      so a :class:`~nnlayers.train.Checkpoint` keeps the last good checkpoint. Host losses (the
      NumPy backend) are checked every step; device losses when the metrics next reach the host,
      at most ``NONFINITE_CHECK_STEPS`` steps later (no synchronisation per step).
      ``False`` trains on regardless, unless a :class:`~nnlayers.train.TerminateOnNaN` is
      among the callbacks (Keras's name for this check, which then stays on).

    A model prepared with :func:`nnlayers.distributed.data_parallel` trains on every rank of
    an MPI run: a :class:`~nnlayers.Feed` is sharded by rank (its ``batch_size`` is per
    rank), the metrics (and validation metrics) are averaged over the ranks, the progress bar
    and the callbacks' files are rank 0's alone, and an exception on any rank ends every rank
    (``MPI_Abort``) after printing it (see "Data-parallel training" in ``docs/training.md``).

    ``fit`` takes a feed of batches, not whole arrays: Keras's ``fit(model, x, y)`` (or
    ``fit(model, (x, y))``) raises a ``TypeError`` that says to write
    ``fit(model, nnlayers.Feed(x, y, batch_size=32), epochs=10)``.

    Before the first step it calls :func:`arraycore.check_threads`, once per call and cheap:
    the thread count in force (``arraycore.set_threads``, else ``ARRAYCORE_NUM_THREADS``)
    reaches the BLAS and OpenMP pools of libraries loaded or reset since it was set (importing
    PyTorch resets OpenMP's), and on the NumPy backend, when no thread count was chosen and other processes
    already keep the cores busy, an :class:`arraycore.PerformanceWarning` (once per process)
    says how to run BLAS on one thread (``ARRAYCORE_NUM_THREADS=1`` or
    ``arraycore.set_threads(1)``): BLAS threads fighting for busy cores can make training ten
    times slower. The check sits here, where a run starts, rather than in every matrix product
    or at import.

    Returns the model's :class:`History` (``model.history``), which grows across calls.

    >>> import numpy as np, nnlayers
    >>> from nnlayers.layers import Affine, Sequential
    >>> from nnlayers.models import Classifier
    >>> from nnlayers.optim import SGD
    >>> x = np.random.default_rng(0).normal(size=(64, 2)).astype("float32")
    >>> y = (x[:, 0] > 0).astype("int64")
    >>> model = Classifier(Sequential([Affine(8, activation="tanh"), Affine(2)], seed=0), (2,))
    >>> history = fit(
    ...     model,
    ...     [(x[i : i + 16], y[i : i + 16]) for i in range(0, 64, 16)],
    ...     epochs=30,
    ...     optimizer=SGD(0.5),
    ...     progress=False,
    ... )
    >>> len(history), history.last["accuracy"] > 0.9
    (30, True)
    """
    target = _target_epoch(model, epochs, until_epoch)
    _check_arguments(feed, target)
    if validation_split is not None:
        if validation is not None:
            raise TypeError("fit: give validation= or validation_split=, not both")
        if not isinstance(feed, Feed):
            raise TypeError(
                f"fit: validation_split= splits a nnlayers.Feed of arrays, got a "
                f"{type(feed).__name__}; give validation=(x_val, y_val) (or a feed) instead"
            )
        feed, validation = feed.split(validation_split)
    arraycore.check_threads(model.xp, stacklevel=2)  # the warning points at fit's caller
    arraycore.check_cpu_extra(model.xp, stacklevel=2)  # once: the NumPy path without [cpu]
    if optimizer is not None:
        model.optimizer = optimizer
    if not model.optimizers():
        raise ValueError(
            "fit: the model has no optimizer; pass optimizer=nnlayers.optim.Adam(1e-3) (or set "
            "model.optimizer)"
        )
    sync = getattr(model, "data_parallel", None)  # nnlayers.distributed.data_parallel(model)
    if sync is not None:
        feed = sync.prepare_feed(feed)  # a Feed is sharded by rank
        progress = progress and sync.context.is_main
    # in-memory host data: class labels checked once, on the host, before any step; then the
    # steps skip arraycore's per-batch label check, which on a GPU waits to copy them back
    checked = _check_host_data(model, feed)
    if validation is not None:
        checked = _check_host_data(model, validation) and checked
    labels = arraycore.checks(False, only="labels") if checked else contextlib.nullcontext()
    # and its ids (an embedding's indices) checked there too: the lookups skip the device check
    ids = (
        model.graph.checked_feeds(_unaugmented_inputs(model, feed, validation))
        if checked
        else contextlib.nullcontext()
    )
    history = getattr(model, "history", None)
    if not isinstance(history, History):
        history = History()
        model.history = history
    if any(isinstance(c, TerminateOnNaN) for c in callbacks):
        stop_on_nonfinite = True
    epochs = target
    state = TrainingState(model, history, epochs)
    hooks = CallbackList(callbacks, state)
    try:
        hooks.on_train_begin()
    except BaseException as error:
        _abort_others(sync, error)
        raise
    if model.history is not history and isinstance(model.history, History):
        history = state.history = model.history  # a checkpoint restored the run's own history
    state.global_step = _steps_taken(model)  # after on_train_begin: a checkpoint may resume
    state.start_epoch = model.epoch
    total = _examples_per_epoch(feed)
    with labels, ids:
        try:
            _check_one_shot(feed, epochs, model.epoch)  # after on_train_begin, which may resume
            if model.epoch >= epochs and not state.stop:
                warnings.warn(
                    f"fit: nothing to train: the model is at epoch {model.epoch} and this call "
                    f"trains up to epoch {epochs} (a restored run resumes to epoch `epochs`); "
                    "until_epoch=n trains up to epoch n",
                    UserWarning,
                    stacklevel=2,
                )
            while model.epoch < epochs and not state.stop:
                epoch = model.epoch + 1
                model.start_epoch(epoch)
                set_epoch = getattr(feed, "set_epoch", None)
                if set_epoch is not None:
                    set_epoch(epoch)
                hooks.on_epoch_begin(epoch)
                rates = learning_rates(model) if state.log_lr else {}  # what this epoch trains with
                logs = _run_epoch(
                    model,
                    feed,
                    epoch,
                    epochs,
                    total,
                    progress,
                    refresh,
                    validation,
                    stop_on_nonfinite,
                    state,
                    hooks if hooks.has_batch_hooks else None,
                )
                logs.update(rates)
                model.epoch = epoch
                history.append({"epoch": epoch, **logs})
                hooks.on_epoch_end(epoch, logs)
        except BaseException as error:
            _abort_others(sync, error)
            raise
        finally:
            model.train()
            if model.epoch > state.start_epoch:
                model.resumed = False  # trained on: the next fit's epochs count from here
            hooks.on_train_end()
    return history


def _abort_others(sync: Any, error: BaseException) -> None:
    """In a data-parallel run of several ranks, an exception on one rank leaves the others
    waiting in a collective: print it with the rank and end every rank (``MPI_Abort``)."""
    if sync is not None:
        sync.context.abort(f"fit raised {type(error).__name__}", error)


def _run_epoch(
    model: Model,
    feed: Iterable[Any],
    epoch: int,
    epochs: int,
    total: int | None,
    progress: bool,
    refresh: float | None,
    validation: Any,
    stop_on_nonfinite: bool = True,
    state: TrainingState | None = None,
    hooks: CallbackList | None = None,
) -> dict[str, float]:
    model.train()
    sync = getattr(model, "data_parallel", None)
    means = Means(model.xp, model.metric_names)
    bar = Progress(epoch, epochs, total, enabled=progress, refresh=refresh)
    step: Callable[[Any], list[Any]] = model.train_step
    add, update, due = means.add, bar.update, bar.due
    first_step = 0 if state is None else state.global_step
    if hooks is not None:  # only when a callback has per-batch hooks: decided once, per fit
        step = hooks.batch_step(step, model.xp, model.metric_names, epoch, first_step)
    logs: dict[str, float] = {}
    start = time.perf_counter()
    try:
        for k, batch in enumerate(feed, 1):
            n = int(batch[0].shape[0])
            values = step(batch)
            add(values, n)
            update(n)
            if stop_on_nonfinite:
                loss = values[0]
                if isinstance(loss, np.generic | np.ndarray):  # on the host already: free
                    if not np.isfinite(loss):
                        _stop(epoch, k, float(loss))
                elif means.pending >= NONFINITE_CHECK_STEPS:
                    means.flush()
                    _check(means, epoch)
            if due():
                bar.show(means.result())
                if stop_on_nonfinite:
                    _check(means, epoch)
        logs = means.result()
        if not means.steps:
            raise EmptyEpochError(_empty_epoch_message(feed, epoch, model.epoch))
        if state is not None:
            state.global_step = first_step + means.steps
        if stop_on_nonfinite:
            _check(means, epoch)
        seconds = time.perf_counter() - start
        count = means.count
        if sync is not None and sync.world_size > 1:
            # every rank's examples: the same logs (and callback decisions) on every rank
            logs, count, seconds = sync.combine(means, seconds)
            sync.average_buffers(model.buffers)  # batch-norm statistics: one value everywhere
        logs["time"] = seconds
        logs["examples_per_second"] = count / seconds if seconds > 0 else float("nan")
        memory = model.xp.__array_namespace_info__().memory_stats()
        if memory is not None and "peak_bytes" in memory:
            # the backend's high-water mark of device memory (CUDA: CuPy's pool) so far
            logs["peak_device_mb"] = memory["peak_bytes"] / 2**20
        if validation is not None:
            if sync is not None:  # split between the ranks, averaged over them
                scores = sync.evaluate(model, validation)
            else:
                data = validation if isinstance(validation, tuple) else (validation,)
                scores = model._evaluate(data[0], data[1:], 256, empty=f"fit: epoch {epoch}")
            logs.update({f"val_{k}": v for k, v in scores.items()})
    finally:
        bar.close(logs)
    return logs


#: How many steps a device loss may go unchecked for NaN/inf (each check is one host transfer).
NONFINITE_CHECK_STEPS = 32


def _check(means: Means, epoch: int) -> None:
    if means.first_nonfinite is not None:
        _stop(epoch, *means.first_nonfinite)


def _stop(epoch: int, step: int, value: float) -> None:
    raise NonFiniteError(
        f"fit: the loss became {value} at epoch {epoch}, step {step}; training stopped there "
        "(the parameters may now hold NaN or infinite values; the last checkpoint written is "
        "kept). Lower the learning rate, clip the gradients or check the data for NaN; "
        "fit(..., stop_on_nonfinite=False) trains on regardless"
    )


def _empty_epoch_message(feed: Any, epoch: int, done: int) -> str:
    what = type(feed).__name__
    if isinstance(feed, Iterator):
        why = (
            f"a {what} is an iterator, used up by the first pass over it; pass a Feed(x, y), "
            "a StreamFeed(factory) whose callable returns a fresh iterable per epoch, or a list "
            "of batches"
        )
    elif isinstance(feed, StreamFeed):
        why = (
            f"the {what}'s source yielded no examples this epoch (a source callable must "
            "return a fresh iterable each time it is called)"
        )
    else:
        why = f"the {what} yielded no batch"
    return (
        f"fit: epoch {epoch} read no data: {why}. Training stopped before the epoch was counted "
        f"(model.epoch is still {done})"
    )


def _target_epoch(model: Model, epochs: Any, until_epoch: Any) -> Any:
    """The epoch this call trains up to: ``model.epoch + epochs`` (Keras's meaning; 1 epoch
    by default) or ``until_epoch``. Not-an-int values are passed on for
    :func:`_check_arguments` to name (Keras's ``fit(model, x, y)``)."""
    if until_epoch is not None:
        if epochs is not None:
            raise TypeError(
                f"fit: give epochs= (how many more) or until_epoch= (the last epoch), not both; "
                f"got epochs={epochs!r}, until_epoch={until_epoch!r}"
            )
        if isinstance(until_epoch, bool) or not isinstance(until_epoch, int | np.integer):
            raise TypeError(f"fit: until_epoch must be an int, got {until_epoch!r}")
        if until_epoch < 0:
            raise ValueError(f"fit: until_epoch must be >= 0, got {until_epoch}")
        return int(until_epoch)
    if epochs is None:
        epochs = 1
    if isinstance(epochs, bool) or not isinstance(epochs, int | np.integer):
        return epochs  # _check_arguments says what to write
    if epochs < 0:
        raise ValueError(f"fit: epochs must be >= 0, got {epochs}")
    if getattr(model, "resumed", False) or not model.epoch:
        return int(epochs)  # a new or restored run: the epoch it ends at
    return int(model.epoch) + int(epochs)


def _check_one_shot(feed: Any, epochs: int, done: int) -> None:
    """Refuse, before anything trains, an iterator (a generator) for more than one epoch: the
    second epoch would find it used up."""
    if isinstance(feed, Iterator) and epochs - done > 1:
        raise TypeError(
            f"fit: the feed is a {type(feed).__name__}, an iterator that the first epoch uses "
            f"up, and epochs {done + 2} to {epochs} would read no data; pass a "
            "nnlayers.Feed(x, y, batch_size=32), a nnlayers.StreamFeed(factory) whose "
            "callable returns a fresh iterable of batches each epoch, or a list of batches"
        )


def _check_arguments(feed: Any, epochs: Any) -> None:
    """Refuse Keras's ``fit(x, y)`` habits with the call to write instead."""
    arrays = hasattr(feed, "shape") or (
        isinstance(feed, tuple | list) and len(feed) > 0 and all(hasattr(a, "shape") for a in feed)
    )
    if arrays or hasattr(epochs, "shape"):
        if hasattr(feed, "shape") and hasattr(epochs, "shape"):
            what = "fit(model, x, y) (Keras's model.fit(x, y))"
        elif hasattr(feed, "shape"):
            what = f"fit(model, x) with an array of shape {tuple(feed.shape)}"
        elif arrays:
            what = f"fit(model, (x, y)) with a {type(feed).__name__} of {len(feed)} arrays"
        else:
            what = f"an array of shape {tuple(epochs.shape)} as epochs"
        raise TypeError(
            f"fit: {what}: fit trains on a feed that yields batches, not on whole arrays; "
            "write fit(model, nnlayers.Feed(x, y, batch_size=32), epochs=10) (a list of "
            "(x, y) batch tuples works too)"
        )
    if isinstance(epochs, bool) or not isinstance(epochs, int | np.integer):
        raise TypeError(f"fit: epochs must be an int (how many more epochs), got {epochs!r}")


def _steps_taken(model: Model) -> int:
    """Training steps before this ``fit``: the first optimiser's step count (which a
    checkpoint restores), or 0."""
    for optimizer in model.optimizers().values():
        count = getattr(optimizer, "step_count", None)
        if isinstance(count, int):
            return count
    return 0


def learning_rates(model: Model) -> dict[str, float]:
    """The learning rate each optimiser of ``model`` uses next, for the history: ``"lr"`` for
    the first, ``"lr_<name>"`` for the others (a GAN's ``lr_generator``)."""
    rates = {}
    for i, (name, optimizer) in enumerate(model.optimizers().items()):
        rate = getattr(optimizer, "learning_rate", None)
        if isinstance(rate, int | float):
            rates["lr" if i == 0 else f"lr_{name}"] = float(rate)
    return rates


def _examples_per_epoch(feed: Any) -> int | None:
    """Examples in one pass over ``feed`` (for the bar's total), or ``None`` if unknown."""
    for name in ("examples_per_epoch", "num_examples"):
        value = getattr(feed, name, None)
        if isinstance(value, int):
            return value
    if isinstance(feed, list | tuple):
        return sum(int(batch[0].shape[0]) for batch in feed)
    return None


class TrainingState:
    """What callbacks see of a run: the model, its history, the target epoch and ``stop``.

    - ``stop``: set it to ``True`` to stop after the current epoch (from any hook, per-batch
      ones included).
    - ``global_step``: training steps so far, counted from the first optimiser's step count
      when training began (so it keeps growing across ``fit`` calls and resumed runs); it
      advances at the end of each epoch, and per-batch hooks see the step's own in
      :attr:`BatchLogs.global_step`.
    - ``log_lr``: set it to ``True`` (the learning-rate callbacks do) to add the learning rate
      each epoch trained with to its record: ``"lr"``, and ``"lr_<name>"`` for a second
      optimiser (see :func:`learning_rates`); ``fit`` reads it after the epoch-begin hooks.
    """

    def __init__(self, model: Model, history: History, epochs: int) -> None:
        self.model = model
        self.history = history
        self.epochs = epochs
        self.stop = False
        self.global_step = 0
        self.start_epoch = 0  # the model's epoch when training began (after any resume)
        self.log_lr = False


def _unaugmented_inputs(model: Model, *feeds: Any) -> list[Any]:
    """The model's inputs whose batches are slices of the feeds' arrays as given: all but the
    first where a feed augments it (an augmentation's output was not checked)."""
    augmented = any(getattr(f, "augment", None) is not None for f in feeds)
    return list(model.inputs[1:] if augmented else model.inputs)


def _check_host_data(model: Model, data: Any) -> bool:
    """Check the class labels and ids of in-memory host data (a :class:`~nnlayers.Feed`'s
    arrays or a tuple of arrays) with ``model.check_data``; whether every array was on the
    host, so that each of its batches holds checked labels and ids."""
    arrays = getattr(data, "arrays", data)
    if not isinstance(arrays, list | tuple) or len(arrays) != len(model.inputs):
        return False
    model.check_data(*arrays)
    return all(isinstance(a, np.ndarray) for a in arrays)
