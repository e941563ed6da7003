"""The engines that sum a flat bucket over the ranks: MPI on host buffers, NCCL on CUDA ones.

An engine's ``allreduce(xp, flat)`` sums the 1-D array ``flat`` (on the backend of ``xp``)
over every rank and returns ``(summed, host)``: the sum on the same device, and its host copy
when the engine made one (``None`` otherwise).

- :class:`MPIEngine` works for every backend: one explicit device-to-host copy of the bucket
  (``xp.to_numpy``; none on the NumPy backend, whose arrays are host arrays already),
  ``MPI_Allreduce`` in place, one copy back (``xp.asarray``).
- :class:`NCCLEngine` sums CUDA (CuPy) buffers where they are, with ``cupy.cuda.nccl``; its
  communicator is set up once per process from a unique id that rank 0 makes and MPI
  broadcasts. Not verified on a GPU yet (see ``docs/training.md``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import DistributedError
from .context import Context

NCCL_INSTALL = (
    "CuPy with NCCL (cupy.cuda.nccl): pip install nvidia-nccl-cu12 beside cupy-cuda12x, or "
    "use engine='mpi'"
)


class MPIEngine:
    """Sum buckets through MPI on host buffers (any backend)."""

    name = "mpi"

    def __init__(self, context: Context) -> None:
        self.context = context

    def allreduce(self, xp: Any, flat: Any) -> tuple[Any, np.ndarray]:
        host = xp.to_numpy(flat)
        if not (host.flags.c_contiguous and host.flags.writeable):
            host = np.array(host, order="C")
        self.context.allreduce_sum(host, "the all-reduce of the gradients")
        return xp.asarray(host), host


def nccl_available() -> bool:
    """Whether CuPy's NCCL binding imports and finds the NCCL library."""
    try:
        from cupy.cuda import nccl
    except Exception:
        return False
    return bool(getattr(nccl, "available", True))


class NCCLEngine:
    """Sum buckets of CUDA (CuPy) arrays in device memory through NCCL."""

    name = "nccl"

    def __init__(self, context: Context) -> None:
        try:
            import cupy
            from cupy.cuda import nccl
        except Exception as error:
            raise DistributedError(f"data_parallel(engine='nccl') needs {NCCL_INSTALL}") from error
        if not getattr(nccl, "available", True):
            raise DistributedError(f"data_parallel(engine='nccl') needs {NCCL_INSTALL}")
        self._cupy, self._nccl = cupy, nccl
        self.context = context
        if context._nccl is None:
            # NCCL's own bootstrap: rank 0 makes the unique id, MPI hands it to the others
            uid = nccl.get_unique_id() if context.rank == 0 else None
            uid = context.comm.bcast(uid, root=0) if context.distributed else uid
            with context.deadline("the set-up of the NCCL communicator"):
                context._nccl = nccl.NcclCommunicator(context.world_size, uid, context.rank)
        self.comm = context._nccl
        self._types = {
            np.dtype("float16"): nccl.NCCL_FLOAT16,
            np.dtype("float32"): nccl.NCCL_FLOAT32,
            np.dtype("float64"): nccl.NCCL_FLOAT64,
        }

    def allreduce(self, xp: Any, flat: Any) -> tuple[Any, None]:
        cupy, nccl = self._cupy, self._nccl
        flat = cupy.ascontiguousarray(flat)
        kind = self._types.get(np.dtype(flat.dtype))
        if kind is None:
            raise DistributedError(f"NCCL all-reduce: no NCCL type for {flat.dtype}")
        stream = cupy.cuda.get_current_stream()
        self.comm.allReduce(
            flat.data.ptr, flat.data.ptr, flat.size, kind, nccl.NCCL_SUM, stream.ptr
        )
        # NCCL waits on the device: synchronise under the deadline, so that a dead rank ends
        # the run here instead of hanging the next host read
        with self.context.deadline("the NCCL all-reduce of the gradients"):
            stream.synchronize()
        return flat, None


def make_engine(name: str, context: Context, xp: Any) -> MPIEngine | NCCLEngine:
    """The engine ``name`` (``"auto"``: NCCL for the CUDA backend where CuPy has it, else MPI)."""
    if name == "auto":
        name = "nccl" if getattr(xp, "name", "") == "cuda" and nccl_available() else "mpi"
    if name == "mpi":
        return MPIEngine(context)
    if name == "nccl":
        if getattr(xp, "name", "") != "cuda":
            raise DistributedError(
                f"data_parallel(engine='nccl'): the model lives on the {xp.name!r} backend; "
                "NCCL sums CUDA buffers only (ARRAYCORE_BACKEND=cuda), use engine='mpi'"
            )
        return NCCLEngine(context)
    raise ValueError(f"data_parallel: engine must be 'auto', 'mpi' or 'nccl', got {name!r}")
