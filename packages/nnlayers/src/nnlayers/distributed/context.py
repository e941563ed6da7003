"""The process's place in a data-parallel run: rank, world size, the MPI communicator, and the
rules that keep a failure on one rank from hanging the others.

:func:`init` reads the launcher's environment (``mpiexec``/``mpirun`` of MPICH, Intel MPI, Open
MPI or MVAPICH, ``srun`` with PMI or PMIx) and, when the process was started by one, initialises
MPI through mpi4py; a process started without a launcher gets a world of one and never touches
MPI, so a data-parallel script runs unchanged as ``python train.py``.

Faults are bounded in time:

- an exception that leaves the main program of any rank (:data:`sys.excepthook`) prints its
  traceback with the rank and calls ``MPI_Abort``, which makes the launcher end every rank;
- a rank that dies (``kill -9``, a lost node) is noticed by the launcher, which ends the others;
- every collective operation nnlayers runs has a deadline (``timeout``, default 600 s, or
  ``NNLAYERS_DISTRIBUTED_TIMEOUT``): a rank that waits longer (another rank hung, or runs a
  different number of steps) prints what it waited for and aborts the run, also under launchers
  that do not end the other ranks themselves.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import traceback
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import DistributedError

#: The environment variable that sets the default deadline of a collective, in seconds.
ENV_TIMEOUT = "NNLAYERS_DISTRIBUTED_TIMEOUT"
DEFAULT_TIMEOUT = 600.0
#: Seconds between printing why a rank aborts and MPI_Abort (for the launcher to forward it).
ABORT_GRACE = 0.2

#: What launchers put in the environment of the processes they start: the variable of the
#: world size (None where the launcher exports only a rank) and of the rank, by launcher.
LAUNCHERS: tuple[tuple[str, str | None, str], ...] = (
    ("Open MPI (mpirun)", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"),
    ("MVAPICH (mpirun_rsh)", "MV2_COMM_WORLD_SIZE", "MV2_COMM_WORLD_RANK"),
    ("MPICH or Intel MPI (mpiexec, Hydra), or srun with PMI", "PMI_SIZE", "PMI_RANK"),
    ("a PMIx launcher (prterun, srun --mpi=pmix)", None, "PMIX_RANK"),
)

INSTALL = 'pip install "nnlayers[mpi]"  (mpi4py and the MPICH wheel, which brings mpiexec)'


@dataclass(frozen=True)
class Launch:
    """What the environment says about how this process was started."""

    launcher: str | None
    world_size: int | None
    rank: int | None


def detect_launcher(environ: Mapping[str, str] | None = None) -> Launch:
    """The launcher that started this process, from its environment variables (no MPI call).

    >>> detect_launcher({"PMI_SIZE": "2", "PMI_RANK": "1"}).world_size
    2
    >>> detect_launcher({}).launcher is None
    True
    """
    env = os.environ if environ is None else environ
    for name, size_var, rank_var in LAUNCHERS:
        if rank_var in env:
            size = _int(env.get(size_var)) if size_var is not None else None
            return Launch(name, size, _int(env.get(rank_var)))
    return Launch(None, None, None)


def _int(text: str | None) -> int | None:
    try:
        return None if text is None else int(text)
    except ValueError:
        return None


@dataclass
class Context:
    """This process's rank in a world of ``world_size`` processes, and the MPI communicator.

    ``comm`` is mpi4py's ``MPI.COMM_WORLD`` (``None`` in a world of one started without a
    launcher); ``local_rank`` and ``local_size`` count the processes of this host (a GPU per
    local rank); ``timeout`` is the deadline of each collective, in seconds (``None``: none).
    The collectives below work on host (NumPy) buffers and are no-ops in a world of one.
    """

    rank: int
    world_size: int
    comm: Any = None
    local_rank: int = 0
    local_size: int = 1
    launcher: str | None = None
    timeout: float | None = DEFAULT_TIMEOUT
    _watchdog: _Watchdog | None = field(default=None, repr=False)
    _nccl: Any = field(default=None, repr=False)

    @property
    def is_main(self) -> bool:
        """Whether this is rank 0, the rank that writes files and shows progress."""
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        """Whether there is more than one rank."""
        return self.world_size > 1

    # -- collectives on host buffers ----------------------------------------------------------
    def allreduce_sum(self, buffer: np.ndarray, what: str = "an all-reduce") -> np.ndarray:
        """Sum the host array ``buffer`` over every rank, in place; returns it."""
        if self.distributed:
            from mpi4py import MPI

            with self.deadline(what):
                self.comm.Allreduce(MPI.IN_PLACE, buffer, op=MPI.SUM)
        return buffer

    def broadcast(self, buffer: np.ndarray, root: int = 0, what: str = "a broadcast") -> np.ndarray:
        """Overwrite the host array ``buffer`` of every rank with rank ``root``'s; returns it."""
        if self.distributed:
            with self.deadline(what):
                self.comm.Bcast(buffer, root=root)
        return buffer

    def allgather(self, value: Any, what: str = "an all-gather") -> list[Any]:
        """Every rank's ``value`` (small, picklable), in rank order."""
        if not self.distributed:
            return [value]
        with self.deadline(what):
            return list(self.comm.allgather(value))

    def barrier(self, what: str = "a barrier") -> None:
        """Wait until every rank gets here."""
        if self.distributed:
            with self.deadline(what):
                self.comm.Barrier()

    # -- faults ---------------------------------------------------------------------------------
    @contextmanager
    def deadline(self, what: str) -> Iterator[None]:
        """Abort the run when the block (a collective) takes longer than :attr:`timeout`."""
        if self.timeout is None or not self.distributed:
            yield
            return
        if self._watchdog is None:
            self._watchdog = _Watchdog(self)
        with self._watchdog.watch(what, self.timeout):
            yield

    def abort(self, reason: str, error: BaseException | None = None, code: int = 1) -> None:
        """Print ``reason`` (and ``error``'s traceback) with this rank, then end every rank
        with ``MPI_Abort``. In a world of one it returns and the caller raises as usual."""
        if not self.distributed:
            return
        lines = []
        if error is not None:
            lines += traceback.format_exception(error)
        lines.append(
            f"nnlayers.distributed: rank {self.rank} of {self.world_size}: {reason}; aborting "
            f"every rank (MPI_Abort) so that none waits for this one forever\n"
        )
        try:
            sys.stderr.write("".join(lines))
            sys.stderr.flush()
            sys.stdout.flush()
            # MPI_Abort has the launcher tear every process down at once; a moment first lets it
            # forward what was just written (CI saw mpiexec end before the message came through)
            time.sleep(ABORT_GRACE)
        finally:
            try:
                self.comm.Abort(code)
            finally:  # pragma: no cover - MPI_Abort does not return
                os._exit(code)


class _Watchdog:
    """One daemon thread per process that aborts the run when a collective overruns.

    mpi4py releases the GIL while a blocking MPI call waits, so the thread runs; MPI is
    initialised with ``MPI_THREAD_MULTIPLE`` (mpi4py's default), so it may call ``MPI_Abort``.
    """

    def __init__(self, context: Context) -> None:
        self.context = context
        self._lock = threading.Lock()
        self._task: tuple[str, float, float] | None = None  # (what, started, deadline)
        self._wake = threading.Event()
        thread = threading.Thread(target=self._run, name="nnlayers-distributed-watchdog")
        thread.daemon = True
        thread.start()

    @contextmanager
    def watch(self, what: str, timeout: float) -> Iterator[None]:
        now = time.monotonic()
        with self._lock:
            self._task = (what, now, now + timeout)
        self._wake.set()
        try:
            yield
        finally:
            with self._lock:
                self._task = None

    def _run(self) -> None:
        while True:
            with self._lock:
                task = self._task
            if task is None:
                self._wake.wait(1.0)
                self._wake.clear()
                continue
            what, started, deadline = task
            now = time.monotonic()
            if now >= deadline:
                self.context.abort(
                    f"waited {now - started:.0f} s in {what}: another rank has died, hangs or "
                    "runs a different number of steps (timeout "
                    f"{self.context.timeout:g} s: data_parallel(..., timeout=) or "
                    f"{ENV_TIMEOUT})"
                )
            time.sleep(min(0.25, max(0.01, deadline - now)))


_CONTEXT: Context | None = None


def get_context() -> Context | None:
    """The context :func:`init` made, or ``None`` before it was called."""
    return _CONTEXT


def is_main_rank() -> bool:
    """Whether this process writes files and shows progress: rank 0 of a data-parallel run,
    or any process outside one."""
    return _CONTEXT is None or _CONTEXT.rank == 0


def init(*, mpi: bool | None = None, timeout: float | None = None) -> Context:
    """This process's :class:`Context`, made on the first call from the launcher's environment.

    - Started by ``mpiexec -n N`` (or another launcher): MPI is initialised through mpi4py
      and the context holds ``MPI.COMM_WORLD``. A launcher that says N processes while mpi4py's
      MPI sees one (mpi4py built against another MPI than the launcher's) is an error that
      says so, as is a launcher without mpi4py installed.
    - Started without a launcher: a world of one, without MPI (``mpi=True`` initialises MPI
      anyway, e.g. under a launcher this function does not recognise).

    ``timeout``: the deadline of each collective in seconds (default 600, or the environment
    variable ``NNLAYERS_DISTRIBUTED_TIMEOUT``; ``0`` or ``None`` there: no deadline).
    In a world of more than one, an uncaught exception on any rank prints the rank and the
    traceback and aborts every rank. With ``ARRAYCORE_BACKEND=cuda`` and no
    ``ARRAYCORE_DEVICE``, each process of a host takes the GPU of its local rank.

    >>> context = init()
    >>> context.rank, context.world_size  # python without a launcher
    (0, 1)
    """
    global _CONTEXT
    if _CONTEXT is not None:
        if timeout is not None:
            _CONTEXT.timeout = float(timeout) or None
        return _CONTEXT
    deadline = _timeout(timeout)
    launch = detect_launcher()
    use_mpi = mpi if mpi is not None else (launch.launcher is not None or _mpi_initialised())
    if not use_mpi:
        _CONTEXT = Context(0, 1, timeout=deadline)
        return _CONTEXT
    MPI = _import_mpi(launch)
    comm = MPI.COMM_WORLD
    if launch.world_size is not None and launch.world_size != comm.Get_size():
        raise DistributedError(
            f"nnlayers.distributed.init: {launch.launcher} started {launch.world_size} "
            f"processes, but mpi4py's MPI sees a world of {comm.Get_size()}: mpi4py uses "
            f"another MPI library than the launcher ({_library_version(MPI)}). Launch with the "
            "mpiexec of the MPI that mpi4py uses (with the mpich wheel: the mpiexec installed "
            "beside python), or rebuild mpi4py against the system's MPI"
        )
    local = comm.Split_type(MPI.COMM_TYPE_SHARED, key=comm.Get_rank())
    context = Context(
        rank=comm.Get_rank(),
        world_size=comm.Get_size(),
        comm=comm,
        local_rank=local.Get_rank(),
        local_size=local.Get_size(),
        launcher=launch.launcher or "MPI",
        timeout=deadline,
    )
    local.Free()
    if context.distributed:
        _install_excepthook(context)
        _pick_device(context)
    _CONTEXT = context
    return context


def _timeout(timeout: float | None) -> float | None:
    if timeout is None:
        text = os.environ.get(ENV_TIMEOUT, "").strip()
        if not text:
            return DEFAULT_TIMEOUT
        try:
            timeout = float(text)
        except ValueError:
            raise DistributedError(
                f"{ENV_TIMEOUT}={text!r}: give the deadline of a collective in seconds (0: none)"
            ) from None
    if timeout < 0:
        raise ValueError(f"nnlayers.distributed.init: timeout must be >= 0, got {timeout!r}")
    return float(timeout) or None


def _mpi_initialised() -> bool:
    """Whether the program initialised MPI itself (imported ``mpi4py.MPI``)."""
    MPI = sys.modules.get("mpi4py.MPI")
    return MPI is not None and bool(MPI.Is_initialized())


def _import_mpi(launch: Launch) -> Any:
    try:
        from mpi4py import MPI
    except ImportError as error:
        started = (
            f"{launch.launcher} started this process"
            if launch.launcher
            else "init(mpi=True) asks for MPI"
        )
        raise DistributedError(
            f"nnlayers.distributed.init: {started}, but mpi4py is not installed; {INSTALL}"
        ) from error
    return MPI


def _library_version(MPI: Any) -> str:
    try:
        return str(MPI.Get_library_version()).strip().splitlines()[0]
    except Exception:  # pragma: no cover - only for the message
        return "unknown MPI library"


def _install_excepthook(context: Context) -> None:
    previous = sys.excepthook

    def abort_on_uncaught(kind: type[BaseException], error: BaseException, tb: Any) -> None:
        context.abort(f"uncaught {kind.__name__}", error.with_traceback(tb))
        previous(kind, error, tb)  # a world of one: abort returned

    sys.excepthook = abort_on_uncaught


def _pick_device(context: Context) -> None:
    if os.environ.get("ARRAYCORE_BACKEND") == "cuda" and "ARRAYCORE_DEVICE" not in os.environ:
        os.environ["ARRAYCORE_DEVICE"] = str(context.local_rank)


def _reset_for_tests() -> None:
    """Forget the context (tests only: MPI itself cannot be initialised twice)."""
    global _CONTEXT
    _CONTEXT = None
