"""Flat buckets: many parameters' arrays laid end to end, so that a collective moves a few large
messages instead of one small one per parameter.

A layout groups parameters by dtype, in the model's order, and starts a new bucket when the
next parameter would take the bucket past ``bucket_bytes`` (a parameter larger than that gets
a bucket of its own). Every rank builds the same layout from the same model, which
:func:`describe` and :func:`compare` check before the first collective.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import DistributedError

#: About 25 MB per bucket, PyTorch DDP's default: large enough that the per-message latency is
#: paid a few times per step, small enough that a host copy of a bucket is cheap to hold.
BUCKET_BYTES = 25 * 2**20


@dataclass(frozen=True)
class Bucket:
    """Parameters of one dtype laid end to end: ``offsets[i]`` is where ``params[i]`` starts."""

    dtype: np.dtype
    params: tuple[Any, ...]
    shapes: tuple[tuple[int, ...], ...]
    offsets: tuple[int, ...]
    size: int  # elements of the parameters (a step's control element comes on top)


def layout(params: Sequence[Any], bucket_bytes: int = BUCKET_BYTES) -> list[Bucket]:
    """The buckets of ``params`` (objects with ``shape`` and ``dtype``), by dtype, in order.

    >>> import numpy as np
    >>> from types import SimpleNamespace as P
    >>> ps = [P(shape=(1000,), dtype=np.dtype("float32")) for _ in range(3)]
    >>> [len(b.params) for b in layout(ps, bucket_bytes=8000)]
    [2, 1]
    """
    groups: dict[str, list[Any]] = {}
    for p in params:
        groups.setdefault(np.dtype(p.dtype).str, []).append(p)
    buckets = []
    for members in groups.values():
        dtype = np.dtype(members[0].dtype)
        current: list[Any] = []
        used = 0
        for p in members:
            nbytes = math.prod(_shape(p)) * dtype.itemsize
            if current and used + nbytes > bucket_bytes:
                buckets.append(_bucket(dtype, current))
                current, used = [], 0
            current.append(p)
            used += nbytes
        if current:
            buckets.append(_bucket(dtype, current))
    return buckets


def _shape(p: Any) -> tuple[int, ...]:
    return tuple(int(d or 0) for d in p.shape)


def _bucket(dtype: np.dtype, params: list[Any]) -> Bucket:
    shapes = tuple(_shape(p) for p in params)
    sizes = [math.prod(s) for s in shapes]
    offsets = tuple(int(o) for o in np.cumsum([0, *sizes[:-1]]))
    return Bucket(dtype, tuple(params), shapes, offsets, int(sum(sizes)))


def describe(params: Sequence[Any]) -> list[tuple[str, tuple[int, ...], str, bool]]:
    """``(name, shape, dtype, trainable)`` of every parameter: what every rank must agree on."""
    return [
        (str(p.name), _shape(p), np.dtype(p.dtype).name, bool(getattr(p, "trainable", True)))
        for p in params
    ]


def compare(descriptions: Sequence[list[tuple[str, tuple[int, ...], str, bool]]]) -> None:
    """Raise :class:`~nnlayers.errors.DistributedError` naming the first parameter in which
    some rank's model differs from rank 0's (``descriptions[r]`` is rank ``r``'s
    :func:`describe`)."""
    reference = descriptions[0]
    for rank, other in enumerate(descriptions[1:], 1):
        for i in range(max(len(reference), len(other))):
            mine = reference[i] if i < len(reference) else None
            theirs = other[i] if i < len(other) else None
            if mine == theirs:
                continue
            if mine is None or theirs is None:
                present, rank_with, rank_without = (
                    (mine, 0, rank) if theirs is None else (theirs, rank, 0)
                )
                assert present is not None
                what = (
                    f"rank {rank_with} has parameter {present[0]!r} {_spec(present)} (number "
                    f"{i + 1}), rank {rank_without} has {len(descriptions[rank_without])} "
                    "parameters only"
                )
            elif mine[0] != theirs[0]:
                what = (
                    f"parameter number {i + 1} is {mine[0]!r} {_spec(mine)} on rank 0 and "
                    f"{theirs[0]!r} {_spec(theirs)} on rank {rank}"
                )
            else:
                what = (
                    f"parameter {mine[0]!r} is {_spec(mine)} on rank 0 and {_spec(theirs)} on "
                    f"rank {rank}"
                )
            raise DistributedError(
                f"data_parallel: the model differs between ranks: {what}; every rank must "
                "build the same model (same layers, sizes, dtypes and frozen parameters)"
            )


def _spec(entry: tuple[str, tuple[int, ...], str, bool]) -> str:
    _, shape, dtype, trainable = entry
    return f"{shape} {dtype}" + ("" if trainable else " (not trained)")
