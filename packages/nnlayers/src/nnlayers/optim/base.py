"""The optimiser base class, the parameter protocol, and gradient clipping by global norm.

Optimisers work against a small duck-typed protocol (:class:`ParameterLike`), not a concrete
class: anything with ``.name``, ``.value`` (updated in place) and ``.grad`` can be trained, and
:class:`nnlayers.Parameter` is one such thing.

Every update runs on the device through ``xp.inplace`` ops of the parameters' arraycore
namespace: no value is brought to the host during a step (gradient clipping included: its scale
``min(1, max_norm / (norm + eps))`` stays a 0-d device array). State buffers (momentum, moments)
are allocated once per parameter at its first update; scratch space is one flat buffer per dtype
(two with clipping or coupled weight decay), as large as the largest parameter and shared by all.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

import arraycore
from arraycore import ArrayNamespace

from .. import profiler
from ..parameter import Parameter, trainable_version
from ._scalars import StepScalars
from .schedules import LearningRate, describe_lr

Array = Any


@runtime_checkable
class ParameterLike(Protocol):
    """What an optimiser needs of a parameter.

    - ``name``: unique among the optimiser's parameters (state is exported under it);
    - ``value``: an arraycore array, updated in place;
    - ``grad``: an array of the same shape (``None``: no gradient this step, so no update).

    Optional attributes, read when present: ``weight_decay`` (``None`` or absent: the
    optimiser's own setting), ``lr_multiplier`` (scales the learning rate; ``0.0`` freezes the
    parameter) and ``trainable`` (``False``: never updated).
    """

    name: Any
    value: Any
    grad: Any


class Optimizer:
    """Base class of the optimisers: parameters, learning rate, weight decay, clipping, state.

    Subclasses declare their state ``slots`` and implement :meth:`_update`, which receives the
    parameter's value, its effective gradient (already clipped and, for coupled weight decay,
    decayed), its state buffers and two scratch buffers, and updates the value in place.

    - ``lr``: a float, or a schedule (any callable ``step -> float``, see
      :mod:`nnlayers.optim.schedules`) called with the number of steps taken before this one.
    - ``params``: the parameters to update; when omitted, a model supplies them through
      :meth:`bind`.
    - ``weight_decay``: the default for parameters whose own ``weight_decay`` is ``None``.
    - ``clip_norm``: if set, gradients are scaled by ``min(1, clip_norm / (norm + clip_eps))``,
      where ``norm`` is the global L2 norm of all gradients of the step, computed on the device.

    ``copy.deepcopy`` of an optimiser gives a fresh one with the same settings: no parameters,
    no state, step 0 (what a GAN needs for its second network).
    """

    slots: tuple[str, ...] = ()
    #: Whether ``weight_decay`` is added to the gradient (L2) rather than applied by the subclass.
    coupled_weight_decay = True

    def __init__(
        self,
        lr: LearningRate,
        *,
        params: Iterable[ParameterLike] | None = None,
        weight_decay: float = 0.0,
        clip_norm: float | None = None,
        clip_eps: float = 1e-6,
    ) -> None:
        _check_lr(type(self).__name__, lr)
        _check_nonnegative(type(self).__name__, "weight_decay", weight_decay)
        if clip_norm is not None and not (_is_real(clip_norm) and clip_norm > 0):
            raise ValueError(
                f"{type(self).__name__}: clip_norm must be > 0 or None, got {clip_norm!r}"
            )
        if not (_is_real(clip_eps) and clip_eps >= 0):
            raise ValueError(f"{type(self).__name__}: clip_eps must be >= 0, got {clip_eps!r}")
        self.lr = lr
        self.weight_decay = float(weight_decay)
        self.clip_norm = None if clip_norm is None else float(clip_norm)
        self.clip_eps = float(clip_eps)
        self.step_count = 0
        #: The global gradient norm of the last step (a 0-d device array) when clipping is on.
        self.last_grad_norm: Array | None = None
        self._own_params = params is not None
        self._params: list[ParameterLike] = []
        self._state: dict[int, dict[str, Array]] = {}
        self._counts: dict[int, int] = {}
        self._scratch: dict[tuple[int, tuple[int, ...], Any], tuple[Array, Array]] = {}
        self._tmp: dict[tuple[int, tuple[int, ...], Any], Array] = {}
        self._flat: dict[tuple[int, Any, str], Array] = {}
        #: id(parameter) -> (value, state, tmp) as of its last update (rebuilt when any of them
        #: may have changed: a new value array, rebound parameters, loaded state)
        self._buffers: dict[int, tuple[Array, dict[str, Array], Array]] = {}
        #: what the last step found, when it was plain (see :meth:`_repeat_updates`)
        self._plain: tuple[Any, ...] | None = None
        self._version = 0
        self._namespace: tuple[Array, Any] | None = None
        #: the device scalars of the step being taken (``None`` on host backends and between
        #: steps; see :mod:`nnlayers.optim._scalars`)
        self._device_step: StepScalars | None = None
        self._device_scalars: dict[int, tuple[Any, StepScalars]] = {}
        if params is not None:
            self._set_params(params)

    # -- parameters ---------------------------------------------------------------------------
    @property
    def params(self) -> list[ParameterLike]:
        """The parameters this optimiser updates."""
        return list(self._params)

    def bind(self, params: Iterable[ParameterLike]) -> None:
        """Use ``params`` unless the optimiser was made with its own (models call this).

        Rebinding keeps the state of parameters that stay and drops the rest.
        """
        if not self._own_params:
            self._set_params(params)

    def _set_params(self, params: Iterable[ParameterLike]) -> None:
        found: list[ParameterLike] = []
        seen: set[int] = set()
        for p in params:
            for attr in ("name", "value", "grad"):
                if not hasattr(p, attr):
                    raise TypeError(
                        f"{type(self).__name__}: {p!r} is not a parameter: it has no .{attr} "
                        f"(a parameter needs .name, .value and .grad)"
                    )
            if id(p) not in seen:
                seen.add(id(p))
                found.append(p)
        self._params = found
        self._forget_buffers()
        self._state = {k: v for k, v in self._state.items() if k in seen}
        self._counts = {k: v for k, v in self._counts.items() if k in seen}

    def _forget_buffers(self) -> None:
        """Drop what steps looked up per parameter (rebound parameters, loaded state)."""
        self._buffers = {}
        self._plain = None
        self._version = getattr(self, "_version", 0) + 1

    # -- captured steps (nnlayers.models.capture) -------------------------------------------------
    def _capture_key(self) -> tuple[Any, ...]:
        """What a captured step of this optimiser depends on besides the arrays it reads: a
        step captured under another key would replay stale settings or state."""
        lr = self.lr
        params = tuple(
            (
                id(p),
                getattr(p, "lr_multiplier", None),
                getattr(p, "weight_decay", None),
                getattr(p, "trainable", True),
            )
            for p in self._params
        )
        rate = ("schedule", id(lr)) if callable(lr) else ("constant", float(lr))
        return (id(self), self._version, rate, self.weight_decay, self.clip_norm, params)

    def _host_counters(self) -> tuple[int, dict[int, int], dict[int, int | None]]:
        """The step counts kept on the host: the optimiser's, each parameter's, and the host
        copy of each device step counter."""
        ats = {k: scalars._at for k, (_, scalars) in self._device_scalars.items()}
        return self.step_count, dict(self._counts), ats

    def _restore_host_counters(self, saved: tuple[Any, ...]) -> None:
        """Undo a step whose device work never ran (a capture that failed): the host counts
        as ``saved``, and every device step counter set again from them at the next step."""
        self.step_count, counts, _ = saved
        self._counts = dict(counts)
        for _, scalars in self._device_scalars.values():
            scalars._at = None
        self._forget_buffers()

    def _replayed(self, before: tuple[Any, ...], after: tuple[Any, ...]) -> None:
        """A captured step ran once more on the device: count it on the host as the capture
        counted it (from the counters ``before`` and ``after`` the captured step)."""
        self.step_count += after[0] - before[0]
        counts = self._counts
        for key, count in after[1].items():
            counts[key] = counts.get(key, 0) + count - before[1].get(key, 0)
        for key, at in after[2].items():
            found = self._device_scalars.get(key)
            was = before[2].get(key)
            if (
                found is not None
                and at is not None
                and was is not None
                and found[1]._at is not None
            ):
                found[1]._at += at - was

    # -- learning rate ------------------------------------------------------------------------
    @property
    def learning_rate(self) -> float:
        """The learning rate the next step will use (the schedule at :attr:`step_count`)."""
        return self._lr_at(self.step_count)

    def _lr_at(self, step: int) -> float:
        lr = self.lr
        value = float(lr(step)) if callable(lr) else float(lr)
        if not (math.isfinite(value) and value >= 0):
            raise ValueError(
                f"{type(self).__name__}: the learning rate schedule gave {value!r} at step {step}"
            )
        return value

    # -- the step ------------------------------------------------------------------------------
    def step(self) -> None:
        """Update every parameter that has a gradient, in place, and count one step."""
        prof = profiler.active()
        if prof is None or not self._params:
            self._step()
            return
        xp = arraycore.namespace_of(self._params[0].value)
        name = type(self).__name__
        prof.wrap(self._step, id(self), -1, "optimizer", f"{name}.step", "update", xp)()

    def _step(self) -> None:
        if not self._params:
            raise RuntimeError(
                f"{type(self).__name__}: no parameters to update; pass params=... or bind the "
                f"optimiser to a model"
            )
        lr = self._lr_at(self.step_count)
        repeat = self._repeat_updates(lr)
        if repeat is not None:
            try:
                self._update_all(*repeat)
            finally:
                self._end_device_step()
            self.step_count += 1
            return
        try:
            self._step_updates(lr)
        finally:
            self._end_device_step()

    def _step_updates(self, lr: float) -> None:
        # (parameter, value, gradient), each read once; all checked before anything changes
        active: list[tuple[Any, Array, Array]] = []
        for p in self._params:
            grad = p.grad
            if grad is None or not getattr(p, "trainable", True):
                continue
            value = p.value
            if grad.shape != value.shape and tuple(grad.shape) != tuple(value.shape):
                raise ValueError(
                    f"{type(self).__name__}: the gradient of {p.name!r} has shape "
                    f"{tuple(grad.shape)}, but its value has shape {tuple(value.shape)}"
                )
            active.append((p, value, grad))
        if not active:
            self.step_count += 1
            return
        first = active[0][1]
        cached_xp = self._namespace
        if cached_xp is not None and cached_xp[0] is first:
            xp = cached_xp[1]
        else:
            xp = arraycore.namespace_of(first)
            self._namespace = (first, xp)
        device = self._begin_device_step(xp, first, lr)
        scales: dict[Any, Array] = {}
        if self.clip_norm is not None:
            norm = global_norm([g for _, _, g in active], xp=xp, scratch=self._scratch_for(xp))
            self.last_grad_norm = norm
            scale = clip_scale(norm, self.clip_norm, self.clip_eps, xp=xp)
            for _, _, g in active:
                dt = g.dtype
                if dt not in scales:
                    scales[dt] = xp.astype(scale, dt, copy=False)
        states, counts, default_decay = self._state, self._counts, self.weight_decay
        coupled, slots, buffers = self.coupled_weight_decay, self.slots, self._buffers
        updates: list[tuple[Any, ...]] = []
        # every parameter a Parameter with a gradient, none frozen by its multiplier, no
        # clipping, no coupled decay: the next step may repeat this one's findings
        plain = len(active) == len(self._params) and self.clip_norm is None
        records: list[tuple[Any, ...]] = []
        for p, value, grad in active:
            given_multiplier = getattr(p, "lr_multiplier", None)
            multiplier = 1.0 if given_multiplier is None else float(given_multiplier)
            if multiplier == 0.0:
                plain = False
                continue
            given_decay = getattr(p, "weight_decay", None)
            decay = default_decay if given_decay is None else float(given_decay)
            key = id(p)
            # (value, state, tmp) of the parameter, looked up once while its value stays
            found = buffers.get(key)
            if found is None or found[0] is not value:
                state = states.get(key)
                if state is None:
                    state = {s: xp.zeros_like(value) for s in slots}
                    states[key] = state
                found = buffers[key] = (value, state, self._tmp_for(xp, value))
            _, state, tmp = found
            count = counts.get(key, 0) + 1
            counts[key] = count
            scale = scales.get(grad.dtype) if scales else None
            if plain:
                if type(p) is Parameter and not (decay and coupled):
                    record = (p, value, given_multiplier, given_decay, state, tmp, key)
                    records.append((*record, multiplier, decay))
                else:
                    plain = False
            if scale is not None or (decay and coupled):
                work, tmp = self._scratch_for(xp)(value)
                if scale is not None:
                    xp.inplace.multiply(grad, scale, out=work)
                    grad = work
                if decay and coupled:
                    xp.inplace.multiply(value, decay, out=tmp)
                    xp.inplace.add(grad, tmp, out=work)
                    grad = work
                # ``work`` is shared by every parameter: update this one before the next
                rate = lr * multiplier if device is None else device.lr(multiplier, value.dtype)
                self._update(xp, value, grad, state, tmp, rate, decay, count)
                continue
            rate = lr * multiplier if device is None else device.lr(multiplier, value.dtype)
            updates.append((value, grad, state, tmp, rate, decay, count))
        if plain:
            keys = tuple(record[6] for record in records)
            self._plain = (trainable_version(), default_decay, xp, records, keys)
        else:
            self._plain = None
        self._update_all(xp, updates)
        self.step_count += 1

    def _repeat_updates(self, lr: float) -> tuple[ArrayNamespace, list[tuple[Any, ...]]] | None:
        """``(xp, updates)`` of this step when it repeats the last one, else ``None``.

        After a plain step (see :meth:`step`), the next one needs none of its per-parameter
        lookups while every parameter still has the same value array, a gradient of its shape,
        and the same ``lr_multiplier`` and ``weight_decay`` objects, no parameter was frozen or
        unfrozen, and the optimiser's ``weight_decay`` and ``clip_norm`` are as they were; this
        checks exactly that (identity tests, nothing changed) and counts the step.
        """
        if self._plain is None:
            return None
        version, default_decay, xp, records, keys = self._plain
        if (
            version != trainable_version()
            or default_decay != self.weight_decay
            or self.clip_norm is not None
        ):
            return None
        counts = self._counts
        updates = []
        device = self._begin_device_step(xp, records[0][1], lr) if records else None
        for p, value, multiplier, decay, state, tmp, key, lr_factor, decay_rate in records:
            grad = p.grad
            if (
                grad is None
                or p._value is not value
                or p.lr_multiplier is not multiplier
                or p.weight_decay is not decay
                or (grad.shape != value.shape and tuple(grad.shape) != tuple(value.shape))
            ):
                return None
            count = counts[key] + 1
            rate = lr * lr_factor if device is None else device.lr(lr_factor, value.dtype)
            updates.append((value, grad, state, tmp, rate, decay_rate, count))
        for key in keys:  # counted only once every parameter has passed
            counts[key] += 1
        return xp, updates

    def _begin_device_step(self, xp: ArrayNamespace, like: Array, lr: float) -> StepScalars | None:
        """The device scalars of this step, begun (``None`` where the parameters are host
        NumPy arrays: there the step's scalars are Python floats)."""
        if type(like) is np.ndarray:
            return None
        found = self._device_scalars.get(id(xp))
        if found is None or found[0] is not xp:
            found = self._device_scalars[id(xp)] = (xp, StepScalars(xp))
        scalars = found[1]
        scalars.begin(self.lr, self.step_count, lr)
        self._device_step = scalars
        return scalars

    def _end_device_step(self) -> None:
        scalars = self._device_step
        if scalars is not None:
            self._device_step = None
            scalars.end()

    @property
    def capture_blocker(self) -> str | None:
        """Why this optimiser's device steps copy a scalar from the host each step (so that a
        captured step could not replay them), or ``None``: they do not, or it has not stepped on
        a device yet."""
        for _, scalars in self._device_scalars.values():
            if scalars.host_reason is not None:
                return f"{type(self).__name__}: {scalars.host_reason}"
        return None

    def _update_all(self, xp: ArrayNamespace, updates: list[tuple[Any, ...]]) -> None:
        """Apply :meth:`_update` to every ``(value, grad, state, tmp, lr, weight_decay,
        count)`` of this step, in order (a subclass may do it in one loop of its own)."""
        update = self._update
        for value, grad, state, tmp, lr, decay, count in updates:
            update(xp, value, grad, state, tmp, lr, decay, count)

    def _update(
        self,
        xp: ArrayNamespace,
        value: Array,
        grad: Array,
        state: dict[str, Array],
        tmp: Array,
        lr: float,
        weight_decay: float,
        count: int,
    ) -> None:
        """Update ``value`` in place. ``grad`` may be a scratch buffer; ``tmp`` is another one
        (same shape and dtype as ``value``, free to overwrite). ``count`` is the number of
        updates this parameter has had, this one included.

        ``lr`` (the parameter's learning rate this step) is a Python float where the parameters
        are host NumPy arrays, and a 0-d array of ``value``'s dtype on a device backend, where
        :attr:`_device_step` (a :class:`~nnlayers.optim._scalars.StepScalars`) gives what else a
        step derives on the device (``count`` as a device array, shared per-step values)."""
        raise NotImplementedError

    def _kernel(
        self, xp: ArrayNamespace, name: str, make: Callable[[Any], Callable[..., Any]]
    ) -> Callable[..., Any]:
        """``xp.inplace.fuse(make(xp))``, made once per namespace and ``name``: an update chain
        that runs as one kernel where the backend fuses element-wise work (CUDA), and as the
        same in-place calls elsewhere."""
        kernels: dict[tuple[int, str], tuple[Any, Callable[..., Any]]] | None
        kernels = self.__dict__.get("_kernels")
        if kernels is None:
            kernels = {}
            self.__dict__["_kernels"] = kernels
        found = kernels.get((id(xp), name))
        if found is not None and found[0] is xp:
            return found[1]
        # the chains pass derived scalars in (1 - b1, ...): they keep fuse's scalar_operands promise
        fn: Callable[..., Any] = xp.inplace.fuse(make(xp), scalar_operands=True)
        kernels[(id(xp), name)] = (xp, fn)
        return fn

    def _scratch_for(self, xp: ArrayNamespace) -> Callable[[Array], tuple[Array, Array]]:
        """``get(like) -> (work, tmp)``: two scratch buffers of ``like``'s shape and dtype."""
        cache = self._scratch
        space = id(xp)

        def get(like: Array) -> tuple[Array, Array]:
            key = (space, tuple(like.shape), like.dtype)
            found = cache.get(key)
            if found is None:
                found = (self._view(xp, like, "work"), self._tmp_for(xp, like))
                cache[key] = found
            return found

        return get

    def _tmp_for(self, xp: ArrayNamespace, like: Array) -> Array:
        """The ``tmp`` scratch buffer for arrays like ``like`` (cached per shape and dtype)."""
        key = (id(xp), tuple(like.shape), like.dtype)
        found = self._tmp.get(key)
        if found is None:
            found = self._tmp[key] = self._view(xp, like, "tmp")
        return found

    def _view(self, xp: ArrayNamespace, like: Array, which: str) -> Array:
        # Scratch is used by one parameter at a time, so every shape shares one flat buffer per
        # dtype, as large as the largest parameter: the scratch costs one parameter's memory,
        # not two per shape.
        size = math.prod(like.shape)
        key = (id(xp), like.dtype, which)
        flat = self._flat.get(key)
        if flat is None or flat.shape[0] < size:
            sizes = [math.prod(p.value.shape) for p in self._params if p.value.dtype == like.dtype]
            flat = xp.zeros((max([size, *sizes]),), dtype=like.dtype)
            self._flat[key] = flat
        return xp.reshape(flat[:size], tuple(like.shape))

    # -- state ---------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The optimiser's state for a checkpoint: ``{"optimizer": class name, "step": int,
        "arrays": {"<param name>/<slot>": array}}``.

        Arrays are the live device buffers (copy them to the host to keep them); each
        parameter's update count is exported as a 0-d int64 array ``"<param name>/step"``.
        """
        names = self._names()
        arrays: dict[str, Array] = {}
        for p in self._params:
            state = self._state.get(id(p))
            if state is None:
                continue
            xp = arraycore.namespace_of(p.value)
            for slot, buf in state.items():
                arrays[f"{names[id(p)]}/{slot}"] = buf
            arrays[f"{names[id(p)]}/step"] = xp.asarray(self._counts.get(id(p), 0), dtype=xp.int64)
        return {"optimizer": type(self).__name__, "step": self.step_count, "arrays": arrays}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` exported (arrays may be host NumPy or device arrays).

        Every entry is checked first (parameter names, slots, shapes, dtypes), so a state that
        does not fit raises ``ValueError`` and changes nothing. Parameters without entries
        start fresh.
        """
        kind = type(self).__name__
        if not isinstance(state, Mapping) or "step" not in state or "arrays" not in state:
            raise ValueError(f"{kind}.load_state_dict: expected a dict with 'step' and 'arrays'")
        saved_kind = state.get("optimizer", kind)
        if saved_kind != kind:
            raise ValueError(f"{kind}.load_state_dict: the state is of a {saved_kind} optimiser")
        step = state["step"]
        if isinstance(step, bool) or not isinstance(step, int | np.integer) or step < 0:
            raise ValueError(f"{kind}.load_state_dict: step must be an int >= 0, got {step!r}")
        by_name = {n: p for p, n in ((p, self._names()[id(p)]) for p in self._params)}
        arrays: Mapping[str, Any] = state["arrays"]
        plan: list[tuple[ParameterLike, str, Any]] = []
        problems: list[str] = []
        for key, array in arrays.items():
            name, _, slot = str(key).rpartition("/")
            p = by_name.get(name)
            if p is None:
                problems.append(f"{key!r}: no parameter named {name!r}")
                continue
            if slot != "step" and slot not in self.slots:
                allowed = ", ".join([*self.slots, "step"])
                problems.append(f"{key!r}: {kind} has no slot {slot!r} (it has: {allowed})")
                continue
            want_shape = () if slot == "step" else tuple(p.value.shape)
            want_dtype = np.dtype("int64") if slot == "step" else np.dtype(p.value.dtype)
            shape, dtype = tuple(array.shape), np.dtype(array.dtype)
            if shape != want_shape or dtype != want_dtype:
                problems.append(
                    f"{key!r}: saved {dtype.name}{list(shape)}, expected "
                    f"{want_dtype.name}{list(want_shape)}"
                )
                continue
            plan.append((p, slot, array))
        if problems:
            raise ValueError(f"{kind}.load_state_dict: " + "; ".join(problems))
        self._forget_buffers()
        for p, slot, array in plan:
            xp = arraycore.namespace_of(p.value)
            if slot == "step":
                host = (
                    array
                    if isinstance(array, np.ndarray)
                    else arraycore.namespace_of(array).to_numpy(array)
                )
                self._counts[id(p)] = int(host)
                continue
            bufs = self._state.get(id(p))
            if bufs is None or any(arraycore.namespace_of(b) is not xp for b in bufs.values()):
                # new, or left on another backend by a parameter that moved (Model.to)
                bufs = self._state[id(p)] = {s: xp.zeros_like(p.value) for s in self.slots}
            source = xp.asarray(np.asarray(array)) if isinstance(array, np.ndarray) else array
            xp.inplace.copy(source, out=bufs[slot])
        for p in self._params:
            if id(p) in self._state and id(p) not in self._counts:
                self._counts[id(p)] = int(step)
        self.step_count = int(step)

    def _names(self) -> dict[int, str]:
        names: dict[int, str] = {}
        seen: dict[str, int] = {}
        for p in self._params:
            if not isinstance(p.name, str) or not p.name:
                raise ValueError(
                    f"{type(self).__name__}: parameter {p!r} needs a non-empty str name to "
                    f"export or import optimiser state"
                )
            if p.name in seen:
                raise ValueError(
                    f"{type(self).__name__}: two parameters are named {p.name!r}; names must "
                    f"be unique to export or import optimiser state"
                )
            seen[p.name] = 1
            names[id(p)] = p.name
        return names

    # -- copying and display -------------------------------------------------------------------
    def __deepcopy__(self, memo: dict[int, Any]) -> Optimizer:
        fresh = copy.copy(self)
        fresh.lr = copy.deepcopy(self.lr, memo)
        fresh._own_params = False
        fresh._params = []
        fresh._state = {}
        fresh._counts = {}
        fresh._scratch = {}
        fresh._tmp = {}
        fresh._flat = {}
        fresh._forget_buffers()
        fresh._namespace = None
        fresh._device_step = None
        fresh._device_scalars = {}
        fresh.step_count = 0
        fresh.last_grad_norm = None
        return fresh

    def _settings(self) -> list[str]:
        return []

    def __repr__(self) -> str:
        parts = [f"lr={describe_lr(self.lr)}", *self._settings()]
        if self.weight_decay:
            parts.append(f"weight_decay={self.weight_decay:g}")
        if self.clip_norm is not None:
            parts.append(f"clip_norm={self.clip_norm:g}")
        return f"{type(self).__name__}({', '.join(parts)})"


# -- gradient clipping -------------------------------------------------------------------------
def global_norm(
    arrays: Sequence[Array],
    *,
    xp: ArrayNamespace | None = None,
    scratch: Callable[[Array], tuple[Array, Array]] | None = None,
) -> Array:
    """The L2 norm of all ``arrays`` taken together, as a 0-d array on their device.

    >>> import arraycore
    >>> xp = arraycore.namespace("numpy")
    >>> float(global_norm([xp.asarray([3.0]), xp.asarray([[4.0]])]))
    5.0
    """
    arrays = list(arrays)
    if not arrays:
        raise ValueError("global_norm: needs at least one array")
    xp = arraycore.namespace_of(*arrays) if xp is None else xp
    total = None
    for a in arrays:
        if scratch is not None:
            square, _ = scratch(a)
            xp.inplace.multiply(a, a, out=square)
        else:
            square = xp.multiply(a, a)
        part = xp.sum(square)
        total = part if total is None else xp.add(total, part)
    return xp.sqrt(total)


def clip_scale(
    norm: Array, max_norm: float, eps: float = 1e-6, *, xp: ArrayNamespace | None = None
) -> Array:
    """``min(1, max_norm / (norm + eps))`` as a 0-d device array (no host synchronisation)."""
    xp = arraycore.namespace_of(norm) if xp is None else xp
    return xp.minimum(xp.divide(max_norm, xp.add(norm, eps)), 1.0)


def clip_grad_norm(params: Iterable[ParameterLike], max_norm: float, eps: float = 1e-6) -> Array:
    """Scale the gradients of ``params`` so that their global norm is at most ``max_norm``.

    Each ``grad`` is replaced by ``grad * min(1, max_norm / (norm + eps))``, computed on the
    device. Returns the norm before clipping (a 0-d device array). Optimisers made with
    ``clip_norm=`` do this themselves without touching ``grad``.
    """
    if not (_is_real(max_norm) and max_norm > 0):
        raise ValueError(f"clip_grad_norm: max_norm must be > 0, got {max_norm!r}")
    with_grads = [p for p in params if getattr(p, "grad", None) is not None]
    if not with_grads:
        raise ValueError("clip_grad_norm: no parameter has a gradient")
    xp = arraycore.namespace_of(with_grads[0].grad)
    norm = global_norm([p.grad for p in with_grads], xp=xp)
    scale = clip_scale(norm, max_norm, eps, xp=xp)
    for p in with_grads:
        p.grad = xp.multiply(p.grad, xp.astype(scale, p.grad.dtype, copy=False))
    return norm


# -- argument checks -------------------------------------------------------------------------
def _is_real(value: Any) -> bool:
    return (
        isinstance(value, int | float | np.integer | np.floating)
        and not isinstance(value, bool)
        and math.isfinite(float(value))
    )


def _check_lr(owner: str, lr: Any) -> None:
    if callable(lr):
        return
    if not (_is_real(lr) and lr >= 0):
        raise ValueError(f"{owner}: lr must be a float >= 0 or a schedule, got {lr!r}")


def _check_nonnegative(owner: str, name: str, value: Any) -> None:
    if not (_is_real(value) and value >= 0):
        raise ValueError(f"{owner}: {name} must be a number >= 0, got {value!r}")


def _check_unit(owner: str, name: str, value: Any) -> None:
    if not (_is_real(value) and 0 <= value < 1):
        raise ValueError(f"{owner}: {name} must lie in [0, 1), got {value!r}")


def _check_positive(owner: str, name: str, value: Any) -> None:
    if not (_is_real(value) and value > 0):
        raise ValueError(f"{owner}: {name} must be > 0, got {value!r}")
