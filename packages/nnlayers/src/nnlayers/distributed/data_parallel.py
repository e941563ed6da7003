"""Data-parallel training: every rank holds the whole model, trains on its own part of each
batch, and the ranks average their gradients before every optimiser step.

:func:`data_parallel` prepares a model for it, in place: it checks that every rank built the
same model, copies rank 0's parameters and buffers to the others, and attaches a
:class:`DataParallel` (``model.data_parallel``) that the model's train step calls between
backward and the optimiser step. :func:`nnlayers.train.fit` then trains it as usual.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import DistributedError
from .buckets import BUCKET_BYTES, Bucket, compare, describe, layout
from .context import Context, init
from .engines import MPIEngine, NCCLEngine, make_engine


class DataParallel:
    """The gradient synchronisation of one data-parallel model (``model.data_parallel``).

    :meth:`reduce` replaces each parameter's gradient by the mean over the ranks, weighted by
    the examples each rank's batch held (equal batches: the plain mean). The gradients travel in
    flat buckets of about ``bucket_mb`` megabytes per dtype, with one extra element in the first
    that carries the examples, through the ``engine``: ``"mpi"`` (host buffers, any backend),
    ``"nccl"`` (CUDA buffers in device memory) or ``"auto"`` (NCCL on the CUDA backend where
    CuPy has it, else MPI). Half-precision gradients are summed in float32.

    ``reduce_seconds`` and ``reductions`` add up the time spent in :meth:`reduce` (packing,
    the collectives, unpacking) and the number of calls, ``allreduce_seconds`` the time in
    the engine's all-reduce alone (host copies and waiting for the slowest rank included), for
    benchmarks.
    """

    def __init__(
        self,
        model: Any,
        context: Context,
        *,
        engine: str = "auto",
        bucket_mb: float = BUCKET_BYTES / 2**20,
    ) -> None:
        if not (isinstance(bucket_mb, int | float) and bucket_mb > 0):
            raise ValueError(f"data_parallel: bucket_mb must be > 0, got {bucket_mb!r}")
        self.context = context
        self.xp = model.xp
        self.bucket_bytes = max(1, int(bucket_mb * 2**20))
        self.engine: MPIEngine | NCCLEngine | None = (
            make_engine(engine, context, model.xp) if context.distributed else None
        )
        self._layouts: dict[tuple[int, ...], list[Bucket]] = {}
        self.reduce_seconds = 0.0
        self.allreduce_seconds = 0.0
        self.reductions = 0

    @property
    def rank(self) -> int:
        """This process's rank."""
        return self.context.rank

    @property
    def world_size(self) -> int:
        """The number of ranks."""
        return self.context.world_size

    # -- gradients ------------------------------------------------------------------------------
    def reduce(self, params: Sequence[Any], examples: int) -> None:
        """Replace every ``p.grad`` of ``params`` by its mean over the ranks, each rank's
        weighted by its ``examples`` (the batch size of its step). Every rank must call it with
        the same parameters, in the same order. A gradient that is ``None`` counts as zeros."""
        engine = self.engine
        if engine is None:
            return
        start = time.perf_counter()
        key = tuple(id(p) for p in params)
        buckets = self._layouts.get(key)
        if buckets is None:
            buckets = self._layouts[key] = layout(params, self.bucket_bytes)
        xp = self.xp
        total = 0.0
        for k, bucket in enumerate(buckets):
            pieces = [
                xp.reshape(xp.zeros_like(p.value) if p.grad is None else p.grad, (-1,))
                for p in bucket.params
            ]
            if k == 0:  # the control element: this rank's examples, summed with the rest
                pieces.append(xp.ones((1,), dtype=pieces[0].dtype))
            flat = xp.concat(pieces)
            narrow = bucket.dtype.kind == "f" and bucket.dtype.itemsize < 4
            if narrow:
                flat = xp.astype(flat, xp.float32)
            xp.inplace.multiply(flat, float(examples), out=flat)
            began = time.perf_counter()
            summed, host = engine.allreduce(xp, flat)
            self.allreduce_seconds += time.perf_counter() - began
            if k == 0:
                last = host[-1] if host is not None else xp.to_numpy(summed[-1:])[0]
                total = float(last)
                if not total > 0:
                    raise DistributedError(
                        f"data_parallel: the ranks' batches held {total:g} examples in all"
                    )
                summed = summed[: bucket.size]
            xp.inplace.multiply(summed, 1.0 / total, out=summed)
            if narrow:
                summed = xp.astype(summed, _value_dtype(bucket.params[0]))
            for p, shape, offset in zip(bucket.params, bucket.shapes, bucket.offsets):
                p.grad = xp.reshape(summed[offset : offset + math.prod(shape)], shape)
        self.reduce_seconds += time.perf_counter() - start
        self.reductions += 1

    # -- start ----------------------------------------------------------------------------------
    def check_and_broadcast(self, entries: Sequence[Any]) -> None:
        """Check that every rank has the same ``entries`` (parameters and buffers: names,
        shapes, dtypes), raising on every rank if not, then give every rank rank 0's values."""
        context = self.context
        if not context.distributed:
            return
        compare(context.allgather(describe(entries), "the comparison of the models"))
        for bucket in layout(entries, self.bucket_bytes):
            if context.is_main:
                host = np.concatenate([np.asarray(p.numpy()).reshape(-1) for p in bucket.params])
                host = np.ascontiguousarray(host, dtype=bucket.dtype)
            else:
                host = np.empty(bucket.size, dtype=bucket.dtype)
            # as bytes: MPI has no type for some dtypes (float16, bool) that buffers may have
            context.broadcast(host.view(np.uint8), what="the broadcast of rank 0's parameters")
            if not context.is_main:
                for p, shape, offset in zip(bucket.params, bucket.shapes, bucket.offsets):
                    p.assign(host[offset : offset + math.prod(shape)].reshape(shape))

    def average_buffers(self, buffers: Sequence[Any]) -> None:
        """Give every rank the mean over the ranks of each floating-point buffer (batch-norm
        running statistics, which each rank updates from its own batches; frozen weights,
        equal everywhere, stay as they are) and rank 0's value of any other buffer."""
        context = self.context
        if not context.distributed or not buffers:
            return
        for bucket in layout(buffers, self.bucket_bytes):
            host = np.concatenate([np.asarray(p.numpy()).reshape(-1) for p in bucket.params])
            host = np.ascontiguousarray(host, dtype=bucket.dtype)
            if bucket.dtype.kind == "f":
                wide = host.astype(np.float64)
                context.allreduce_sum(wide, "the averaging of the buffers")
                host = (wide / context.world_size).astype(bucket.dtype)
            else:
                context.broadcast(host.view(np.uint8), what="the broadcast of the buffers")
            for p, shape, offset in zip(bucket.params, bucket.shapes, bucket.offsets):
                p.assign(host[offset : offset + math.prod(shape)].reshape(shape))

    # -- fit's helpers --------------------------------------------------------------------------
    def prepare_feed(self, feed: Any) -> Any:
        """Shard a :class:`nnlayers.Feed` that has no shard by this rank; check that every rank
        takes as many steps per epoch (where the feeds have a length)."""
        from ..feeds import Feed

        context = self.context
        if not context.distributed:
            return feed
        if isinstance(feed, Feed) and feed.shard is None:
            feed.shard = (context.rank, context.world_size)
        try:
            length: int | None = len(feed)
        except TypeError:
            length = None
        lengths = context.allgather(length, "the comparison of the feeds' lengths")
        known = [n for n in lengths if n is not None]
        if len(set(known)) > 1:
            each = ", ".join(f"rank {r}: {n}" for r, n in enumerate(lengths))
            raise DistributedError(
                f"fit: the ranks' feeds have different numbers of batches ({each}); every rank "
                "must take the same number of steps per epoch, or the gradient all-reduce waits "
                "forever: give fit a nnlayers.Feed (it is sharded evenly) or feeds of one length"
            )
        return feed

    def combine(self, means: Any, seconds: float) -> tuple[dict[str, float], int, float]:
        """The epoch's metrics over every rank (example-weighted means), the examples of all
        ranks and the longest rank's time, from this rank's :class:`~nnlayers.models.model.Means`.
        """
        means.flush()
        mine = (means.totals.tolist(), int(means.count), int(means.steps), float(seconds))
        gathered = self.context.allgather(mine, "the averaging of the epoch's metrics")
        steps = [g[2] for g in gathered]
        if len(set(steps)) > 1:
            each = ", ".join(f"rank {r}: {s}" for r, s in enumerate(steps))
            raise DistributedError(
                f"fit: the ranks took different numbers of steps this epoch ({each}); every "
                "rank must take the same number (a nnlayers.Feed, which fit shards evenly)"
            )
        count = sum(g[1] for g in gathered)
        totals = np.sum([g[0] for g in gathered], axis=0)
        if count:
            logs = dict(zip(means.names, (totals / count).tolist()))
        else:
            logs = {name: float("nan") for name in means.names}
        return logs, count, max(g[3] for g in gathered)

    def evaluate(self, model: Any, validation: Any) -> dict[str, float]:
        """``model.evaluate`` of ``validation`` over every rank: arrays ``(x, y)`` and an
        in-memory :class:`nnlayers.Feed` without augmentation are split between the ranks;
        any other feed is evaluated as it is on each rank. The means are weighted by the
        examples each rank evaluated."""
        from ..feeds import Feed

        context = self.context
        arrays: list[Any] | None = None
        batch_size = 256
        if isinstance(validation, tuple):
            arrays = list(validation)
        elif isinstance(validation, Feed) and validation.shard is None and not validation.augment:
            arrays, batch_size = list(validation.arrays), validation.batch_size
        if not context.distributed:
            if isinstance(validation, tuple):
                return model.evaluate(*validation)  # type: ignore[no-any-return]
            return model.evaluate(validation)  # type: ignore[no-any-return]
        if arrays is not None:
            n = int(arrays[0].shape[0])
            lo, hi = _split(n, context.rank, context.world_size)
            count = hi - lo
            part = [a[lo:hi] for a in arrays]
            scores = model.evaluate(*part, batch_size=batch_size) if count else {}
        else:
            scores = model.evaluate(validation)
            count = getattr(validation, "examples_per_epoch", None) or 1
        names = list(model.metric_names)
        sums = np.array(
            [scores[k] * count if count else 0.0 for k in names] + [float(count)],
            dtype=np.float64,
        )
        context.allreduce_sum(sums, "the averaging of the validation metrics")
        total = sums[-1]
        return {k: float(s / total) if total else float("nan") for k, s in zip(names, sums)}


def _value_dtype(p: Any) -> Any:
    """A parameter's value dtype (what its gradient must be)."""
    return p.value.dtype


def _split(n: int, rank: int, world: int) -> tuple[int, int]:
    """Rank ``rank``'s contiguous part of ``n`` examples (sizes differ by one at most)."""
    small, extra = divmod(n, world)
    start = rank * small + min(rank, extra)
    return start, start + small + (rank < extra)


def data_parallel(
    model: Any,
    *,
    engine: str = "auto",
    bucket_mb: float = BUCKET_BYTES / 2**20,
    timeout: float | None = None,
    context: Context | None = None,
) -> Any:
    """Prepare ``model`` for data-parallel training and return it (the same object).

    Every rank calls it after building the model: it checks that all ranks built the same one
    (an error on every rank names the first parameter that differs), copies rank 0's
    parameters and buffers to the other ranks, and attaches a :class:`DataParallel`
    (``model.data_parallel``) that averages the gradients over the ranks after every backward
    pass. :func:`nnlayers.train.fit` then trains it unchanged, and for such a model

    - shards a :class:`nnlayers.Feed` by rank (``feed.shard``; its ``batch_size`` is per rank)
      and checks that every rank takes the same number of steps;
    - averages the epoch's metrics and the validation metrics over the ranks, so every rank
      sees (and its callbacks decide on) the same values;
    - shows the progress bar, and lets :class:`~nnlayers.train.Checkpoint`,
      :class:`~nnlayers.train.CSVLogger`, :class:`~nnlayers.train.TensorBoard` and
      :class:`~nnlayers.train.PlotCurves` write their files, on rank 0 only;
    - ends every rank (``MPI_Abort``) when an exception is raised on any of them.

    ``context``: default :func:`nnlayers.distributed.init` (the launcher's environment).
    ``engine``, ``bucket_mb``: see :class:`DataParallel`; ``timeout``: the deadline of each
    collective, see :func:`~nnlayers.distributed.init`. In a world of one (``python
    train.py``) nothing is sent and the model trains as it would without this call.

    >>> import nnlayers
    >>> from nnlayers.layers import Affine
    >>> from nnlayers.models import Regressor
    >>> model = data_parallel(Regressor(Affine(1, seed=0), (2,)))
    >>> model.data_parallel.world_size
    1
    """
    context = context if context is not None else init(timeout=timeout)
    if timeout is not None:
        context.timeout = float(timeout) or None
    sync = DataParallel(model, context, engine=engine, bucket_mb=bucket_mb)
    sync.check_and_broadcast([*model.params, *model.buffers])
    model.data_parallel = sync
    return model
