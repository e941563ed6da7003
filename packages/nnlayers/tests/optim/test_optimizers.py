"""Each optimiser against its textbook update written in NumPy (float64, tight tolerance)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import arraycore
from nnlayers.optim import SGD, Adam, AdamW, RMSProp

STEPS = 6
RTOL = 1e-12
ATOL = 1e-14


def gradient_sequence(shape, steps, seed):
    """Reproducible float64 gradients for ``steps`` steps."""
    rng = np.random.default_rng(seed)
    return [rng.normal(size=shape) for _ in range(steps)]


def host(x):
    return np.asarray(arraycore.namespace_of(x).to_numpy(x), dtype=np.float64)


class Param:
    def __init__(self, name, value, **settings):
        self.name, self.value, self.grad = name, value, None
        for key, val in settings.items():
            setattr(self, key, val)


def run(xp, optimizer_factory, values, grads_per_param, **param_settings):
    """Run the optimiser for len(grads) steps on params with the given host values."""
    params = [
        Param(f"p{i}", xp.asarray(v.copy()), **param_settings.get(f"p{i}", {}))
        for i, v in enumerate(values)
    ]
    opt = optimizer_factory(params)
    for step in range(len(grads_per_param[0])):
        for p, grads in zip(params, grads_per_param):
            p.grad = xp.asarray(grads[step])
        opt.step()
    return [host(p.value) for p in params], opt


def textbook_sgd(w, grads, lr, momentum=0.0, nesterov=False, wd=0.0):
    w = w.copy()
    v = np.zeros_like(w)
    for g in grads:
        g = g + wd * w
        if momentum:
            v = momentum * v + g
            d = g + momentum * v if nesterov else v
        else:
            d = g
        w = w - lr * d
    return w


def textbook_rmsprop(w, grads, lr, rho, eps, momentum=0.0, centered=False, wd=0.0):
    w = w.copy()
    s = np.zeros_like(w)
    a = np.zeros_like(w)
    b = np.zeros_like(w)
    for g in grads:
        g = g + wd * w
        s = rho * s + (1 - rho) * g * g
        if centered:
            a = rho * a + (1 - rho) * g
            denom = np.sqrt(s - a * a) + eps
        else:
            denom = np.sqrt(s) + eps
        if momentum:
            b = momentum * b + g / denom
            w = w - lr * b
        else:
            w = w - lr * g / denom
    return w


def textbook_adam(w, grads, lr, b1, b2, eps, wd=0.0, decoupled=False):
    w = w.copy()
    m = np.zeros_like(w)
    v = np.zeros_like(w)
    for t, g in enumerate(grads, start=1):
        if decoupled:
            w = w - lr * wd * w
        else:
            g = g + wd * w
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        m_hat = m / (1 - b1**t)
        v_hat = v / (1 - b2**t)
        w = w - lr * m_hat / (np.sqrt(v_hat) + eps)
    return w


VALUES = [np.linspace(-1.0, 1.0, 6).reshape(2, 3), np.array([0.5, -0.25, 2.0])]
GRADS = [gradient_sequence((2, 3), STEPS, 1), gradient_sequence((3,), STEPS, 2)]


@pytest.mark.parametrize(
    ("momentum", "nesterov", "wd"),
    [(0.0, False, 0.0), (0.9, False, 0.0), (0.9, True, 0.0), (0.5, False, 0.1), (0.8, True, 0.05)],
)
def test_sgd_matches_textbook(xp, momentum, nesterov, wd):
    got, _ = run(
        xp,
        lambda ps: SGD(0.05, momentum, nesterov=nesterov, params=ps, weight_decay=wd),
        VALUES,
        GRADS,
    )
    for w, grads, result in zip(VALUES, GRADS, got):
        want = textbook_sgd(w, grads, 0.05, momentum, nesterov, wd)
        np.testing.assert_allclose(result, want, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize(
    ("momentum", "centered", "wd"),
    [(0.0, False, 0.0), (0.9, False, 0.0), (0.0, True, 0.0), (0.7, True, 0.01)],
)
def test_rmsprop_matches_textbook(xp, momentum, centered, wd):
    got, _ = run(
        xp,
        lambda ps: RMSProp(
            0.01, 0.9, eps=1e-6, momentum=momentum, centered=centered, params=ps, weight_decay=wd
        ),
        VALUES,
        GRADS,
    )
    for w, grads, result in zip(VALUES, GRADS, got):
        want = textbook_rmsprop(w, grads, 0.01, 0.9, 1e-6, momentum, centered, wd)
        np.testing.assert_allclose(result, want, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("wd", [0.0, 0.1])
def test_adam_matches_textbook(xp, wd):
    got, _ = run(
        xp,
        lambda ps: Adam(0.01, 0.8, 0.99, eps=1e-7, params=ps, weight_decay=wd),
        VALUES,
        GRADS,
    )
    for w, grads, result in zip(VALUES, GRADS, got):
        want = textbook_adam(w, grads, 0.01, 0.8, 0.99, 1e-7, wd)
        np.testing.assert_allclose(result, want, rtol=RTOL, atol=ATOL)


def test_adamw_decouples_weight_decay(xp):
    got, _ = run(
        xp,
        lambda ps: AdamW(0.01, eps=1e-8, params=ps, weight_decay=0.2),
        VALUES,
        GRADS,
    )
    for w, grads, result in zip(VALUES, GRADS, got):
        want = textbook_adam(w, grads, 0.01, 0.9, 0.999, 1e-8, 0.2, decoupled=True)
        np.testing.assert_allclose(result, want, rtol=RTOL, atol=ATOL)
        coupled = textbook_adam(w, grads, 0.01, 0.9, 0.999, 1e-8, 0.2, decoupled=False)
        assert not np.allclose(result, coupled, rtol=1e-6)


def test_adam_defaults_are_the_usual_ones():
    opt = Adam()
    assert (opt.lr, opt.beta1, opt.beta2, opt.eps, opt.weight_decay) == (
        0.001,
        0.9,
        0.999,
        1e-8,
        0.0,
    )
    assert AdamW().weight_decay == 0.01
    assert (
        repr(AdamW(0.01)) == "AdamW(lr=0.01, beta1=0.9, beta2=0.999, eps=1e-08, weight_decay=0.01)"
    )


@pytest.mark.parametrize(
    "factory",
    [
        lambda wd: SGD(0.1, 0.9, weight_decay=wd),
        lambda wd: RMSProp(0.01, weight_decay=wd),
        lambda wd: Adam(0.01, weight_decay=wd),
        lambda wd: AdamW(0.01, weight_decay=wd),
    ],
    ids=["sgd", "rmsprop", "adam", "adamw"],
)
def test_per_parameter_weight_decay_and_lr_multiplier(xp, factory):
    """A parameter's own weight_decay overrides the optimiser's; lr_multiplier scales lr."""
    w = VALUES[0]
    grads = GRADS[0]
    # Same optimiser, three parameters: default decay; decay 0.0; decay 0.3 and lr x 0.5.
    got, _ = run(
        xp,
        lambda ps: _bind(factory(0.1), ps),
        [w, w, w],
        [grads, grads, grads],
        p1={"weight_decay": 0.0},
        p2={"weight_decay": 0.3, "lr_multiplier": 0.5},
    )
    base = factory(0.1)
    lr = base.lr
    ref_default, _ = run(xp, lambda ps: _bind(factory(0.1), ps), [w], [grads])
    ref_none, _ = run(xp, lambda ps: _bind(factory(0.0), ps), [w], [grads])
    ref_other, _ = run(xp, lambda ps: _bind(_with_lr(factory(0.3), lr * 0.5), ps), [w], [grads])
    np.testing.assert_allclose(got[0], ref_default[0], rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(got[1], ref_none[0], rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(got[2], ref_other[0], rtol=RTOL, atol=ATOL)
    assert not np.allclose(got[0], got[1])


def _bind(opt, params):
    opt.bind(params)
    return opt


def _with_lr(opt, lr):
    opt.lr = lr
    return opt


def test_lr_multiplier_zero_freezes(xp, make_param):
    frozen = make_param("frozen", [1.0, 2.0], lr_multiplier=0.0)
    free = make_param("free", [1.0, 2.0])
    opt = Adam(0.1, params=[frozen, free], weight_decay=0.5)
    for p in (frozen, free):
        p.grad = xp.asarray(np.array([1.0, -1.0]))
    opt.step()
    np.testing.assert_array_equal(host(frozen.value), [1.0, 2.0])
    assert not np.allclose(host(free.value), [1.0, 2.0])


def test_parameters_without_gradient_or_not_trainable_are_skipped(xp, make_param):
    no_grad = make_param("a", [1.0])
    fixed = make_param("b", [1.0], trainable=False)
    moving = make_param("c", [1.0])
    fixed.grad = xp.asarray(np.array([1.0]))
    moving.grad = xp.asarray(np.array([1.0]))
    opt = SGD(0.5, params=[no_grad, fixed, moving])
    opt.step()
    assert host(no_grad.value).tolist() == [1.0]
    assert host(fixed.value).tolist() == [1.0]
    assert host(moving.value).tolist() == [0.5]
    assert opt.step_count == 1


def test_adam_counts_updates_per_parameter(xp, make_param):
    """A parameter whose first gradient arrives late gets the bias correction of t=1."""
    late = make_param("late", [0.0])
    early = make_param("early", [0.0])
    opt = Adam(0.1, params=[late, early])
    early.grad = xp.asarray(np.array([1.0]))
    opt.step()
    opt.step()
    late.grad = xp.asarray(np.array([1.0]))
    opt.step()
    np.testing.assert_allclose(host(late.value), [-0.1], rtol=1e-6)
    state = opt.state_dict()["arrays"]
    assert int(host(state["late/step"])) == 1 and int(host(state["early/step"])) == 3


def test_updates_are_in_place_and_buffers_allocated_once(xp, make_param):
    w = make_param("w", np.ones((4, 3)))
    b = make_param("b", np.zeros(3))
    v = make_param("v", np.ones((4, 3)))
    values = [id(p.value) for p in (w, b, v)]
    opt = Adam(0.01, params=[w, b, v], clip_norm=1.0)
    for step in range(3):
        for p in (w, b, v):
            p.grad = xp.asarray(np.full(tuple(p.value.shape), float(step + 1)))
        opt.step()
        if step == 0:
            buffers = {k: id(a) for k, a in opt.state_dict()["arrays"].items() if "/step" not in k}
            scratch = dict(opt._scratch)
    assert [id(p.value) for p in (w, b, v)] == values
    again = {k: id(a) for k, a in opt.state_dict()["arrays"].items() if "/step" not in k}
    assert again == buffers
    assert sorted(buffers) == ["b/m", "b/v", "v/m", "v/v", "w/m", "w/v"]
    # scratch is shared by shape: two shapes, two pairs of buffers, reused every step
    assert len(opt._scratch) == 2 and opt._scratch == scratch


def test_a_step_never_copies_between_host_and_device(xp, make_param, monkeypatch):
    w = make_param("w", np.ones((3, 2)))
    w.grad = xp.asarray(np.full((3, 2), 5.0))
    opt = Adam(0.01, params=[w], clip_norm=1.0, weight_decay=0.1)
    opt.step()  # buffers exist now

    def forbidden(*args, **kwargs):
        raise AssertionError("host transfer during an optimiser step")

    backend = xp._backend
    monkeypatch.setattr(backend, "to_numpy", forbidden)
    monkeypatch.setattr(backend, "from_numpy", forbidden)
    for opt_cls in (SGD, RMSProp, Adam):
        opt.step()
        opt2 = opt_cls(0.01, params=[w], clip_norm=0.5)
        opt2.step()
        opt2.step()


def test_grad_shape_mismatch_names_the_parameter(xp, make_param):
    w = make_param("layer/W", np.ones((3, 2)))
    w.grad = xp.asarray(np.ones(2))
    with pytest.raises(ValueError, match=r"layer/W.*\(2,\).*\(3, 2\)"):
        SGD(0.1, params=[w]).step()


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: SGD(-1.0), "lr must be"),
        (lambda: SGD(float("nan")), "lr must be"),
        (lambda: SGD(0.1, -0.5), "momentum"),
        (lambda: SGD(0.1, nesterov=True), "nesterov"),
        (lambda: Adam(0.1, beta1=1.0), "beta1"),
        (lambda: Adam(0.1, beta2=-0.1), "beta2"),
        (lambda: Adam(0.1, eps=0.0), "eps"),
        (lambda: RMSProp(0.1, rho=1.5), "rho"),
        (lambda: SGD(0.1, weight_decay=-1), "weight_decay"),
        (lambda: SGD(0.1, clip_norm=0.0), "clip_norm"),
    ],
)
def test_bad_settings_are_rejected(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_a_parameter_needs_name_value_grad():
    with pytest.raises(TypeError, match=r"no \.name"):
        SGD(0.1, params=[object()])


def test_step_without_parameters_is_an_error():
    with pytest.raises(RuntimeError, match="no parameters"):
        SGD(0.1).step()


def test_schedule_is_called_with_the_step_count(xp, make_param):
    seen = []

    def schedule(step):
        seen.append(step)
        return 0.1 * (step + 1)

    w = make_param("w", [0.0])
    w.grad = xp.asarray(np.array([1.0]))
    opt = SGD(schedule, params=[w])
    for _ in range(3):
        opt.step()
    assert seen == [0, 1, 2]
    np.testing.assert_allclose(host(w.value), [-(0.1 + 0.2 + 0.3)], rtol=1e-12)
    assert math.isclose(opt.learning_rate, 0.4)


def test_a_schedule_giving_a_negative_rate_is_an_error(xp, make_param):
    w = make_param("w", [0.0])
    w.grad = xp.asarray(np.array([1.0]))
    with pytest.raises(ValueError, match=r"schedule gave -1\.0 at step 0"):
        SGD(lambda step: -1.0, params=[w]).step()


def test_trains_nnlayers_parameters_through_a_graph(xp):
    """The duck-typed protocol fits nnlayers.Parameter: a least-squares fit converges."""
    import nnlayers
    import nnlayers.expr as ex

    rng = np.random.default_rng(0)
    x_host = rng.normal(size=(32, 3))
    w_true = np.array([[1.0], [-2.0], [0.5]])
    y_host = x_host @ w_true
    x = ex.placeholder((None, 3), np.float64, name="x")
    y = ex.placeholder((None, 1), np.float64, name="y")
    W = nnlayers.Parameter(np.zeros((3, 1)), name="W", dtype=np.float64)
    b = nnlayers.Parameter(np.zeros(1), name="b", dtype=np.float64, weight_decay=0.0)
    loss = ex.mean(ex.square(x @ W + b - y))
    graph = nnlayers.compile(loss, wrt=[W, b])
    opt = Adam(0.1, params=[W, b], weight_decay=1e-6)
    feeds = {x: xp.asarray(x_host), y: xp.asarray(y_host)}
    for _ in range(200):
        graph.forward(feeds)
        graph.backward()
        opt.step()
    np.testing.assert_allclose(W.numpy(), w_true, atol=1e-2)


_CHANGES = {
    # each change is undone by a later one, so that the steps after it are plain again (coupled
    # weight decay and clipping are never repeated) and the next change meets the repeat path
    "nothing": lambda ps, opt, xp: None,
    "lr_multiplier": lambda ps, opt, xp: setattr(ps[0], "lr_multiplier", 0.5),
    "own weight_decay": lambda ps, opt, xp: setattr(ps[1], "weight_decay", 0.2),
    "own weight_decay 0": lambda ps, opt, xp: setattr(ps[1], "weight_decay", 0.0),
    "optimiser weight_decay": lambda ps, opt, xp: setattr(opt, "weight_decay", 0.1),
    "optimiser weight_decay 0": lambda ps, opt, xp: setattr(opt, "weight_decay", 0.0),
    "freeze": lambda ps, opt, xp: ps[1].freeze(),
    "unfreeze": lambda ps, opt, xp: ps[1].unfreeze(),
    "new value array": lambda ps, opt, xp: setattr(
        ps[0], "value", xp.asarray(host(ps[0].value) * 1.5)
    ),
    "multiplier 0": lambda ps, opt, xp: setattr(ps[1], "lr_multiplier", 0.0),
    "multiplier 1": lambda ps, opt, xp: setattr(ps[1], "lr_multiplier", 1.0),
    "clip_norm": lambda ps, opt, xp: setattr(opt, "clip_norm", 0.5),
    "no clip_norm": lambda ps, opt, xp: setattr(opt, "clip_norm", None),
    "no gradient": lambda ps, opt, xp: None,  # handled where the gradients are set
    "gradients again": lambda ps, opt, xp: None,
}


@pytest.mark.parametrize(
    "factory",
    [lambda: SGD(0.1, momentum=0.9), lambda: SGD(0.1), lambda: Adam(0.05), lambda: RMSProp(0.01)],
    ids=["sgd-momentum", "sgd", "adam", "rmsprop"],
)
def test_repeated_steps_follow_every_change_between_them(xp, factory):
    """After a plain step the next one reuses what it found (``_repeat_updates``: no
    per-parameter lookups); every change between steps must still take effect, exactly as when
    each step works everything out afresh."""
    from nnlayers import Parameter

    def make() -> list[Parameter]:
        w = np.linspace(-1.0, 1.0, 6).reshape(2, 3)
        return [
            Parameter(xp.asarray(w), name="w", dtype=np.float64),
            Parameter(xp.asarray(np.array([0.5, -0.25, 2.0])), name="b", dtype=np.float64),
        ]

    runs = []
    for afresh in (False, True):
        params, opt = make(), factory()
        opt.bind(params)
        hits: list[bool] = []
        repeat = opt._repeat_updates

        def spy(lr: float, repeat=repeat, hits=hits, afresh=afresh):
            found = None if afresh else repeat(lr)
            hits.append(found is not None)
            return found

        opt._repeat_updates = spy
        rng = np.random.default_rng(3)
        for change in _CHANGES:
            for again in (False, True):  # the change, then a step that may repeat it
                if not again:
                    _CHANGES[change](params, opt, xp)
                for p in params:
                    p.grad = xp.asarray(rng.normal(size=tuple(p.value.shape)))
                if change == "no gradient":
                    params[0].grad = None
                opt.step()
        runs.append(([host(p.value) for p in params], opt.state_dict(), hits))
        params[1].unfreeze()
    (got, state, hits), (want, want_state, _) = runs
    for a, b in zip(got, want, strict=True):
        np.testing.assert_array_equal(a, b)
    for key, array in want_state["arrays"].items():
        np.testing.assert_array_equal(host(state["arrays"][key]), host(array), err_msg=key)
    # every change made the step after it look afresh; the step after that repeated it where
    # the step was plain (no coupled decay, clipping, frozen or gradient-less parameter)
    assert hits[0::2] == [False] * len(_CHANGES), hits
    not_plain = {"own weight_decay", "optimiser weight_decay", "freeze", "multiplier 0"}
    not_plain |= {"clip_norm", "no gradient"}
    assert hits[1::2] == [change not in not_plain for change in _CHANGES], hits


def test_a_repeated_step_still_checks_gradient_shapes(xp):
    from nnlayers import Parameter

    w = Parameter(xp.asarray(np.ones((3, 2))), name="layer/W", dtype=np.float64)
    opt = SGD(0.1, momentum=0.9, params=[w])
    for _ in range(2):
        w.grad = xp.asarray(np.ones((3, 2)))
        opt.step()
    before = host(w.value)
    w.grad = xp.asarray(np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"layer/W.*\(2, 3\).*\(3, 2\)"):
        opt.step()
    np.testing.assert_array_equal(host(w.value), before)
    assert opt.step_count == 2
