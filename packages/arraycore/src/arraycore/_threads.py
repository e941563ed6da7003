"""How many threads the host's BLAS and OpenMP pools use: set, limit for a block, inspect, warn.

NumPy's matrix products (and so the NumPy backend's ``matmul``, convolutions and linear algebra)
run in the BLAS library NumPy was built with, OpenBLAS in the wheels, which starts one thread per
core. On a machine that other work already keeps busy those threads fight for the cores, and
OpenBLAS's spinning threads make that very slow: the nnlayers demo took 79 s on a loaded 2-core
machine with the default two threads, 6 s with one. The pools are changed through
`threadpoolctl <https://github.com/joblib/threadpoolctl>`_, which finds every BLAS and OpenMP
library loaded in the process.

Who decides, highest first:

1. :func:`set_threads` and ``with`` :func:`threads` (explicit calls);
2. ``ARRAYCORE_NUM_THREADS``, applied when arraycore is imported and again by
   :func:`check_threads` (to pools loaded since), so it wins over the libraries' own variables
   as ``MKL_NUM_THREADS`` wins over ``OMP_NUM_THREADS``;
3. ``OMP_NUM_THREADS``, ``OPENBLAS_NUM_THREADS``, ``MKL_NUM_THREADS``, ``BLIS_NUM_THREADS``,
   ``VECLIB_MAXIMUM_THREADS``, which the libraries read themselves when they load;
4. the libraries' defaults (usually one thread per core).

arraycore never changes a pool on its own: without one of the above it only warns, once per
process, when the machine is already loaded (:func:`check_threads`).
"""

from __future__ import annotations

import importlib
import math
import operator
import os
import time
import warnings
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from .errors import PerformanceWarning

#: The variable that sets the thread count of every BLAS and OpenMP pool arraycore finds.
ENV_THREADS = "ARRAYCORE_NUM_THREADS"
#: The libraries' own variables: with any of them set, arraycore's guard stays quiet.
LIBRARY_VARIABLES = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "BLIS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
)

# The count given to set_threads() or threads() that is in force (None: none is), and what said so.
_explicit: tuple[int, str] | None = None
_warned = False
# This process's CPU time and the clock when arraycore was imported: its own share of the load.
_START = (time.monotonic(), time.process_time())


def set_threads(n: int) -> int | None:
    """Limit every BLAS and OpenMP thread pool loaded in this process to ``n`` threads.

    Returns the largest thread count a pool had before (``None`` when no pool is loaded), so
    ``previous = arraycore.set_threads(1)`` ... ``arraycore.set_threads(previous)`` restores a
    uniform setting; ``with arraycore.threads(1):`` restores each pool exactly. The limit is
    process-wide (not per thread or per ``use()`` block) and wins over ``ARRAYCORE_NUM_THREADS``
    and the libraries' variables. Pools of libraries loaded afterwards (one that PyTorch or SciPy
    brings) keep their own setting: call it again after importing them.

    >>> import arraycore
    >>> previous = arraycore.set_threads(1)
    >>> {pool["num_threads"] for pool in arraycore.thread_info()}
    {1}
    >>> _ = arraycore.set_threads(previous or 1)
    """
    global _explicit
    n = _count(n, "set_threads")
    controller = _threadpoolctl().ThreadpoolController()
    previous = max((lib.num_threads for lib in controller.lib_controllers), default=None)
    controller.limit(limits=n)
    _explicit = (n, f"arraycore.set_threads({n})")
    return previous


def threads(n: int) -> AbstractContextManager[None]:
    """``with arraycore.threads(n):`` runs the block with every BLAS and OpenMP pool limited to
    ``n`` threads, and gives each pool its own count back on exit (errors included).

    Process-wide like :func:`set_threads`: threads running beside the block see the limit too.
    The limit starts when the block is entered, so a pool loaded inside it keeps its own count.

    >>> import arraycore
    >>> with arraycore.threads(1):
    ...     {pool["num_threads"] for pool in arraycore.thread_info()}
    {1}
    """
    return _limited(_count(n, "threads"))  # a bad n fails at the call, not at ``with``


@contextmanager
def _limited(n: int) -> Iterator[None]:
    global _explicit
    limiter = _threadpoolctl().threadpool_limits(limits=n)
    outer, _explicit = _explicit, (n, f"arraycore.threads({n})")
    try:
        yield
    finally:
        limiter.restore_original_limits()
        _explicit = outer


def reapply() -> None:
    """Give pools loaded since the last setting (a library arraycore loads lazily, such as
    oneDNN's OpenMP runtime) the count in force: the :func:`set_threads` or :func:`threads`
    one, else ``ARRAYCORE_NUM_THREADS``; nothing when neither is set."""
    if _explicit is not None:
        _threadpoolctl().threadpool_limits(limits=_explicit[0])
    else:
        apply_environment()


def thread_info() -> list[dict[str, Any]]:
    """The BLAS and OpenMP thread pools loaded in this process, one dict each.

    Keys: ``library`` (the shared library's name, e.g. ``libscipy_openblas``), ``user_api``
    (``"blas"`` or ``"openmp"``), ``internal_api`` (``openblas``, ``mkl``, ``blis``, ``openmp``),
    ``version``, ``num_threads``, ``threading_layer`` (or ``None``) and ``filepath``.
    """
    return [
        {
            "library": pool.get("prefix"),
            "user_api": pool.get("user_api"),
            "internal_api": pool.get("internal_api"),
            "version": pool.get("version"),
            "num_threads": pool.get("num_threads"),
            "threading_layer": pool.get("threading_layer"),
            "filepath": pool.get("filepath"),
        }
        for pool in _threadpoolctl().threadpool_info()
    ]


def thread_setting(environ: Mapping[str, str] | None = None) -> str:
    """What decides the thread counts now, in words: ``"arraycore.set_threads(1)"``,
    ``"$ARRAYCORE_NUM_THREADS=1"``, ``"$OMP_NUM_THREADS=4"`` or ``"the libraries' defaults"``.
    """
    if _explicit is not None:
        return _explicit[1]
    env = os.environ if environ is None else environ
    names = (ENV_THREADS, *LIBRARY_VARIABLES)
    named = [f"${name}={env[name].strip()}" for name in names if env.get(name, "").strip()]
    return ", ".join(named) or "the libraries' defaults"


def apply_environment(environ: Mapping[str, str] | None = None) -> int | None:
    """Apply ``ARRAYCORE_NUM_THREADS`` to the pools loaded now; returns the count, or ``None``.

    Does nothing while :func:`set_threads` or :func:`threads` is in force, and without the
    variable (then not even threadpoolctl is imported: importing arraycore stays cheap). A value
    that is not a positive integer is a ``ValueError`` naming the variable.
    """
    value = (os.environ if environ is None else environ).get(ENV_THREADS, "").strip()
    if not value or _explicit is not None:
        return None
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 1:
        raise ValueError(
            f"{ENV_THREADS}={value!r}: expected a positive integer, the number of threads of "
            f"the BLAS and OpenMP pools (e.g. {ENV_THREADS}=1); unset it to keep the libraries' "
            "defaults"
        )
    _threadpoolctl().threadpool_limits(limits=n)
    return n


def check_threads(
    xp: Any = None,
    *,
    load: float | None = None,
    cores: int | None = None,
    stacklevel: int = 1,
) -> bool:
    """Call where heavy host work starts (nnlayers' ``fit`` does): applies the thread count in
    force (:func:`set_threads` or :func:`threads`, else ``ARRAYCORE_NUM_THREADS``) to pools
    loaded or reset since it was set (importing PyTorch after ``set_threads(1)`` puts the OpenMP
    pool back to every core), and warns, once per process, when the machine is already loaded.
    Returns whether it warned.

    The :class:`~arraycore.errors.PerformanceWarning` comes when all of these hold: ``xp`` (the
    namespace about to do the work; ``None``: the NumPy backend) computes with NumPy's BLAS;
    no thread count was chosen (:func:`set_threads`, :func:`threads`, ``ARRAYCORE_NUM_THREADS``
    or a library variable such as ``OMP_NUM_THREADS``); a pool would use more than one thread;
    and the 1-minute load average of the other processes exceeds the usable cores. ``load``
    (default: ``os.getloadavg()[0]`` less this process's own estimated share) and ``cores``
    (default: the CPUs this process may run on) can be given instead of measured.
    ``stacklevel`` counts as for :func:`warnings.warn` called where ``check_threads`` is: 1 points
    the warning at that call, 2 at the caller of that function (what ``fit`` passes).

    Why here and not at import or in ``matmul``: importing arraycore should stay quiet and cheap,
    and a check per operation would cost every small product; the start of training is once per
    run, where the thread count decides whether it takes seconds or minutes. The check costs
    microseconds on an idle machine (reading the load average) and about a millisecond otherwise.
    """
    global _warned
    reapply()
    if _warned or _explicit is not None or not _on_host_blas(xp):
        return False
    if any(os.environ.get(name, "").strip() for name in (ENV_THREADS, *LIBRARY_VARIABLES)):
        return False
    if load is None:
        try:
            load = os.getloadavg()[0] - _own_load()
        except (AttributeError, OSError):  # no load average on this platform
            return False
    if cores is None:
        cores = usable_cores()
    if load <= cores:
        return False
    pools = thread_info()
    most = max((pool["num_threads"] or 1 for pool in pools), default=1)
    if most <= 1:
        return False
    names = ", ".join(sorted({str(pool["internal_api"]) for pool in pools}))
    _warned = True
    warnings.warn(
        f"the machine is already loaded (load average {load:.1f} from other processes on "
        f"{cores} usable cores) and BLAS will use {most} threads ({names}), which can make "
        f"training many times slower; run with {ENV_THREADS}=1 (or OMP_NUM_THREADS=1) or call "
        "arraycore.set_threads(1) first. arraycore warns about this once per process.",
        PerformanceWarning,
        stacklevel=stacklevel + 1,
    )
    return True


def usable_cores() -> int:
    """The CPUs this process may run on (its affinity mask where the platform has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _own_load() -> float:
    """This process's estimated share of the 1-minute load average.

    Its average number of busy CPUs since arraycore was imported, weighted as the kernel's
    exponential average (time constant 60 s) would have counted it: a long test run that kept
    two BLAS threads busy is not "another process" loading the machine, a process that started
    a second ago has hardly entered the average.
    """
    wall = time.monotonic() - _START[0]
    if wall <= 0:
        return 0.0
    busy = (time.process_time() - _START[1]) / wall
    return busy * (1.0 - math.exp(-wall / 60.0))


def _threadpoolctl() -> Any:
    """threadpoolctl, imported when first needed (it has no type information for mypy)."""
    return importlib.import_module("threadpoolctl")


def _on_host_blas(xp: Any) -> bool:
    if xp is None:
        return True
    from .backends.numpy import NumpyBackend

    return isinstance(getattr(xp, "_backend", None), NumpyBackend)


def _count(n: Any, function: str) -> int:
    if isinstance(n, bool):
        raise TypeError(f"{function}: n must be a positive int (a number of threads), got {n!r}")
    try:
        count = operator.index(n)
    except TypeError:
        raise TypeError(
            f"{function}: n must be a positive int (a number of threads), got {n!r} "
            f"({type(n).__name__})"
        ) from None
    if count < 1:
        raise ValueError(f"{function}: n must be a positive int (a number of threads), got {n!r}")
    return count
