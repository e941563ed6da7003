"""Feeds: iterate a data set in batches of backend arrays, in memory or streamed from disk.

A feed yields one tuple per batch, ``(*inputs, targets)``, each element an array of the active
arraycore backend (moved there with ``xp.asarray``). Its ``epoch`` says which epoch the next
iteration produces; shuffling depends only on ``(seed, epoch)``, so a run resumed at epoch 5
(``feed.set_epoch(5)``) sees exactly the batches an uninterrupted run would have seen.

>>> import numpy as np, arraycore
>>> x = np.arange(10, dtype=np.float32).reshape(5, 2)
>>> y = np.arange(5)
>>> feed = Feed(x, y, batch_size=2, shuffle=False)
>>> len(feed), [arraycore.to_numpy(labels).tolist() for inputs, labels in feed]
(3, [[0, 1], [2, 3], [4]])
"""

from __future__ import annotations

import math
import queue
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

import arraycore
from arraycore import ArrayNamespace

from .augment import as_transform, epoch_seed

Batch = tuple[Any, ...]
_LAST_BATCH = ("keep", "drop", "pad")


def _check_batch_size(owner: str, batch_size: Any) -> int:
    if (
        isinstance(batch_size, bool)
        or not isinstance(batch_size, int | np.integer)
        or batch_size < 1
    ):
        raise ValueError(f"{owner}: batch_size must be an int >= 1, got {batch_size!r}")
    return int(batch_size)


def _check_last_batch(owner: str, last_batch: Any) -> str:
    if last_batch not in _LAST_BATCH:
        raise ValueError(f"{owner}: last_batch must be 'keep', 'drop' or 'pad', got {last_batch!r}")
    return str(last_batch)


def _check_seed(owner: str, seed: Any) -> int:
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ValueError(f"{owner}: seed must be an int >= 0, got {seed!r}")
    return int(seed)


def _check_epoch(owner: str, epoch: Any) -> int:
    if isinstance(epoch, bool) or not isinstance(epoch, int | np.integer) or epoch < 1:
        raise ValueError(f"{owner}: epoch must be an int >= 1, got {epoch!r}")
    return int(epoch)


def _epoch_rng(seed: int, epoch: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([seed, epoch]))


class Feed:
    """Batches of in-memory data, shuffled reproducibly, moved to the device batch by batch.

    - ``inputs``: one array or a tuple/list of arrays with the same number of examples (first
      axis); host NumPy arrays, or arrays already on the backend (then batches are gathered on
      the device with ``take``). ``targets``: an optional array, yielded last.
    - ``shuffle``: a new order every epoch, from ``(seed, epoch)`` only.
    - ``last_batch``: what to do with a final batch smaller than ``batch_size``: ``"keep"`` it,
      ``"drop"`` it, or ``"pad"`` it to full size with examples from the start of the epoch's
      order (every batch then has the same shape, which compiled graphs like).
    - ``xp``: the namespace to move batches to (default: the active one, resolved when
      iteration starts).
    - ``augment``: a transform of :mod:`nnlayers.augment` (random crops, flips, shifts) or a list
      of them, applied on the device to the inputs (the first array) of every batch, with a
      random generator of the backend seeded from ``seed`` and the epoch: an epoch's augmented
      batches are the same every run, and after a resume.

    - ``shard``: ``(rank, world_size)`` makes this feed yield only rank ``rank``'s part of
      every epoch, for data-parallel training (:mod:`nnlayers.distributed`; ``fit`` sets it
      on a data-parallel model's :class:`Feed` that has none). ``batch_size`` is then the
      batch of one rank: the epoch's order (the same on every rank: same seed) is cut into
      global batches of ``world_size * batch_size`` examples, and rank ``r`` takes the
      ``r``-th block of each, so every rank takes the same number of steps and the ranks'
      batches of a step, joined in rank order, are the batch a single process with
      ``batch_size * world_size`` would take. The last, smaller global batch is dropped
      (``"drop"``), padded to full size from the start of the order (``"pad"``), or split
      between the ranks as evenly as possible (``"keep"``; sizes differ by one at most, and
      gradients are averaged weighted by each rank's examples, so the step is the single
      process's; a tail of fewer examples than ranks is padded to one example per rank).

    Every batch is memory of its own: a feed never hands out a view of the arrays it was
    given, so an augmentation or a training loop that edits its batch in place leaves the
    user's data as it was, whatever ``shuffle`` and the backend.

    ``len(feed)`` is the number of batches per epoch; ``feed.epoch`` the epoch that the next
    iteration produces (1 at first, then counting up by one per iteration).
    """

    def __init__(
        self,
        inputs: Any,
        targets: Any = None,
        batch_size: int = 32,
        shuffle: bool = True,
        seed: int = 0,
        last_batch: str = "keep",
        *,
        xp: ArrayNamespace | None = None,
        augment: Any = None,
        shard: tuple[int, int] | None = None,
    ) -> None:
        self.batch_size = _check_batch_size("Feed", batch_size)
        self.augment = as_transform(augment)
        self.last_batch = _check_last_batch("Feed", last_batch)
        self.seed = _check_seed("Feed", seed)
        self.shuffle = bool(shuffle)
        self._xp = xp
        if isinstance(inputs, tuple | list) and inputs and all(hasattr(a, "shape") for a in inputs):
            arrays = list(inputs)
            labels = [f"inputs[{i}]" for i in range(len(arrays))]
        else:
            arrays = [inputs]
            labels = ["inputs"]
        if targets is not None:
            arrays.append(targets)
            labels.append("targets")
        self.has_targets = targets is not None
        self.arrays: list[Any] = [self._as_array(a, label) for a, label in zip(arrays, labels)]
        counts = [int(a.shape[0]) for a in self.arrays]
        for label, count in zip(labels, counts):
            if count != counts[0]:
                raise ValueError(
                    f"Feed: {label} has {count} examples but {labels[0]} has {counts[0]}; every "
                    f"array needs the same length along its first axis"
                )
        self.num_examples = counts[0]
        if self.num_examples == 0:
            raise ValueError("Feed: the data set is empty")
        self._shard: tuple[int, int] | None = None
        self.shard = shard
        self._epoch = 1

    @property
    def shard(self) -> tuple[int, int] | None:
        """``(rank, world_size)`` of a feed that yields one rank's part, or ``None``."""
        return self._shard

    @shard.setter
    def shard(self, shard: tuple[int, int] | None) -> None:
        world = 1
        if shard is not None:
            ok = isinstance(shard, tuple | list) and len(shard) == 2
            ok = ok and all(
                isinstance(v, int | np.integer) and not isinstance(v, bool) for v in shard
            )
            if not ok or not 0 <= shard[0] < shard[1]:
                raise ValueError(
                    f"Feed: shard must be (rank, world_size) with 0 <= rank < world_size, got "
                    f"{shard!r}"
                )
            shard = (int(shard[0]), int(shard[1]))
            world = shard[1]
        step = self.batch_size * world
        if self.last_batch == "drop" and self.num_examples < step:
            ranks = f" on {world} ranks" if shard is not None else ""
            raise ValueError(
                f"Feed: last_batch='drop' with {self.num_examples} examples and batch_size "
                f"{self.batch_size}{ranks} would yield no batch"
            )
        self._shard = shard

    @staticmethod
    def _as_array(a: Any, label: str) -> Any:
        if not hasattr(a, "shape"):
            a = np.asarray(a)
        if len(a.shape) == 0:
            raise ValueError(f"Feed: {label} is a scalar; it needs a first (example) axis")
        return a

    def split(self, fraction: float) -> tuple[Feed, tuple[Any, ...]]:
        """Keras's ``validation_split``: a feed of the first ``1 - fraction`` of the examples
        (with this feed's settings) and the last ``fraction`` as a tuple of arrays for
        validation, taken before any shuffling, as Keras takes them."""
        if isinstance(fraction, bool) or not isinstance(fraction, int | float):
            raise TypeError(f"Feed.split: the fraction must be a number, got {fraction!r}")
        if not 0.0 < fraction < 1.0:
            raise ValueError(f"Feed.split: the fraction must lie in (0, 1), got {fraction}")
        n = self.num_examples
        held = int(n * fraction)
        if held < 1 or held >= n:
            raise ValueError(
                f"Feed.split: {fraction} of {n} examples leaves {held} for validation and "
                f"{n - held} for training; each needs at least one"
            )
        keep = n - held
        head = [a[:keep] for a in self.arrays]
        tail = tuple(a[keep:] for a in self.arrays)
        inputs = head[:-1] if self.has_targets else head
        feed = Feed(
            inputs if len(inputs) > 1 else inputs[0],
            head[-1] if self.has_targets else None,
            self.batch_size,
            self.shuffle,
            self.seed,
            self.last_batch,
            xp=self._xp,
            augment=self.augment,
            shard=self._shard,
        )
        return feed, tail

    # -- epochs ------------------------------------------------------------------------------
    @property
    def epoch(self) -> int:
        """The epoch the next iteration produces (1-based)."""
        return self._epoch

    @epoch.setter
    def epoch(self, epoch: int) -> None:
        self._epoch = _check_epoch("Feed", epoch)

    def set_epoch(self, epoch: int) -> None:
        """Make the next iteration produce epoch ``epoch`` (its order); used to resume."""
        self.epoch = epoch

    # -- sizes -------------------------------------------------------------------------------
    def __len__(self) -> int:
        """Batches per epoch (of this rank's part, for a sharded feed: the same on every rank)."""
        n, b = self.num_examples, self.batch_size * self._world
        return n // b if self.last_batch == "drop" else math.ceil(n / b)

    @property
    def _world(self) -> int:
        return 1 if self._shard is None else self._shard[1]

    @property
    def examples_per_epoch(self) -> int:
        """Examples yielded per epoch (padding counted, dropped examples not; this rank's, for
        a sharded feed)."""
        if self.last_batch != "keep":
            return len(self) * self.batch_size
        if self._shard is None:
            return self.num_examples
        return sum(len(index) for index in self._rank_batches(np.arange(self.num_examples)))

    def order(self, epoch: int | None = None) -> np.ndarray:
        """The example order of ``epoch`` (default: the next one), int64 indices."""
        epoch = self._epoch if epoch is None else _check_epoch("Feed", epoch)
        if not self.shuffle:
            return np.arange(self.num_examples, dtype=np.int64)
        return _epoch_rng(self.seed, epoch).permutation(self.num_examples).astype(np.int64)

    # -- iteration ---------------------------------------------------------------------------
    def __iter__(self) -> Iterator[Batch]:
        epoch = self._epoch
        self._epoch = epoch + 1
        return self._batches(epoch)

    def _batches(self, epoch: int) -> Iterator[Batch]:
        on_host = [isinstance(a, np.ndarray) for a in self.arrays]
        device = [a for a, h in zip(self.arrays, on_host) if not h]
        if self._xp is not None:
            xp = self._xp
        elif device:
            xp = arraycore.namespace_of(*device)
        else:
            xp = arraycore.namespace()
        order = self.order(epoch)
        n, b = self.num_examples, self.batch_size
        augment = self.augment
        seed = epoch_seed(self.seed, epoch)
        if self._shard is not None and self._shard[0]:
            seed = epoch_seed(seed, self._shard[0])  # each rank its own augmentation stream
        rng = None if augment is None else xp.random.default_rng(seed)
        if self._shard is not None:
            for index in self._rank_batches(order):
                contiguous = not self.shuffle and bool(np.all(np.diff(index) == 1))
                yield self._gather(xp, on_host, index, int(index[0]), contiguous, augment, rng)
            return
        for start in range(0, n, b):
            index = order[start : start + b]
            if len(index) < b:
                if self.last_batch == "drop":
                    return
                if self.last_batch == "pad":
                    index = np.concatenate([index, np.resize(order, b - len(index))])
            contiguous = not self.shuffle and len(index) == min(b, n - start)
            yield self._gather(xp, on_host, index, start, contiguous, augment, rng)

    def _gather(
        self,
        xp: Any,
        on_host: list[bool],
        index: np.ndarray,
        start: int,
        contiguous: bool,
        augment: Any,
        rng: Any,
    ) -> Batch:
        """The batch of examples ``index`` on ``xp`` (a slice from ``start`` where the indices
        are ``contiguous``; a device gather for arrays already on the backend), augmented."""
        batch = []
        for array, host in zip(self.arrays, on_host):
            if host:
                # A slice is a view of the user's array: copied (on a host backend, where asarray
                # would hand the view itself out), so no augmentation or loop that edits its
                # batch in place can change the user's data; a gather is a copy already.
                if contiguous:
                    batch.append(xp.asarray(array[start : start + len(index)], copy=True))
                else:
                    batch.append(xp.asarray(array[index]))
            else:  # the feed's own permutation: in range by construction, so no device check
                with arraycore.checks(False, only="indices"):
                    batch.append(xp.take(array, xp.asarray(index), axis=0))
        if augment is not None:
            batch[0] = augment(batch[0], rng)
        return tuple(batch)

    def _rank_batches(self, order: np.ndarray) -> Iterator[np.ndarray]:
        """This rank's batches of the epoch whose example order is ``order`` (see ``shard``)."""
        assert self._shard is not None
        rank, world = self._shard
        n, b = len(order), self.batch_size
        step = b * world
        full = n // step
        for k in range(full):
            yield order[k * step + rank * b : k * step + (rank + 1) * b]
        tail = order[full * step :]
        if not len(tail) or self.last_batch == "drop":
            return
        if self.last_batch == "pad" or len(tail) < world:
            size = step if self.last_batch == "pad" else world
            tail = np.concatenate([tail, np.resize(order, size - len(tail))])
            if self.last_batch == "pad":
                yield tail[rank * b : (rank + 1) * b]
                return
        # "keep": split the tail as evenly as possible, the first ranks one example more
        small, extra = divmod(len(tail), world)
        start = rank * small + min(rank, extra)
        yield tail[start : start + small + (rank < extra)]

    def __repr__(self) -> str:
        shapes = ", ".join(str(tuple(a.shape)) for a in self.arrays)
        extra = "" if self.augment is None else f", augment={self.augment!r}"
        if self._shard is not None:
            extra += f", shard={self._shard}"
        return (
            f"Feed({shapes}, batch_size={self.batch_size}, shuffle={self.shuffle}, "
            f"seed={self.seed}, last_batch={self.last_batch!r}, epoch={self._epoch}{extra})"
        )


# -- streaming ---------------------------------------------------------------------------------
class _End:
    pass


class _Failure:
    def __init__(self, error: BaseException, context: str) -> None:
        self.error = error
        self.context = context


class StreamFeed:
    """Batches streamed from a source too large for memory, prepared by a background thread.

    ``source`` is either

    - a callable returning an iterable of *chunks* (called once per epoch), or
    - a sequence of items (typically file paths) and ``loader(item) -> chunk``.

    A chunk is an array or a tuple of arrays sharing their first (example) axis, of any length
    (one file's contents, say). A background thread loads chunks, cuts and joins them into
    batches of ``batch_size`` examples on the host, and keeps up to ``prefetch`` batches ready
    while the device works on the current one; the consumer moves each batch to the device with
    ``xp.asarray``. ``last_batch`` is as for :class:`Feed` (``"pad"`` repeats examples from the
    epoch's first batch). ``shuffle=True`` permutes the items (files) and the examples within
    each chunk, per ``(seed, epoch)``.

    An exception raised by the loader or the source is raised again in the consumer, with a
    note naming the item and the epoch. Stopping early (``break``), :meth:`close` or leaving a
    ``with`` block stops the thread.
    """

    def __init__(
        self,
        source: Callable[[], Iterable[Any]] | Sequence[Any],
        batch_size: int = 32,
        *,
        loader: Callable[[Any], Any] | None = None,
        prefetch: int = 2,
        last_batch: str = "keep",
        shuffle: bool = False,
        seed: int = 0,
        xp: ArrayNamespace | None = None,
    ) -> None:
        self.batch_size = _check_batch_size("StreamFeed", batch_size)
        self.last_batch = _check_last_batch("StreamFeed", last_batch)
        self.seed = _check_seed("StreamFeed", seed)
        self.shuffle = bool(shuffle)
        if isinstance(prefetch, bool) or not isinstance(prefetch, int) or prefetch < 1:
            raise ValueError(f"StreamFeed: prefetch must be an int >= 1, got {prefetch!r}")
        self.prefetch = prefetch
        if callable(source) and loader is None:
            self._factory: Callable[[], Iterable[Any]] | None = source
            self.items: list[Any] | None = None
        elif isinstance(source, Sequence) and not isinstance(source, str | bytes):
            if loader is None:
                raise ValueError(
                    "StreamFeed: a list of items needs loader=, a function item -> arrays"
                )
            self._factory = None
            self.items = list(source)
            if not self.items:
                raise ValueError("StreamFeed: the list of items is empty")
        else:
            raise TypeError(
                f"StreamFeed: source must be a callable returning chunks, or a list of items "
                f"with loader=; got {type(source).__name__}"
            )
        self.loader = loader
        self._xp = xp
        self._epoch = 1
        self._stops: list[threading.Event] = []

    @property
    def epoch(self) -> int:
        """The epoch the next iteration produces (1-based)."""
        return self._epoch

    @epoch.setter
    def epoch(self, epoch: int) -> None:
        self._epoch = _check_epoch("StreamFeed", epoch)

    def set_epoch(self, epoch: int) -> None:
        """Make the next iteration produce epoch ``epoch``; used to resume."""
        self.epoch = epoch

    def __iter__(self) -> Iterator[Batch]:
        epoch = self._epoch
        self._epoch = epoch + 1
        return self._consume(epoch)

    def _consume(self, epoch: int) -> Iterator[Batch]:
        xp = self._xp if self._xp is not None else arraycore.namespace()
        ready: queue.Queue[Any] = queue.Queue(maxsize=self.prefetch)
        stop = threading.Event()
        thread = threading.Thread(
            target=self._produce,
            args=(epoch, ready, stop),
            name=f"nnlayers-StreamFeed-epoch{epoch}",
            daemon=True,
        )
        self._stops.append(stop)
        thread.start()
        try:
            while True:
                item = ready.get()
                if isinstance(item, _End):
                    return
                if isinstance(item, _Failure):
                    error = item.error
                    error.add_note(f"StreamFeed: raised in the loading thread {item.context}")
                    raise error
                yield tuple(xp.asarray(a) for a in item)
        finally:
            stop.set()
            while True:  # unblock a producer waiting to put
                try:
                    ready.get_nowait()
                except queue.Empty:
                    break
            thread.join()
            self._stops.remove(stop)

    def close(self) -> None:
        """Stop the background threads of every iteration in progress."""
        for stop in list(self._stops):
            stop.set()

    def __enter__(self) -> StreamFeed:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the background thread -------------------------------------------------------------------
    def _produce(self, epoch: int, ready: queue.Queue[Any], stop: threading.Event) -> None:
        def put(item: Any) -> bool:
            while not stop.is_set():
                try:
                    ready.put(item, timeout=0.05)
                    return True
                except queue.Full:
                    continue
            return False

        rng = _epoch_rng(self.seed, epoch)
        where: dict[str, str] = {"label": "the source"}
        chunks: Any = None
        try:
            b = self.batch_size
            pending: list[tuple[np.ndarray, ...]] = []
            have = 0
            first: tuple[np.ndarray, ...] | None = None
            fields: int | None = None
            chunks = self._chunks(rng, where)
            for chunk in chunks:
                arrays = self._check_chunk(chunk, fields)
                fields = len(arrays)
                length = int(arrays[0].shape[0])
                if self.shuffle and length > 1:
                    perm = rng.permutation(length)
                    arrays = tuple(a[perm] for a in arrays)
                start = 0
                while start < length:
                    take = min(b - have, length - start)
                    pending.append(tuple(a[start : start + take] for a in arrays))
                    have += take
                    start += take
                    if have == b:
                        batch = _join(pending)
                        pending, have = [], 0
                        if first is None:
                            first = batch
                        if not put(batch):
                            return
            where["label"] = "the last batch"
            if have and self.last_batch != "drop":
                if self.last_batch == "pad":
                    filler = first if first is not None else _join(pending)
                    while have < b:
                        take = min(b - have, int(filler[0].shape[0]))
                        pending.append(tuple(a[:take] for a in filler))
                        have += take
                if not put(_join(pending)):
                    return
            put(_End())
        except BaseException as error:  # handed to the consumer, raised there
            put(_Failure(error, f"while loading {where['label']} of epoch {epoch}"))
        finally:
            close = getattr(chunks, "close", None)
            if close is not None:
                close()

    def _chunks(self, rng: np.random.Generator, where: dict[str, str]) -> Iterator[Any]:
        if self.items is None:
            assert self._factory is not None
            source = iter(self._factory())
            try:
                i = 0
                while True:
                    where["label"] = f"chunk {i} from the source"
                    try:
                        chunk = next(source)
                    except StopIteration:
                        break
                    yield chunk
                    i += 1
            finally:
                close = getattr(source, "close", None)
                if close is not None:
                    close()
            return
        order = rng.permutation(len(self.items)) if self.shuffle else range(len(self.items))
        assert self.loader is not None
        for i in order:
            item = self.items[int(i)]
            where["label"] = f"item {int(i)} ({item!r})"
            yield _Deferred(self.loader, item)

    @staticmethod
    def _check_chunk(chunk: Any, fields: int | None) -> tuple[np.ndarray, ...]:
        if isinstance(chunk, _Deferred):
            chunk = chunk()
        arrays = tuple(chunk) if isinstance(chunk, tuple | list) else (chunk,)
        arrays = tuple(np.asarray(a) for a in arrays)
        if not arrays or any(a.ndim == 0 for a in arrays):
            raise ValueError("StreamFeed: a chunk must be arrays with a first (example) axis")
        lengths = [int(a.shape[0]) for a in arrays]
        if len(set(lengths)) != 1:
            raise ValueError(
                f"StreamFeed: the arrays of a chunk have different lengths {lengths}; they "
                f"must share their first axis"
            )
        if fields is not None and len(arrays) != fields:
            raise ValueError(
                f"StreamFeed: a chunk has {len(arrays)} arrays, earlier chunks had {fields}"
            )
        return arrays

    def __repr__(self) -> str:
        what = f"{len(self.items)} items" if self.items is not None else "a source"
        return (
            f"StreamFeed({what}, batch_size={self.batch_size}, prefetch={self.prefetch}, "
            f"last_batch={self.last_batch!r}, epoch={self._epoch})"
        )


class _Deferred:
    """A chunk loaded when the producer gets to it (so errors carry the item's name)."""

    def __init__(self, loader: Callable[[Any], Any], item: Any) -> None:
        self.loader, self.item = loader, item

    def __call__(self) -> Any:
        return self.loader(self.item)


def _join(pieces: list[tuple[np.ndarray, ...]]) -> tuple[np.ndarray, ...]:
    """One batch from its pieces, in memory of its own: a batch cut from a single chunk is
    copied, as a chunk may be the user's own arrays (a source yielding ``(x, y)``), which no
    consumer editing its batch in place may change."""
    if len(pieces) == 1:
        return tuple(np.array(a, copy=True) for a in pieces[0])
    return tuple(np.concatenate(parts, axis=0) for parts in zip(*pieces))


__all__ = ["Batch", "Feed", "StreamFeed"]
