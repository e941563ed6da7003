"""glibc's allocator set for training steps' large temporaries (the NumPy backend, Linux).

A training step makes and frees the same large arrays every step (activations, gradients,
oneDNN's workspaces: megabytes each). glibc serves them with ``mmap`` above its threshold, and
returns freed memory at the top of its heap to the system once more than its trim threshold
is free, so every step faults its pages in afresh: 3,000-4,000 minor page faults a step for
the benchmark's transformer block and ResNet on a 2-core Xeon VM (2026-11-28), each one a
zeroed 4 KiB page. The NumPy backend therefore sets, once, when it is first created:

- ``M_MMAP_THRESHOLD`` = 32 MiB (glibc's largest): arrays under it come from the heap;
- ``M_TRIM_THRESHOLD`` = 128 MiB: up to that much freed memory stays in the process.

Both are needed (setting either one turns off glibc's own adjustment of the other). Measured
in alternating processes, one thread: the transformer step 24.2 -> 18.3 ms, ResNet 41.8 ->
36.4 ms, page faults per step to 0. The cost: a process keeps up to 128 MiB of freed memory
instead of returning it, and heap fragmentation can hold more (the ResNet benchmark's peak
resident memory 19.8 -> 24.7 MB; the other networks' moved by under 0.5 MB).

Left alone where the user has chosen: ``ARRAYCORE_MALLOC_TUNING=0``, glibc's own settings in
the environment (``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_TRIM_THRESHOLD_``, or ``GLIBC_TUNABLES``
naming either), or no glibc (another C library; macOS, Windows). An allocator preloaded in
place of glibc's (jemalloc, tcmalloc) does not read these settings at all.
"""

from __future__ import annotations

import ctypes
import functools
import os
import sys

#: Environment variable: ``0`` leaves glibc's allocator as it is.
ENV = "ARRAYCORE_MALLOC_TUNING"
#: ``mallopt`` parameters (glibc's ``malloc.h``) and the values set.
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
MMAP_THRESHOLD = 32 << 20
TRIM_THRESHOLD = 128 << 20
#: glibc's own environment settings of the two thresholds.
GLIBC_ENV = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")
GLIBC_TUNABLES = ("glibc.malloc.mmap_threshold", "glibc.malloc.trim_threshold")


def status() -> str:
    """What :func:`tune` did, or ``"not applied yet"`` before the NumPy backend was made."""
    if tune.cache_info().currsize:
        return tune()
    return "not applied yet (on the NumPy backend's first use)"


@functools.cache  # once per process (two threads racing here set the same values twice)
def tune() -> str:
    """Set the thresholds (see the module docstring); returns what was done."""
    if os.environ.get(ENV, "").strip() == "0":
        return f"glibc's defaults (${ENV}=0)"
    chosen = [name for name in GLIBC_ENV if name in os.environ]
    tunables = os.environ.get("GLIBC_TUNABLES", "")
    chosen += [name for name in GLIBC_TUNABLES if name in tunables]
    if chosen:
        return f"left as set in the environment ({', '.join(chosen)})"
    if not sys.platform.startswith("linux"):
        return f"not tuned: glibc's allocator only (this is {sys.platform})"
    try:
        libc = ctypes.CDLL(None)
        version = libc.gnu_get_libc_version
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return "not tuned: the C library is not glibc"
    version.restype = ctypes.c_char_p
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    if not (
        mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    ):
        return "not tuned: mallopt refused the thresholds"
    glibc = version().decode()
    return (
        f"glibc {glibc}: arrays under {MMAP_THRESHOLD >> 20} MiB from the heap, up to "
        f"{TRIM_THRESHOLD >> 20} MiB of freed memory kept (${ENV}=0 leaves the defaults)"
    )
