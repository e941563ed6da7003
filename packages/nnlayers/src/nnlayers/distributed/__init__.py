"""Data-parallel training over MPI (any backend) and NCCL (CUDA): each rank trains a copy of
the model on its own part of every batch, and the ranks average their gradients each step.

A training script needs one more line, and runs with ``mpiexec``::

    model = nnlayers.distributed.data_parallel(model)   # after building it, on every rank
    nnlayers.fit(model, nnlayers.Feed(x, y, batch_size=64), epochs=10)

    $ mpiexec -n 4 python train.py

- :func:`init` / :func:`get_context`: the :class:`Context` (``rank``, ``world_size``, the MPI
  ``comm``) from the launcher's environment; without a launcher, a world of one without MPI.
- :func:`data_parallel`: checks that every rank built the same model, broadcasts rank 0's
  parameters, and attaches a :class:`DataParallel` that all-reduces the gradients in flat
  buckets after every backward pass (MPI on host buffers; NCCL in CUDA memory).
- :func:`nnlayers.train.fit` shards a :class:`nnlayers.Feed` by rank (``Feed(...,
  shard=(rank, world_size))`` does it by hand), averages the metrics over the ranks, and shows
  progress and writes checkpoints and logs on rank 0 only (:func:`is_main_rank`).
- Faults end the run in bounded time: an exception on any rank aborts every rank, a rank that
  dies is noticed by the launcher, and every collective has a deadline (``timeout``).

``pip install "nnlayers[mpi]"`` brings mpi4py and MPICH (with its ``mpiexec``). The guide is the
section "Data-parallel training" of ``docs/training.md``.
"""

from .buckets import BUCKET_BYTES
from .context import Context, detect_launcher, get_context, init, is_main_rank
from .data_parallel import DataParallel, data_parallel
from .engines import MPIEngine, NCCLEngine

__all__ = [
    "BUCKET_BYTES", "Context", "DataParallel", "MPIEngine", "NCCLEngine", "data_parallel",
    "detect_launcher", "get_context", "init", "is_main_rank",
]  # fmt: skip
