"""GNU OpenMP (libgomp), the one thread pool that the NumPy backend's optional kernels share:
oneDNN's (:mod:`._onednn`) and numba's (:mod:`._numba`), as PyTorch runs all of its CPU work on
one OpenMP pool. Two pools on the same cores fight: an idle pool's threads spin and take the
cores the other one needs (OpenBLAS's spin for about 0.1 s after each call).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading
from typing import Any

#: How long GNU OpenMP's idle threads spin before they sleep (libgomp's ``GOMP_SPINCOUNT``, in
#: busy-wait iterations: about 0.1-0.3 ms). Its default (300,000 when ``OMP_WAIT_POLICY`` is
#: unset) spins for milliseconds after each parallel region; sleeping at once (``PASSIVE``)
#: costs a wake-up of tens of microseconds per call, which doubled a 2-thread LSTM step. A short
#: spin keeps the threads warm between a step's calls and gives the cores back soon after.
SPIN_COUNT = "10000"


def open_library(path: str) -> ctypes.CDLL:
    """``dlopen`` ``path`` (libgomp itself or a library linked to it) with GNU OpenMP's idle
    threads spinning only briefly (:data:`SPIN_COUNT`), unless the user chose
    ``OMP_WAIT_POLICY`` or ``GOMP_SPINCOUNT``: libgomp reads them when it is loaded, so the
    variable is set only for that moment."""
    if "OMP_WAIT_POLICY" in os.environ or "GOMP_SPINCOUNT" in os.environ:
        return ctypes.CDLL(path)
    os.environ["GOMP_SPINCOUNT"] = SPIN_COUNT
    try:
        return ctypes.CDLL(path)
    finally:
        os.environ.pop("GOMP_SPINCOUNT", None)


_LOCK = threading.Lock()
_STATE: dict[str, Any] = {}


def runtime() -> Any:
    """``omp_get_max_threads`` of the process's libgomp (loaded here first, with the short spin,
    when nothing loaded it yet), or ``None`` where there is no libgomp."""
    with _LOCK:
        if "max_threads" not in _STATE:
            fn = None
            try:
                lib = open_library(ctypes.util.find_library("gomp") or "libgomp.so.1")
                fn = lib.omp_get_max_threads
                fn.argtypes, fn.restype = [], ctypes.c_int
            except (OSError, AttributeError):
                fn = None
            _STATE["max_threads"] = fn
            _STATE["lib"] = lib if fn is not None else None
        return _STATE["max_threads"]


def max_threads() -> int:
    """The OpenMP thread count in force (``OMP_NUM_THREADS``, :func:`arraycore.set_threads`);
    0 without libgomp."""
    fn = _STATE["max_threads"] if "max_threads" in _STATE else runtime()
    return int(fn()) if fn is not None else 0


def set_max_threads(count: int) -> None:
    """``omp_set_num_threads(count)`` on the calling thread (nothing without libgomp)."""
    if runtime() is not None:
        _STATE["lib"].omp_set_num_threads(int(count))
