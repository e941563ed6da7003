"""The backend protocol: the one file a backend author implements.

A backend is a subclass of :class:`Backend` that implements the *required primitives* below
(each marked ``@abstractmethod``). Everything else in the user namespace (type promotion, scalar
handling, ``mean``/``var``/``std``, ``linspace``, ``concat``, ``flip``, the ``nn`` kernels, the
random distributions, ...) is derived from these primitives by :class:`arraycore.Namespace`. A
backend that has a faster kernel for any derived function overrides it by returning it from
:meth:`Backend.overrides`.

Contract for every primitive:

- Arrays passed in belong to this backend and to the backend's device; arraycore has already
  checked that and has already promoted dtypes, so the inputs of ``binary``, ``matmul`` and
  ``where`` share one dtype, and converted them to the dtype the function computes in
  (``docs/dtypes.md``): the floating-point functions receive floating arrays only.
- Shapes are tuples of Python ints; ``axes`` are normalised to non-negative ints.
- Results are new arrays unless the primitive says it writes into ``out``.

See ``packages/arraycore/docs/backends.md`` for a walk-through.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from ._optable import (
    BINARY_PRIMITIVES,
    ELEMENTWISE,
    OPTIONAL_PRIMITIVES,
    REQUIRED_BINARY,
    REQUIRED_UNARY,
    UNARY_PRIMITIVES,
    Elementwise,
    kernel_expression,
)

PROTOCOL_VERSION: tuple[int, int] = (1, 1)
"""The version of this backend protocol, ``(major, minor)``. A minor version only adds: optional
primitives (with a derived default in arraycore), optional methods (with a default in
:class:`Backend`), helpers. A major version may change or require something, and arraycore
refuses a backend declaring a major version it does not know. See ``docs/backends.md``,
"Protocol versions", for the rules and the changelog."""

FIRST_PROTOCOL_VERSION: tuple[int, int] = (1, 0)
"""What a backend that declares no :attr:`Backend.protocol_version` implements."""

Array = Any
"""A backend's array object (``numpy.ndarray``, ``cupy.ndarray``, or the backend's own class)."""

Shape = tuple[int, ...]
Key = tuple[int | slice | None, ...]
"""A normalised basic index: ints, slices and ``None`` only, no Ellipsis, one entry per axis
(``None`` entries add axes). Ints are in range and non-negative; slices are as the user wrote
them (``None``, negative or out-of-range bounds, negative steps): resolve them with
``slice.indices(size)``."""

UNARY_OPS: frozenset[str] = REQUIRED_UNARY
"""Element-wise unary ops every backend's :meth:`Backend.unary` accepts: the required ones, those
of protocol 1.0 (frozen: a later version never adds to them)."""

BINARY_OPS: frozenset[str] = REQUIRED_BINARY
"""Element-wise binary ops every backend's :meth:`Backend.binary` accepts (with broadcasting):
the required ones, those of protocol 1.0 (frozen)."""

OPTIONAL_UNARY_OPS: frozenset[str] = UNARY_PRIMITIVES - REQUIRED_UNARY
"""Unary primitives added after protocol 1.0: a backend's ``unary`` receives one only if the
backend lists it in :attr:`Backend.optional_primitives`; arraycore derives the others."""

OPTIONAL_BINARY_OPS: frozenset[str] = BINARY_PRIMITIVES - REQUIRED_BINARY
"""Binary primitives added after protocol 1.0 (see :data:`OPTIONAL_UNARY_OPS`)."""

OPTIONAL_OPS: dict[str, tuple[int, int]] = dict(OPTIONAL_PRIMITIVES)
"""Every optional element-wise primitive, with the protocol version that added it."""

REDUCE_OPS: frozenset[str] = frozenset({"sum", "prod", "max", "min", "any", "all"})
ARG_REDUCE_OPS: frozenset[str] = frozenset({"argmax", "argmin"})


@dataclass(frozen=True)
class Device:
    """One device of a backend, as listed by ``arraycore info`` and ``__array_namespace_info__``.

    ``id`` is what arrays report as their ``.device`` (or compares equal to it); ``name`` is a
    human description; ``capabilities`` declares optional dtypes (``"float64"``, ``"float16"``).
    """

    backend: str
    id: Any
    name: str
    capabilities: dict[str, bool] = field(default_factory=dict)

    def __str__(self) -> str:
        return f"{self.backend}:{self.id} ({self.name})"


class BackendUnavailable(Exception):
    """Raised by :meth:`Backend.probe` when the backend's library or device is missing."""


class DeviceNotFound(BackendUnavailable):
    """Raised by :meth:`Backend.select_device` when no device matches the selector."""


class CaptureUnsupported(Exception):
    """Raised by :meth:`Backend.capture` where work cannot be captured: the backend has no
    capture (the default), or this piece of work does something a capture cannot hold (a host
    copy, a synchronisation, a library call the device refuses under capture). The message says
    why in one line; nothing of the work has run on the device."""


class Captured:
    """Work captured once by :meth:`Backend.capture`, to be replayed.

    ``result`` is what the captured function returned: its arrays are the capture's own and
    every :meth:`replay` writes them anew. ``replay()`` queues the captured work once more,
    ordered after the work queued before it and before the work queued after it (no host
    synchronisation). ``description`` is a line for reports (what was captured, how).
    """

    def __init__(
        self, result: Any, replay: Callable[[], None], description: str = "", keep: Any = None
    ) -> None:
        self.result = result
        self.replay = replay
        self.description = description
        self._keep = keep  # what the captured work reads and must outlive it (pools, buffers)


class Backend(ABC):
    """Base class of every arraycore backend.

    Subclass it, implement the abstract primitives, and declare the class as an entry point::

        [project.entry-points."arraycore.backends"]
        mybackend = "mypackage:MyBackend"
    """

    #: Entry-point name; ``ARRAYCORE_BACKEND`` selects the backend by it.
    name: ClassVar[str] = ""
    #: The pip command that installs this backend, quoted in "not installed" errors.
    install_hint: ClassVar[str] = ""
    #: Names among :meth:`overrides` that follow arraycore's dtype rules (``docs/dtypes.md``)
    #: for integer and bool inputs too, so the namespace binds them as they are. The others, of
    #: the functions the rules govern, receive only inputs without integer or bool arrays;
    #: arraycore's derived function handles the rest (see ``arraycore._dtype_rules.guard``).
    conforming_overrides: ClassVar[frozenset[str]] = frozenset()
    #: The version of the backend protocol this backend implements, ``(major, minor)``
    #: (:data:`PROTOCOL_VERSION`). Not declared: ``(1, 0)``, the first one. arraycore refuses a
    #: backend of a major version it does not know; a newer minor is accepted.
    protocol_version: ClassVar[tuple[int, int]] = FIRST_PROTOCOL_VERSION
    #: The optional primitives (:data:`OPTIONAL_OPS`) that this backend's ``unary``/``binary``
    #: compute. arraycore sends those to the backend and derives the rest from the required
    #: primitives; the default declares none. ``frozenset(OPTIONAL_OPS)`` declares them all.
    optional_primitives: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, device: str | int | None = None) -> None:
        devices = self.devices()
        if not devices:
            raise BackendUnavailable(f"backend {self.name!r} found no usable device")
        self.device = self.select_device(devices, device)

    # -- discovery -------------------------------------------------------------------------
    @classmethod
    def probe(cls) -> None:
        """Raise :class:`BackendUnavailable` (chained to the cause) if the backend cannot run.

        Called before the backend is instantiated and by ``arraycore info``. Import optional
        libraries here, not at module import time.
        """

    @classmethod
    def version(cls) -> str:
        """Versions of the backend and the libraries it drives, for ``arraycore info``."""
        return ""

    @classmethod
    @abstractmethod
    def devices(cls) -> list[Device]:
        """All usable devices of this backend, the default one first."""

    @classmethod
    def select_device(cls, devices: list[Device], selector: str | int | None) -> Device:
        """Pick a device from ``ARRAYCORE_DEVICE`` or ``use(device=...)``.

        The default accepts ``None`` (first device), an index, or a substring of the name.
        """
        if selector is None or selector == "":
            return devices[0]
        text = str(selector).strip()
        if text.lstrip("-").isdigit():
            index = int(text)
            if 0 <= index < len(devices):
                return devices[index]
        else:
            for dev in devices:
                if text.lower() in dev.name.lower() or text == str(dev.id):
                    return dev
        listing = ", ".join(f"{i}: {d.name}" for i, d in enumerate(devices))
        raise DeviceNotFound(
            f"backend {cls.name!r} has no device matching {selector!r}; devices are: {listing}"
        )

    @abstractmethod
    def owns(self, x: Any) -> bool:
        """Whether ``x`` is an array of this backend (any of its devices)."""

    def device_of(self, x: Array) -> Any:
        """The device id of array ``x`` (compared with :attr:`Device.id`)."""
        return self.device.id

    # -- required primitives: creation and host transfer -----------------------------------
    @abstractmethod
    def from_numpy(self, a: np.ndarray) -> Array:
        """Copy a host array to this backend's device (same shape and dtype)."""

    @abstractmethod
    def to_numpy(self, x: Array) -> np.ndarray:
        """Copy an array to the host as a ``numpy.ndarray`` (waits for pending work)."""

    @abstractmethod
    def full(self, shape: Shape, fill_value: bool | int | float, dtype: np.dtype) -> Array:
        """A new array of ``shape`` (non-negative ints, checked) filled with ``fill_value``."""

    # -- required primitives: element-wise ----------------------------------------------------
    @abstractmethod
    def unary(self, op: str, x: Array, out: Array | None = None) -> Array:
        """Element-wise ``op`` (one of :data:`UNARY_OPS`, or of :data:`OPTIONAL_UNARY_OPS` that the
        backend declares in :attr:`optional_primitives`), NumPy semantics; writes ``out`` if given.

        ``op`` means the NumPy function its op-table entry names (``ELEMENTWISE``, ``reference``)
        and receives only the dtypes its entry's kernel expressions cover: the floating-point
        functions and ``floor``/``ceil``/``round``/``trunc`` floating arrays only, ``isnan`` and
        ``isinf`` too, ``negative``/``sign``/``abs`` no bool, ``logical_not`` bool only,
        ``bitwise_invert`` integers and bool.
        """

    @abstractmethod
    def binary(self, op: str, x1: Array, x2: Array, out: Array | None = None) -> Array:
        """Element-wise ``op`` of :data:`BINARY_OPS` (or a declared one of
        :data:`OPTIONAL_BINARY_OPS`) with broadcasting; writes ``out`` if given.

        ``x1`` and ``x2`` have the same dtype, one the op's entry in ``ELEMENTWISE`` has a kernel
        expression for. Comparisons return ``bool``; logical ops receive bool arrays only. ``divide`` of
        integers is never asked for (arraycore promotes to floating point first), nor
        ``subtract``, ``floor_divide``, ``remainder`` or ``pow`` of bools, nor ``pow`` of signed
        integers with a negative exponent (arraycore raises first). ``floor_divide`` and
        ``remainder`` of integers by zero give 0, as in NumPy (without its warning).
        """

    @abstractmethod
    def where(self, condition: Array, x1: Array, x2: Array) -> Array:
        """Element-wise select with broadcasting (``condition`` is bool; x1, x2 share a dtype)."""

    @abstractmethod
    def astype(self, x: Array, dtype: np.dtype) -> Array:
        """A converted copy of ``x`` (always a new array, even for the same dtype)."""

    # -- required primitives: reductions and linear algebra ----------------------------------
    @abstractmethod
    def reduce(self, op: str, x: Array, axes: tuple[int, ...], keepdims: bool) -> Array:
        """``op`` of :data:`REDUCE_OPS` over ``axes`` (non-empty, sorted, unique).

        ``sum``/``prod`` keep the input dtype (arraycore casts first when the standard says to
        accumulate in a wider type); ``max``/``min`` of an empty axis are never asked for.
        """

    @abstractmethod
    def arg_reduce(self, op: str, x: Array, axis: int, keepdims: bool) -> Array:
        """``argmax``/``argmin`` along one axis, int64 indices, first occurrence wins."""

    @abstractmethod
    def matmul(self, x1: Array, x2: Array) -> Array:
        """Batched matrix product of two arrays of at least 2 dimensions, batch axes broadcast."""

    # -- required primitives: layout -----------------------------------------------------------
    @abstractmethod
    def reshape(self, x: Array, shape: Shape) -> Array:
        """``x`` in a new shape of the same size (C order; a view or a copy)."""

    @abstractmethod
    def permute_dims(self, x: Array, axes: tuple[int, ...]) -> Array:
        """Axes reordered (a view or a copy)."""

    @abstractmethod
    def broadcast_to(self, x: Array, shape: Shape) -> Array:
        """``x`` broadcast to ``shape`` (read-only view or copy)."""

    @abstractmethod
    def getitem(self, x: Array, key: Key) -> Array:
        """Basic indexing with a normalised :data:`Key` (ints in range, raw slices, ``None``)."""

    @abstractmethod
    def setitem(self, x: Array, key: Key, value: Array) -> None:
        """Write ``value`` into ``x[key]`` in place: same dtype, and a shape that broadcasts to
        ``x[key]``'s (arraycore has checked that and dropped extra leading size-1 axes)."""

    # -- required primitives: gather / scatter ------------------------------------------------
    @abstractmethod
    def take(self, x: Array, indices: Array, axis: int) -> Array:
        """Gather along ``axis`` with a 1-D int64 index array, every index in ``[0, n)``
        (arraycore has checked user indices, ``-n <= i < n``, and added ``n`` to negative ones)."""

    @abstractmethod
    def scatter_add(self, out: Array, indices: Array, values: Array, axis: int) -> None:
        """``out[..., indices[i], ...] += values[..., i, ...]`` along ``axis``, in place.

        Repeated indices accumulate (unlike ``out[indices] += values`` in NumPy). Indices are
        int64 in ``[0, n)`` and ``values`` of ``out``'s dtype and shape ``out.shape`` with axis
        ``axis`` replaced by ``len(indices)``, all checked before the call.
        """

    # -- required primitives: random numbers --------------------------------------------------
    @abstractmethod
    def rng_state(self, seed: int) -> Any:
        """A fresh random state for ``seed``; same seed, same stream on this backend."""

    @abstractmethod
    def rng_uniform(self, state: Any, shape: Shape, dtype: np.dtype) -> Array:
        """Uniform samples in [0, 1), advancing ``state``."""

    # -- optional overrides -----------------------------------------------------------------------
    def overrides(self) -> dict[str, Callable[..., Any]]:
        """Faster implementations of derived namespace functions, by dotted name.

        Keys are namespace names (``"add"``, ``"mean"``) or sub-namespace names
        (``"nn.conv2d"``, ``"inplace.add"``, ``"random.normal"``). Each value must accept exactly
        the arguments of the derived function it replaces and give the same results within the
        conformance kit's tolerances.
        """
        return {}

    def memory_stats(self) -> dict[str, int] | None:
        """Device memory in bytes, or None where the backend does not track it (the default).

        A backend that pools device memory returns at least ``used_bytes`` (held by live arrays)
        and ``peak_bytes`` (the most it has held since the last :meth:`reset_memory_stats`);
        more keys are welcome. Reading them must not wait for the device.
        """
        return None

    def reset_memory_stats(self) -> None:
        """Start a new peak for :meth:`memory_stats` (a no-op where nothing is tracked)."""

    def synchronize(self) -> None:
        """Wait until the device has finished the work queued so far (a no-op, the default,
        where every call returns only once its result is computed, as on the host)."""

    # -- capture and replay (optional, protocol 1.1) ----------------------------------------
    def capture_support(self) -> str | None:
        """``None`` where :meth:`capture` can capture work on this device, else why not in one
        line (the default: this backend does not capture)."""
        return f"the {self.name} backend does not capture work (it runs every call as it comes)"

    def capture(self, fn: Callable[[], Any]) -> Captured:
        """Call ``fn()`` once with its device work captured rather than run, and return a
        :class:`Captured` that replays that work (a CUDA graph on the CUDA backend).

        ``fn`` must have been run eagerly before (its kernels compiled, library plans built,
        its state allocated), make no host copy and no synchronisation, and read and write
        only arrays that outlive the capture. Its Python side effects happen once, now; its
        device work happens at each replay, the first one included (the caller replays once
        to take the captured step). Raise :class:`CaptureUnsupported` with the reason where
        the work cannot be captured, leaving nothing queued; the default raises it always.
        """
        raise CaptureUnsupported(
            self.capture_support() or f"the {self.name} backend cannot capture"
        )


def protocol_problems(cls: type[Backend]) -> list[str]:
    """What keeps backend class ``cls`` from running on this arraycore, one sentence each
    (empty: nothing): a protocol version it cannot declare or that arraycore does not know, a
    required primitive it lacks, an optional primitive it declares that does not exist."""
    version = getattr(cls, "protocol_version", FIRST_PROTOCOL_VERSION)
    ours = ".".join(map(str, PROTOCOL_VERSION))
    if not (
        isinstance(version, tuple)
        and len(version) == 2
        and all(type(part) is int and part >= 0 for part in version)
    ):
        return [
            f"its protocol_version is {version!r}; it must be a (major, minor) tuple of ints, "
            f"such as {PROTOCOL_VERSION!r} (this arraycore's)"
        ]
    problems = []
    if version[0] != PROTOCOL_VERSION[0]:
        problems.append(
            f"it implements backend protocol {version[0]}.{version[1]}, and this arraycore "
            f"implements protocol {ours}, which runs backends of protocol "
            f"{PROTOCOL_VERSION[0]}.x only: "
            + (
                "install a newer arraycore (pip install -U arraycore)"
                if version[0] > PROTOCOL_VERSION[0]
                else "install a release of the backend for this protocol"
            )
        )
    missing = sorted(getattr(cls, "__abstractmethods__", ()))
    if missing:
        problems.append(
            f"it does not implement the required primitive{'s' if len(missing) > 1 else ''} "
            f"{', '.join(missing)} (protocol {ours}: docs/backends.md, 'The required primitives')"
        )
    declared: Any = getattr(cls, "optional_primitives", frozenset())
    if isinstance(declared, str) or not all(isinstance(n, str) for n in declared):
        problems.append(
            f"its optional_primitives is {declared!r}; it must be a frozenset of names of "
            f"arraycore.backend.OPTIONAL_OPS"
        )
    elif tuple(version) <= PROTOCOL_VERSION:  # a newer minor may name primitives we lack
        unknown = sorted(set(declared) - set(OPTIONAL_OPS) - UNARY_OPS - BINARY_OPS)
        if unknown:
            problems.append(
                f"it declares optional primitives that protocol {ours} does not have: "
                f"{', '.join(unknown)} (the optional ones: arraycore.backend.OPTIONAL_OPS)"
            )
    return problems


def normalize_axes(axis: int | Sequence[int] | None, ndim: int, op: str) -> tuple[int, ...]:
    """Normalise an ``axis`` argument to a sorted tuple of non-negative ints, or raise."""
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, int | np.integer) else tuple(axis)
    result = []
    for a in axes:
        if not -ndim <= a < ndim:
            raise ValueError(f"{op}: axis {a} is out of range for an array of {ndim} dimensions")
        result.append(int(a) % ndim)
    if len(set(result)) != len(result):
        raise ValueError(f"{op}: repeated axis in {axis!r}")
    return tuple(sorted(result))


# -- for backends' own fusers ---------------------------------------------------------------------
def check_fuse_args(fn: Any, scalar_operands: Any) -> None:
    """The argument checks of ``xp.inplace.fuse``: a backend with its own fuser calls this
    first, so that every backend refuses the same arguments with the same errors."""
    if not callable(fn):
        raise TypeError(f"inplace.fuse: expected a function, got {type(fn).__name__}")
    if not isinstance(scalar_operands, bool):
        raise TypeError(
            f"inplace.fuse: scalar_operands must be True or False, got {scalar_operands!r}"
        )


# -- for settings in the environment -------------------------------------------------------------
_ON = ("", "1", "on", "true", "yes")
_OFF = ("0", "off", "false", "no", "none")


def env_switch(variable: str) -> bool:
    """Whether the on/off setting ``$variable`` is on: unset, ``1``/``on``/``true``/``yes`` (on,
    the default) or ``0``/``off``/``false``/``no``/``none`` (off), any case; anything else is a
    ``ValueError`` naming the variable. Backends read their switches with it (the CUDA backend's
    ``ARRAYCORE_CUDNN``, capture's ``ARRAYCORE_CUDA_GRAPHS``), so every switch reads alike."""
    value = os.environ.get(variable, "").strip().lower()
    if value in _ON:
        return True
    if value in _OFF:
        return False
    raise ValueError(f"${variable} must be 1 or 0, got {value!r}")


# -- for backends' own nn kernels -----------------------------------------------------------------
# A backend that overrides ``nn.*`` checks its arguments and lays out its windows exactly as the
# reference kernels do (same errors, same output sizes) with these helpers.
from ._dtypes import dtype_name  # noqa: E402
from ._nn import check_float  # noqa: E402
from .nn_shapes import (  # noqa: E402
    Window2d,
    check_output_shape,
    conv_transpose_window,
    conv_window,
    pool_window,
)

__all__ = [
    "ARG_REDUCE_OPS",
    "BINARY_OPS",
    "FIRST_PROTOCOL_VERSION",
    "OPTIONAL_BINARY_OPS",
    "OPTIONAL_OPS",
    "OPTIONAL_UNARY_OPS",
    "PROTOCOL_VERSION",
    "REDUCE_OPS",
    "UNARY_OPS",
    "Array",
    "Backend",
    "BackendUnavailable",
    "CaptureUnsupported",
    "Captured",
    "ELEMENTWISE",
    "Device",
    "DeviceNotFound",
    "Elementwise",
    "Key",
    "Shape",
    "Window2d",
    "check_float",
    "check_fuse_args",
    "check_output_shape",
    "dtype_name",
    "env_switch",
    "conv_transpose_window",
    "conv_window",
    "kernel_expression",
    "normalize_axes",
    "pool_window",
    "protocol_problems",
]
