"""The NumPy backend's ``linalg`` decompositions and solvers: ``numpy.linalg`` itself.

arraycore's derived versions of these run on the host path (a copy to NumPy and back); on this
backend the host is the device, so the overrides are the host path's NumPy kernels
(:data:`arraycore._linalg_host.HOST`) called in place, behind arraycore's argument checks (the
same errors, integer input in float64, float16 refused, ``rtol``'s default filled in) and with
the standard's result namedtuples. They are not listed among the backend's host functions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._linalg_host import HOST

#: ``{"linalg.<name>": function}`` for :meth:`NumpyBackend.overrides`.
TABLE: dict[str, Callable[..., Any]] = {f"linalg.{name}": fn for name, fn in HOST.items()}
