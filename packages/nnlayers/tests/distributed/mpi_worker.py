"""What ``mpiexec -n 2 python mpi_worker.py SCENARIO OUT`` runs for tests/distributed.

Scenarios:

- ``train``: the equivalence runs (SGD and Adam, equal and uneven batches), a ``fit`` with
  validation, a checkpoint and a CSV log, mixed precision, the errors every rank must raise
  alike (models of other shapes, feeds of other lengths), and batch norm's statistics. Results go to ``OUT`` as ``.npz``
  and ``.json`` files per rank; the test compares them with one process trained here too.
- ``raise``, ``kill``, ``hang``: rank 1 raises, kills itself (SIGKILL) or hangs at step 3 of
  a 1000-step epoch; rank 0 must not finish, and the run must end in bounded time.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import numpy as np

import arraycore
import nnlayers
import nnlayers.distributed as dist
from nnlayers.errors import DistributedError
from nnlayers.layers import Affine, BatchNorm, LayerNorm, Sequential
from nnlayers.models import Classifier
from nnlayers.optim import SGD, Adam
from nnlayers.train import Callback, Checkpoint, CSVLogger

STEPS = 5  # equal-size steps of the equivalence runs
PER_RANK = 4  # examples per rank and step
FEATURES, CLASSES = 6, 3


def build(seed: int = 0, hidden: int = 8, optimizer: str = "sgd", precision: str | None = None):
    """The model every rank builds (a rank's own ``seed`` tests the broadcast from rank 0)."""
    layers = [Affine(hidden, activation="tanh"), LayerNorm(), Affine(CLASSES)]
    net = Sequential(layers, seed=seed)
    opt = SGD(0.3) if optimizer == "sgd" else Adam(0.05)
    return Classifier(net, (FEATURES,), optimizer=opt, precision=precision)


def global_batches(world: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """The global batches of the equivalence runs: ``STEPS`` of ``world * PER_RANK`` examples,
    then one of ``2 * world + 1`` (uneven between the ranks)."""
    rng = np.random.default_rng(1)
    sizes = [world * PER_RANK] * STEPS + [2 * world + 1]
    out = []
    for n in sizes:
        x = rng.normal(size=(n, FEATURES)).astype(np.float32)
        out.append((x, rng.integers(0, CLASSES, n).astype(np.int64)))
    return out


def split(n: int, rank: int, world: int) -> slice:
    """Rank ``rank``'s contiguous part of ``n`` examples (the first ranks one more)."""
    small, extra = divmod(n, world)
    start = rank * small + min(rank, extra)
    return slice(start, start + small + (rank < extra))


def fit_data() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """101 training examples (uneven: the last global batch of 16 holds 5) and 30 validation."""
    rng = np.random.default_rng(2)
    x = rng.normal(size=(131, FEATURES)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64) + (x[:, 1] > 0.5)
    return x[:101], y[:101], x[101:], y[101:]


def params(model) -> dict[str, np.ndarray]:
    return {p.name: p.numpy() for p in [*model.params, *model.buffers]}


def train(out: Path, context: dist.Context) -> None:
    rank, world = context.rank, context.world_size
    # 1. the equivalence runs: each rank takes its part of every global batch
    for optimizer in ("sgd", "adam"):
        model = dist.data_parallel(build(seed=rank, optimizer=optimizer))
        for x, y in global_batches(world):
            part = split(len(x), rank, world)
            model.train_step((x[part], y[part]))
        np.savez(out / f"equivalence-{optimizer}-rank{rank}.npz", **params(model))
    # 2. fit: the Feed is sharded by fit, metrics averaged, files written by rank 0 alone
    x, y, xv, yv = fit_data()
    model = dist.data_parallel(build(seed=10 + rank, optimizer="adam"))
    history = nnlayers.fit(
        model,
        nnlayers.Feed(x, y, batch_size=8, seed=3),
        epochs=3,
        validation=(xv, yv),
        callbacks=[
            Checkpoint(out / f"checkpoint-rank{rank}.safetensors"),
            CSVLogger(out / f"log-rank{rank}.csv"),
        ],
        progress=False,
    )
    np.savez(out / f"fit-rank{rank}.npz", **params(model))
    (out / f"history-rank{rank}.json").write_text(history.to_json())
    # 3. mixed precision: the loss scaler's skip decisions agree, the replicas stay equal
    # (on a device with float16: PoCL has none)
    if "float16" in arraycore.namespace().__array_namespace_info__().dtypes(kind="float16"):
        model = dist.data_parallel(build(seed=rank, precision="mixed_float16"))
        for xb, yb in global_batches(world)[:3]:
            part = split(len(xb), rank, world)
            model.train_step((xb[part], yb[part]))
        np.savez(out / f"mixed-rank{rank}.npz", **params(model))
    # 4. errors that every rank raises alike, so none waits for the others
    errors = {}
    try:
        dist.data_parallel(build(hidden=8 if rank == 0 else 9))
    except DistributedError as error:
        errors["mismatch"] = str(error)
    model = dist.data_parallel(build())
    batches = [(x[:4], y[:4])] * (3 + rank)
    try:
        nnlayers.fit(model, batches, epochs=1, progress=False)
    except DistributedError as error:
        errors["uneven"] = str(error)
    (out / f"errors-rank{rank}.json").write_text(json.dumps(errors))
    # 5. batch norm: each rank's running statistics, averaged at the end of every epoch
    net = Sequential([Affine(8), BatchNorm(), Affine(CLASSES)], seed=rank)
    model = dist.data_parallel(Classifier(net, (FEATURES,), optimizer=SGD(0.1)))
    nnlayers.fit(model, nnlayers.Feed(x, y, batch_size=8, seed=3), epochs=2, progress=False)
    np.savez(out / f"batchnorm-rank{rank}.npz", **params(model))
    (out / f"done-rank{rank}").write_text("done")


class Fault(Callback):
    """Rank 1 raises, kills itself or hangs at step 3."""

    def __init__(self, what: str, rank: int, out: Path) -> None:
        self.what, self.rank, self.out = what, rank, out

    def on_train_batch_end(self, step, logs) -> None:
        if self.rank != 1 or step != 3:
            return
        (self.out / "fault-time").write_text(repr(time.time()))
        if self.what == "raise":
            raise RuntimeError("a failure on rank 1 at step 3")
        if self.what == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        if self.what == "hang":
            time.sleep(600)


def fault(what: str, out: Path, context: dist.Context) -> None:
    rank = context.rank
    timeout = 3.0 if what == "hang" else None
    model = dist.data_parallel(build(), timeout=timeout)
    x, y, _, _ = fit_data()
    batches = [(x[:4], y[:4])] * 1000
    print(f"rank {rank}: training", flush=True)
    nnlayers.fit(model, batches, epochs=1, callbacks=[Fault(what, rank, out)], progress=False)
    (out / f"finished-rank{rank}").write_text("finished")
    print(f"rank {rank}: finished", flush=True)


def main() -> None:
    scenario, out = sys.argv[1], Path(sys.argv[2])
    context = dist.init()
    if scenario == "train":
        train(out, context)
    else:
        fault(scenario, out, context)


if __name__ == "__main__":
    main()
