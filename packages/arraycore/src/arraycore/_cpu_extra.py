"""Whether the NumPy backend runs with its ``cpu`` extra (oneDNN's kernels and numba's), and the
one-time advice when it does not: without it a realistic network trains much slower, and
nothing else would say so (the default install is the NumPy-only path)."""

from __future__ import annotations

import importlib.util
import os
import platform
import warnings
from typing import Any

from .errors import PerformanceWarning

#: Set to ``0`` to silence the advice.
ENV_ADVICE = "ARRAYCORE_CPU_EXTRA_ADVICE"

#: What the extra gave on the benchmark networks (``nox -s bench``, one thread, step time
#: against PyTorch CPU's, Xeon, 2026-11-28 and 2026-12-01): without it / with it.
MEASURED = "VGG-BN 1.63x -> 0.86x, LSTM 1.31x -> 0.92x of PyTorch CPU's step time"

_warned = False


def missing() -> list[str]:
    """The parts of the ``cpu`` extra the NumPy backend runs without (``[]``: none), not
    counting those switched off on purpose (``ARRAYCORE_ONEDNN=0``, ``ARRAYCORE_NUMBA=0``).
    Cheap: nothing is compiled or imported beyond loading oneDNN's library."""
    from .backends import _onednn

    found = []
    if os.environ.get("ARRAYCORE_ONEDNN", "").strip() != "0" and _onednn.library() is None:
        found.append("oneDNN")
    if (
        os.environ.get("ARRAYCORE_NUMBA", "").strip() != "0"
        and importlib.util.find_spec("numba") is None
    ):
        found.append("numba")
    return found


def wheels_exist() -> bool:
    """Whether the extra's wheels exist for this machine (Linux on x86-64: oneDNN's)."""
    return platform.system() == "Linux" and platform.machine() in ("x86_64", "AMD64")


def advice() -> str | None:
    """The line ``arraycore info`` and the first ``fit`` give when parts are missing."""
    parts = missing()
    if not parts or not wheels_exist():
        return None
    return (
        f"the NumPy backend runs without {' and '.join(parts)} (arraycore's cpu extra): "
        f'pip install "arraycore[cpu]" makes training steps faster ({MEASURED}; '
        "docs/onednn.md); its first run compiles numba's kernels once (about 7 s), cached after"
    )


def check_cpu_extra(xp: Any = None, *, stacklevel: int = 1) -> bool:
    """Warn once per process (:class:`~arraycore.errors.PerformanceWarning`) when ``xp`` (the
    namespace about to train; ``None``: NumPy's) is the NumPy backend running without its
    ``cpu`` extra where the extra can be installed. ``ARRAYCORE_CPU_EXTRA_ADVICE=0`` silences
    it. Returns whether it warned. nnlayers' ``fit`` calls it where training starts."""
    global _warned
    if _warned or os.environ.get(ENV_ADVICE, "").strip() == "0":
        return False
    from ._threads import _on_host_blas

    if not _on_host_blas(xp):
        return False
    text = advice()
    if text is None:
        return False
    _warned = True
    warnings.warn(f"arraycore: {text} (set {ENV_ADVICE}=0 to silence this)", PerformanceWarning,
                  stacklevel=stacklevel + 1)  # fmt: skip
    return True
