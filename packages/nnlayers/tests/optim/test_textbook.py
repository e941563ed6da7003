"""Schedules and optimisers stay equal to their textbook values over 1,000 steps, on every backend.

On device backends (every backend whose arrays are not host NumPy arrays) an optimiser computes
its per-step scalars on the device from an int64 step counter (see
:mod:`nnlayers.optim._scalars`): the learning rate of a schedule (:meth:`Schedule.on_device`),
Adam's bias corrections and AdamW's decay factor. A counter that does not advance, a schedule
whose device form drifts from its host form, or a bias correction from the wrong count would
show only after many steps, so these tests drive real optimisers for 1,000 steps and compare
them with float64 NumPy recurrences written here (PyTorch's formulas, as the classes'
docstrings state), in float32 and (where the device has it) float64.

Each test runs on the active backend (``ARRAYCORE_BACKEND``) and on both devices of the tiny
test backend: ``tiny0`` (float64 scalars) and ``tiny1``, which has no float64, so that its
scalars are computed in float32.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

import arraycore
import nnlayers
from nnlayers.optim import SGD, Adam, AdamW, RMSProp
from nnlayers.optim.schedules import (
    Constant,
    CosineDecay,
    ExponentialDecay,
    Scaled,
    StepDecay,
    Warmup,
)

STEPS = 1000
RESUME_AT = 500
SHAPE = (3, 4)


# -- backends ----------------------------------------------------------------------------------
@pytest.fixture(params=["active", "tiny0", "tiny1"])
def xp(request, xp):
    """The active backend, then each device of the tiny test backend (when it is installed and
    is not the active one already). Overrides the suite's ``xp`` for this module, so that
    ``make_param`` and ``host`` make and read arrays on the device under test."""
    if request.param == "active":
        return xp
    pytest.importorskip(
        "arraycore_tiny",
        reason="the tiny test backend is not installed (pip install packages/arraycore/tests/tinybackend)",
    )
    try:
        ns = arraycore.namespace("tiny", request.param)
    except arraycore.BackendError as exc:
        pytest.skip(f"the tiny test backend is not usable here: {exc}")
    if ns is xp:
        pytest.skip(f"{request.param} is the active backend: its run is the 'active' one")
    return ns


def has_float64(xp) -> bool:
    return "float64" in xp.__array_namespace_info__().dtypes(kind="real floating")


def scalar_dtype(xp) -> str:
    """The dtype the optimiser computes its scalars in: float64 on the host and where the
    device has it, float32 else."""
    return "float64" if has_float64(xp) else "float32"


@pytest.fixture(params=["float32", "float64"])
def dtype(request, xp):
    if request.param == "float64" and not has_float64(xp):
        pytest.skip(f"{xp.device} has no float64")
    return request.param


class _Param:
    """A duck-typed parameter (what ``make_param`` makes), for dtypes other than float64."""

    def __init__(self, name: str, value: Any, **settings: Any) -> None:
        self.name, self.value, self.grad = name, value, None
        for key, val in settings.items():
            setattr(self, key, val)


@pytest.fixture
def new_param(xp, make_param):
    """``new_param(name, host_value, dtype, kind="duck", **settings)``: a parameter on the device
    under test; ``kind="Parameter"`` makes an :class:`nnlayers.Parameter` (the optimisers' fast
    path of repeated plain steps), ``"duck"`` a duck-typed one (``make_param`` for float64)."""

    def make(name: str, value: Any, dtype: str, kind: str = "duck", **settings: Any) -> Any:
        host_value = np.array(value, dtype=dtype)  # a copy: never the caller's
        if kind == "Parameter":
            return nnlayers.Parameter(xp.asarray(host_value), name=name, dtype=dtype, **settings)
        if dtype == "float64":
            return make_param(name, host_value, **settings)
        return _Param(name, xp.asarray(host_value), **settings)

    return make


# -- tolerances --------------------------------------------------------------------------------
#: relative error allowed in one step's learning rate as the parameter sees it, by (parameter
#: dtype, scalar dtype): the scalar computed in float64 (or float32) and cast once
LR_RTOL = {
    ("float64", "float64"): 1e-13,
    ("float32", "float64"): 2e-7,  # the float64 rate rounded once: 2**-24
    # float32 all along: gamma rounded to float32 (up to 2**-24 relative) raised to the power
    # of up to 1,200 steps
    ("float32", "float32"): 1e-4,
}
#: ... and the absolute error, as a fraction of the schedule's peak (cancellation near zero:
#: a cosine's tail, a warm-up's start)
LR_ATOL = {
    ("float64", "float64"): 1e-14,
    ("float32", "float64"): 1e-7,
    ("float32", "float32"): 1e-6,
}
#: error allowed in 1,000 steps of accumulated parameter values, as a fraction of the values'
#: magnitude (float32 rounds each sum: up to ~1,000 * 2**-24)
VALUE_RTOL = {
    ("float64", "float64"): 1e-12,
    ("float32", "float64"): 1e-4,
    ("float32", "float32"): 1e-4,
}


# -- 1. schedules ------------------------------------------------------------------------------
SCHEDULES: dict[str, Any] = {
    "float": 0.05,
    "constant": Constant(0.05),
    "step_decay": StepDecay(0.1, step_size=100, gamma=0.5),
    "exponential": ExponentialDecay(0.1, gamma=0.995),
    "exponential_staircase": ExponentialDecay(0.1, gamma=0.8, decay_steps=75, staircase=True),
    "cosine_min_lr": CosineDecay(0.1, total_steps=800, min_lr=0.001),
    "cosine_to_zero": CosineDecay(0.1, total_steps=600),
    "warmup_float": Warmup(0.05, warmup_steps=100),
    "warmup_float_0.1": Warmup(0.05, warmup_steps=100, start_factor=0.1),
    "warmup_cosine": Warmup(CosineDecay(0.1, total_steps=700, min_lr=0.002), warmup_steps=150),
    "warmup_cosine_0.1": Warmup(
        CosineDecay(0.1, total_steps=700, min_lr=0.002), warmup_steps=150, start_factor=0.1
    ),
    # min_lr 0.02 holds the rate at 0.02 from step 300 (0.1 * 0.125 < 0.02) until StepDecay
    # itself goes below it at step 600
    "scaled_step_decay": Scaled(StepDecay(1.0, step_size=100, gamma=0.5), 0.1, min_lr=0.02),
}


def host_rate(lr: Any, step: int) -> float:
    return float(lr(step)) if callable(lr) else float(lr)


def rate_errors(got: np.ndarray, want: np.ndarray, peak: float) -> tuple[float, float]:
    """(largest relative error where the rate is not tiny, largest absolute error / peak)."""
    err = np.abs(got - want)
    big = want > 1e-3 * peak
    rel = float((err[big] / want[big]).max()) if big.any() else 0.0
    return rel, float(err.max() / peak)


def assert_rates(got: np.ndarray, want: np.ndarray, peak: float, key: tuple[str, str], what: str):
    rtol, atol = LR_RTOL[key], LR_ATOL[key] * peak
    bad = np.abs(got - want) > rtol * np.abs(want) + atol
    if bad.any():
        first = int(np.argmax(bad))
        rel, absolute = rate_errors(got, want, peak)
        raise AssertionError(
            f"{what}: {int(bad.sum())} steps off, the first at step {first}: got "
            f"{got[first]!r}, the schedule gives {want[first]!r} (largest relative error "
            f"{rel:.3g}, absolute {absolute:.3g} of the peak; allowed {rtol:g} + {atol:g})"
        )


@pytest.mark.parametrize("name", [name for name, lr in SCHEDULES.items() if callable(lr)])
def test_schedule_on_device_equals_its_host_value(xp, host, name):
    """``Schedule.on_device`` at a 0-d step array (float64, float32 where the device has no
    float64) equals ``schedule(step)`` for steps 0..1200, and is a 0-d array of the step's
    dtype."""
    schedule = SCHEDULES[name]
    dtype = scalar_dtype(xp)
    outs = []
    for step in range(1201):
        out = schedule.on_device(xp, xp.full((), step, dtype=getattr(xp, dtype)))
        assert out is not None, f"{name} has no device form"
        outs.append(out)
    assert {tuple(o.shape) for o in outs} == {()}
    assert {str(o.dtype) for o in outs} == {dtype}
    got = np.array([float(host(o)) for o in outs])
    want = np.array([schedule(step) for step in range(1201)])
    assert_rates(got, want, want.max(), (dtype, dtype), f"{name}.on_device on {xp.device}")
    rel, absolute = rate_errors(got, want, want.max())
    print(f"{name}.on_device {xp.device.id} {dtype}: relative {rel:.3g}, absolute {absolute:.3g}")


@pytest.mark.parametrize("name", SCHEDULES)
def test_sgd_follows_the_schedule_every_step(xp, host, new_param, name):
    """SGD (no momentum) with the schedule as lr, on a gradient of constant 1.0: each step moves
    the parameter by exactly ``schedule(step)``, for 1,000 steps, in float32 and (where the
    device has it) float64 parameters of one optimiser.

    Two parameters per dtype: ``fresh`` is reset to 0 before each step, so that its value
    afterwards is minus that step's rate in the parameter's dtype (sharp in float32 too);
    ``acc`` accumulates, and follows the float64 recurrence ``w -= schedule(t) * g``.
    """
    lr = SCHEDULES[name]
    dtypes = ("float32", "float64") if has_float64(xp) else ("float32",)
    start = np.linspace(-1.0, 1.0, math.prod(SHAPE)).reshape(SHAPE)
    acc, fresh, zero = {}, {}, {}
    for dt in dtypes:
        # nnlayers.Parameter: SGD repeats its plain step, the path a model's training takes
        acc[dt] = new_param(f"acc_{dt}", start, dt, "Parameter")
        fresh[dt] = new_param(f"fresh_{dt}", np.zeros(SHAPE), dt, "Parameter")
        zero[dt] = xp.zeros(SHAPE, dtype=getattr(xp, dt))
        acc[dt].grad = fresh[dt].grad = xp.ones(SHAPE, dtype=getattr(xp, dt))
    opt = SGD(lr, params=[p for dt in dtypes for p in (acc[dt], fresh[dt])])
    want = np.array([host_rate(lr, t) for t in range(STEPS)])
    ref = {dt: np.asarray(start, dtype=dt).astype(np.float64) for dt in dtypes}
    moved = {dt: np.empty(STEPS) for dt in dtypes}
    acc_err = {dt: np.empty(STEPS) for dt in dtypes}
    for t in range(STEPS):
        for dt in dtypes:
            xp.inplace.copy(zero[dt], out=fresh[dt].value)
        opt.step()
        for dt in dtypes:
            got = host(fresh[dt].value)
            assert np.all(got == got.flat[0])
            moved[dt][t] = -got.flat[0]
            ref[dt] = ref[dt] - want[t]
            acc_err[dt][t] = np.abs(host(acc[dt].value) - ref[dt]).max()
    assert opt.step_count == STEPS
    assert opt.capture_blocker is None  # every rate came from the device, none from the host
    for dt in dtypes:
        key, what = (dt, scalar_dtype(xp)), f"SGD({name}) on {xp.device}, {dt}"
        assert_rates(moved[dt], want, want.max(), key, what)
        bound = VALUE_RTOL[key] * np.abs(ref[dt]).max()
        assert acc_err[dt].max() <= bound, (
            f"{what}: the accumulated parameter is off the recurrence by "
            f"{acc_err[dt].max():.3g} (allowed {bound:.3g}), first past the tolerance at step "
            f"{int(np.argmax(acc_err[dt] > bound))}"
        )
        rel, absolute = rate_errors(moved[dt], want, want.max())
        print(
            f"SGD({name}) {xp.device.id} {dt}: per-step rate: relative {rel:.3g}, absolute "
            f"{absolute:.3g} of the peak; accumulated: {acc_err[dt].max() / np.abs(ref[dt]).max():.3g}"
        )


# -- 2. optimisers against their textbook updates ---------------------------------------------
@dataclass
class Spec:
    """One parameter of a textbook run: its name, settings and the steps it has no gradient."""

    name: str
    settings: dict[str, Any] = field(default_factory=dict)
    skips: Callable[[int], bool] = lambda t: False


PARAMS = {
    "w": Spec("w"),
    "half": Spec("half", {"lr_multiplier": 0.5}),
    "nodecay": Spec("nodecay", {"weight_decay": 0.0}),
    # no gradient on every third step and on steps 200..279: its update count lags the step
    # count by 387 at the end (Adam's bias correction must use its own count)
    "lag": Spec("lag", {}, lambda t: t % 3 == 1 or 200 <= t < 280),
}


class Textbook:
    """A float64 NumPy reference optimiser: PyTorch's formulas, one parameter at a time."""

    def __init__(self, kind: str, lr: Any, weight_decay: float = 0.0, **hyper: Any) -> None:
        self.kind, self.lr, self.weight_decay, self.hyper = kind, lr, weight_decay, hyper
        self.state: dict[str, dict[str, Any]] = {}

    def step(self, t: int, values: dict[str, np.ndarray], grads: dict[str, Any], specs) -> None:
        lr_t = host_rate(self.lr, t)
        for spec in specs:
            g = grads[spec.name]
            if g is None:
                continue
            lr = lr_t * spec.settings.get("lr_multiplier", 1.0)
            wd = spec.settings.get("weight_decay", self.weight_decay)
            w = values[spec.name]
            state = self.state.setdefault(spec.name, {"t": 0})
            state["t"] += 1
            values[spec.name] = getattr(self, self.kind)(w, g, lr, wd, state)

    def sgd(self, w, g, lr, wd, state):
        mu, nesterov = self.hyper.get("momentum", 0.0), self.hyper.get("nesterov", False)
        g = g + wd * w
        if mu:
            # PyTorch starts the buffer at g; from zero, mu * 0 + g is the same
            buf = state["buf"] = mu * state.get("buf", 0.0) + g
            g = g + mu * buf if nesterov else buf
        return w - lr * g

    def rmsprop(self, w, g, lr, wd, state):
        rho, eps = self.hyper.get("rho", 0.9), self.hyper.get("eps", 1e-8)
        mu, centered = self.hyper.get("momentum", 0.0), self.hyper.get("centered", False)
        g = g + wd * w
        s = state["s"] = rho * state.get("s", 0.0) + (1 - rho) * g * g
        if centered:
            a = state["a"] = rho * state.get("a", 0.0) + (1 - rho) * g
            denom = np.sqrt(s - a * a) + eps
        else:
            denom = np.sqrt(s) + eps
        if mu:
            buf = state["buf"] = mu * state.get("buf", 0.0) + g / denom
            return w - lr * buf
        return w - lr * g / denom

    def adam(self, w, g, lr, wd, state):
        b1, b2 = self.hyper.get("beta1", 0.9), self.hyper.get("beta2", 0.999)
        eps, t = self.hyper.get("eps", 1e-8), state["t"]
        if self.hyper.get("decoupled", False):
            w = w * (1 - lr * wd)
        else:
            g = g + wd * w
        m = state["m"] = b1 * state.get("m", 0.0) + (1 - b1) * g
        v = state["v"] = b2 * state.get("v", 0.0) + (1 - b2) * g * g
        m_hat = m / (1 - b1**t)
        v_hat = v / (1 - b2**t)
        return w - lr * m_hat / (np.sqrt(v_hat) + eps)


@dataclass
class Case:
    make: Callable[[list[Any]], Any]  # params -> the nnlayers optimiser
    textbook: Callable[[], Textbook]
    params: tuple[str, ...]
    #: "duck" (``make_param``) or "Parameter" (nnlayers.Parameter: the repeated plain steps)
    kind: str = "duck"


ADAM_COSINE = CosineDecay(0.01, total_steps=800, min_lr=1e-4)  # 200 steps past its end
ADAMW_WARMUP = Warmup(CosineDecay(0.01, total_steps=900), warmup_steps=50, start_factor=0.1)
SGD_STEPS = StepDecay(0.01, step_size=250, gamma=0.5)
RMS_EXP = ExponentialDecay(0.002, gamma=0.999)

CASES = {
    "adam_cosine_l2": Case(
        lambda ps: Adam(ADAM_COSINE, weight_decay=0.05, params=ps),
        lambda: Textbook("adam", ADAM_COSINE, 0.05),
        ("w", "nodecay", "lag"),
    ),
    "adamw_warmup": Case(
        lambda ps: AdamW(ADAMW_WARMUP, weight_decay=0.1, params=ps),
        lambda: Textbook("adam", ADAMW_WARMUP, 0.1, decoupled=True),
        ("w", "half", "nodecay", "lag"),
    ),
    "adamw_float": Case(
        lambda ps: AdamW(0.005, 0.8, 0.99, eps=1e-7, weight_decay=0.2, params=ps),
        lambda: Textbook("adam", 0.005, 0.2, beta1=0.8, beta2=0.99, eps=1e-7, decoupled=True),
        ("half", "nodecay", "lag"),
        "Parameter",
    ),
    "sgd_momentum": Case(
        lambda ps: SGD(0.01, momentum=0.9, params=ps),
        lambda: Textbook("sgd", 0.01, momentum=0.9),
        ("w", "lag"),
        "Parameter",
    ),
    "sgd_nesterov": Case(
        lambda ps: SGD(SGD_STEPS, momentum=0.9, nesterov=True, weight_decay=0.01, params=ps),
        lambda: Textbook("sgd", SGD_STEPS, 0.01, momentum=0.9, nesterov=True),
        ("w", "nodecay"),
    ),
    "rmsprop": Case(
        lambda ps: RMSProp(0.001, rho=0.9, params=ps),
        lambda: Textbook("rmsprop", 0.001, rho=0.9),
        ("w",),
    ),
    "rmsprop_centered_momentum": Case(
        lambda ps: RMSProp(
            RMS_EXP, rho=0.95, eps=1e-6, centered=True, momentum=0.9, weight_decay=0.01, params=ps
        ),
        lambda: Textbook("rmsprop", RMS_EXP, 0.01, rho=0.95, eps=1e-6, centered=True, momentum=0.9),
        ("w", "half", "lag"),
    ),
}

#: the steps after which values are compared (1-based: after the first step, ...)
CHECKS = (1, 2, 3, 10, 100, 250, 500, 501, 750, 1000)
#: relative error allowed in the values (as a fraction of the largest value) by parameter dtype
#: and scalar dtype
TEXTBOOK_RTOL = {
    ("float64", "float64"): 1e-12,
    ("float32", "float64"): 5e-5,
    ("float32", "float32"): 5e-5,
}


def gradients(specs, seed: int, dtype: str) -> list[dict[str, np.ndarray | None]]:
    """Reproducible gradients, a dict of them per step (None: no gradient), representable in
    ``dtype`` and held in float64 (the textbook's arithmetic is float64, its inputs are not)."""
    rng = np.random.default_rng(seed)
    steps = []
    for t in range(STEPS):
        grads: dict[str, np.ndarray | None] = {}
        for spec in specs:
            g = (0.2 + rng.normal(size=SHAPE)).astype(dtype).astype(np.float64)
            grads[spec.name] = None if spec.skips(t) else g
        steps.append(grads)
    return steps


def starts(specs, seed: int, dtype: str) -> dict[str, np.ndarray]:
    """Reproducible starting values, representable in ``dtype``, held in float64."""
    rng = np.random.default_rng(seed)
    return {
        spec.name: rng.uniform(-1.0, 1.0, size=SHAPE).astype(dtype).astype(np.float64)
        for spec in specs
    }


@pytest.mark.parametrize("case", CASES)
def test_optimizer_equals_its_textbook_update(xp, host, new_param, dtype, case):
    """1,000 steps of the optimiser against its float64 textbook update; at step 500 its state
    goes through ``state_dict`` (copied to the host) into a fresh optimiser over copies of the
    parameters, and both continue: the resumed run equals the uninterrupted one."""
    setup = CASES[case]
    specs = [PARAMS[name] for name in setup.params]
    key = (dtype, scalar_dtype(xp))
    seed = sum(map(ord, case))
    grads = gradients(specs, seed, dtype)
    init = starts(specs, seed + 1, dtype)
    params = [new_param(s.name, init[s.name], dtype, setup.kind, **s.settings) for s in specs]
    opt = setup.make(params)
    book = setup.textbook()
    want = dict(init)
    resumed: tuple[Any, list[Any]] | None = None
    worst = 0.0
    for t in range(STEPS):
        host_grads = grads[t]
        book.step(t, want, host_grads, specs)
        device_grads = {
            name: None if g is None else xp.asarray(np.asarray(g, dtype=dtype))
            for name, g in host_grads.items()
        }
        runs = [(opt, params)] if resumed is None else [(opt, params), resumed]
        for optimizer, ps in runs:
            for p in ps:
                p.grad = device_grads[p.name]
            optimizer.step()
        if t + 1 == RESUME_AT:
            state = opt.state_dict()
            assert state["step"] == RESUME_AT
            arrays = {k: np.array(xp.to_numpy(v), copy=True) for k, v in state["arrays"].items()}
            if "lag" in setup.params:
                lag_count = sum(not PARAMS["lag"].skips(s) for s in range(RESUME_AT))
                assert int(arrays["lag/step"]) == lag_count
            copies = [
                new_param(s.name, host(p.value), dtype, setup.kind, **s.settings)
                for s, p in zip(specs, params)
            ]
            fresh = setup.make(copies)
            fresh.load_state_dict({**state, "arrays": arrays})
            assert fresh.step_count == RESUME_AT
            resumed = (fresh, copies)
        if t + 1 in CHECKS:
            scale = max(np.abs(v).max() for v in want.values())
            for p in params:
                err = np.abs(host(p.value) - want[p.name]).max() / scale
                worst = max(worst, err)
                assert err <= TEXTBOOK_RTOL[key], (
                    f"{case} on {xp.device}, {dtype}: {p.name!r} after {t + 1} steps is off "
                    f"the textbook by {err:.3g} of the values' magnitude "
                    f"(allowed {TEXTBOOK_RTOL[key]:g})"
                )
            if resumed is not None:
                for p, q in zip(params, resumed[1]):
                    np.testing.assert_array_equal(
                        host(q.value),
                        host(p.value),
                        err_msg=f"{case} on {xp.device}, {dtype}: {p.name!r} after {t + 1} "
                        f"steps, resumed at step {RESUME_AT}, differs from the uninterrupted run",
                    )
    if "lag" in setup.params:  # its update count lags: the bias correction used its own
        lag_count = sum(not PARAMS["lag"].skips(s) for s in range(STEPS))
        assert int(xp.to_numpy(opt.state_dict()["arrays"]["lag/step"])) == lag_count < STEPS
    assert opt.capture_blocker is None  # no scalar came from the host
    print(f"{case} {xp.device.id} {dtype}: largest error {worst:.3g}")
