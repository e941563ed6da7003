"""The user namespace, derived from a backend's primitives.

:class:`Namespace` implements every public function of arraycore in terms of the required
primitives of :class:`arraycore.backend.Backend`. Names and semantics follow the Python Array
API standard (2024.12); result dtypes follow the one table of :mod:`arraycore._dtype_rules`
(``docs/dtypes.md``). A backend replaces any function here with a faster one through
:meth:`Backend.overrides`; the replacement is bound as an instance attribute, so calling it costs
no more than calling the backend's function directly (unless it is not declared conforming to
the dtype rules: then integer and bool inputs take the function here, see
:func:`arraycore._dtype_rules.guard`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from . import _checks, _dtype_rules, _optable
from ._creation import CreationFunctions
from ._dtypes import can_cast, finfo, iinfo, isdtype, result_type
from ._elementwise import ElementwiseFunctions
from ._indexing import IndexingFunctions
from ._linalg import LinalgNamespace
from ._linalg_main import LinearAlgebraFunctions
from ._manipulation import ManipulationFunctions
from ._manipulation_more import MoreManipulationFunctions
from ._reductions import ReductionFunctions
from ._searching import SearchingFunctions
from ._subnamespaces import (
    Generator,
    InplaceNamespace,
    NamespaceInfo,
    NNNamespace,
    RandomNamespace,
)
from .backend import Backend

__all__ = ["Generator", "Namespace"]


class Namespace(
    CreationFunctions,
    ElementwiseFunctions,
    ReductionFunctions,
    LinearAlgebraFunctions,
    ManipulationFunctions,
    MoreManipulationFunctions,
    IndexingFunctions,
    SearchingFunctions,
):
    """The array namespace of one backend on one device.

    Get one with :func:`arraycore.namespace`; its functions follow the Array API standard. The
    ``linalg`` extension is ``xp.linalg``; the sub-namespaces ``nn``, ``inplace`` and ``random``
    hold what the standard lacks.
    """

    __array_api_version__ = "2024.12"

    # dtypes are NumPy dtype objects on every backend
    bool = np.dtype("bool")
    int8 = np.dtype("int8")
    int16 = np.dtype("int16")
    int32 = np.dtype("int32")
    int64 = np.dtype("int64")
    uint8 = np.dtype("uint8")
    uint16 = np.dtype("uint16")
    uint32 = np.dtype("uint32")
    uint64 = np.dtype("uint64")
    float16 = np.dtype("float16")
    float32 = np.dtype("float32")
    float64 = np.dtype("float64")
    e = math.e
    pi = math.pi
    inf = math.inf
    nan = math.nan
    newaxis = None

    result_type = staticmethod(result_type)
    can_cast = staticmethod(can_cast)
    finfo = staticmethod(finfo)
    iinfo = staticmethod(iinfo)
    isdtype = staticmethod(isdtype)

    def __init__(self, backend: Backend) -> None:
        self._backend = backend
        self._dtype_cache: dict[Any, np.dtype] = {}
        self._rule_cache: dict[tuple[str, Any, Any], np.dtype] = {}
        self.name = backend.name
        # what array-api-compat (and so scikit-learn, SciPy) identifies a namespace by
        self.__name__ = "arraycore"
        self.device = backend.device
        # the optional primitives the backend does not declare: arraycore derives them
        declared = backend.optional_primitives
        self._fallbacks = {
            op.name: op.fallback
            for op in _optable.ELEMENTWISE
            if op.fallback is not None and op.name not in declared
        }
        self.nn = NNNamespace(self)
        self.inplace = InplaceNamespace(self)
        self.random = RandomNamespace(self)
        self.linalg = LinalgNamespace(self)
        self._info = NamespaceInfo(self)
        for dotted, fn in backend.overrides().items():
            owner: Any = self
            *path, attr = dotted.split(".")
            for part in path:
                owner = getattr(owner, part)
            if not hasattr(owner, attr):
                raise AttributeError(
                    f"backend {backend.name!r} overrides {dotted!r}, which arraycore does not have"
                )
            if dotted in _dtype_rules.GUARDED and dotted not in backend.conforming_overrides:
                # Integer and bool inputs go to arraycore's function, which applies the rules.
                own = owner._derived(attr) if path else getattr(Namespace, attr).__get__(self)
                fn = _dtype_rules.guard(dotted, fn, own, backend.owns)
            setattr(owner, attr, _checks.guard(self, dotted, fn))

    def __repr__(self) -> str:
        return f"<arraycore namespace {self.name!r} on {self.device}>"

    def __array_namespace_info__(self) -> NamespaceInfo:
        """Inspection utilities: devices, default dtypes, supported dtypes, capabilities."""
        return self._info
