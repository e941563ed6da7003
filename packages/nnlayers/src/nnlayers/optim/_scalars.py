"""An optimiser's per-step scalars as 0-d device arrays (device backends).

On a device, a Python float handed to a kernel is a kernel argument: a captured step (a CUDA
graph) would replay it frozen, so the learning rate of a schedule, Adam's bias corrections and
AdamW's decay factor would stay at their values of the captured step. On backends whose arrays
are not host NumPy arrays the optimisers therefore keep them on the device: a step counter
(int64, advanced in place at the end of each step) from which every scalar of the step is
computed with the namespace's functions, in float64 where the device has it (float32 else), and
cast once to each parameter dtype. Two consecutive steps then make the same backend calls with
the same non-array arguments, and nothing is copied to or from the host. On the NumPy backend
the same scalars are Python floats, as they always were (a host step captures nothing, and a
0-d array costs about 1.5 us an operation there).

The counter is set from the host once (first step, a loaded state, a changed
``step_count``); a learning rate that is a plain callable (no :meth:`Schedule.on_device
<nnlayers.optim.schedules.Schedule.on_device>`) is computed on the host and copied each step,
and :attr:`StepScalars.host_reason` says so.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from arraycore import ArrayNamespace

from .schedules import describe_lr, device_rate

Array = Any


class StepScalars:
    """The device scalars of one optimiser on one namespace (see the module docstring)."""

    def __init__(self, xp: ArrayNamespace) -> None:
        self.xp = xp
        dtypes = xp.__array_namespace_info__().dtypes(kind="real floating")
        #: the dtype the scalars are computed in
        self.dtype = xp.float64 if "float64" in dtypes else xp.float32
        self._counter: Array | None = None
        self._at: int | None = None  # the host step count the counter holds
        self._steps: Array | None = None  # the counter as self.dtype, this step (lazily)
        self._step = 0
        self._constant: tuple[float, Array] | None = None
        self._rate: Array | None = None
        self._memo: dict[Any, Any] = {}
        self._constant_lrs: dict[Any, Array] = {}  # lr(...) of a constant rate, kept
        self._wide: dict[int, Array] = {}
        #: why this optimiser's steps copy a scalar from the host (``None``: they do not)
        self.host_reason: str | None = None

    def begin(self, lr: Any, step: int, host_lr: float) -> None:
        """Start step ``step`` (steps taken before it) with the optimiser's ``lr`` (a number or
        a schedule) whose host value there is ``host_lr``."""
        xp = self.xp
        if self._at != step or self._counter is None:
            self._counter = xp.full((), step, dtype=xp.int64)
            self._at = step
        self._step = step
        self._memo.clear()
        self._steps = None
        if not callable(lr):
            value = float(lr)
            if self._constant is None or self._constant[0] != value:
                self._constant = (value, xp.full((), value, dtype=self.dtype))
                self._constant_lrs.clear()
                self._wide.clear()
            self._rate = self._constant[1]
            self.host_reason = None
            return
        self._wide.clear()
        self._constant_lrs.clear()
        rate = device_rate(lr, xp, self.steps)
        if rate is None:
            self.host_reason = (
                f"the learning rate {describe_lr(lr)} is a callable without a device form, so "
                f"each step copies its value from the host (use a schedule of "
                f"nnlayers.optim.schedules, or give yours an on_device method)"
            )
            rate = xp.full((), host_lr, dtype=self.dtype)
        else:
            self.host_reason = None
        self._rate = rate

    @property
    def steps(self) -> Array:
        """The steps taken before this one, a 0-d array of :attr:`dtype`."""
        if self._steps is None:
            self._steps = self.xp.astype(self._counter, self.dtype)
        return self._steps

    def end(self) -> None:
        """Count the step on the device."""
        if self._counter is not None:
            self.xp.inplace.add(self._counter, 1, out=self._counter)
            self._at = self._step + 1

    def lr(self, multiplier: float, dtype: Any) -> Array:
        """The step's learning rate times ``multiplier``, a 0-d array of ``dtype``."""
        key = ("lr", multiplier, dtype)
        constant = self._constant is not None and self._rate is self._constant[1]
        cache = self._constant_lrs if constant else self._memo
        found = cache.get(key)
        if found is None:
            xp = self.xp
            wide = self._rate if multiplier == 1.0 else xp.multiply(self._rate, multiplier)
            found = wide if dtype == self.dtype else xp.astype(wide, dtype)
            cache[key] = found
            self._wide[id(found)] = wide
        return found

    def wide(self, lr: Array) -> Array:
        """The value :meth:`lr` gave as ``lr``, in :attr:`dtype` (before its cast)."""
        return self._wide.get(id(lr), lr)

    def count(self, count: int) -> Array:
        """A parameter's update count ``count`` (this step's included) as a 0-d array of
        :attr:`dtype`: the step counter plus the host-known offset ``count - step``."""
        key = ("count", count - self._step)
        found = self._memo.get(key)
        if found is None:
            found = self._memo[key] = self.xp.add(self.steps, float(count - self._step))
        return found

    def memo(self, key: Any, make: Callable[[], Any]) -> Any:
        """``make()``, computed once per step for ``key`` (what several parameters share)."""
        found = self._memo.get(key)
        if found is None:
            found = self._memo[key] = make()
        return found
