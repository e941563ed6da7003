"""Optimiser state export and import (for checkpoints), binding and copying."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from nnlayers.optim import SGD, Adam, AdamW, RMSProp

FACTORIES = {
    "sgd": lambda: SGD(0.1, 0.9, nesterov=True),
    "rmsprop": lambda: RMSProp(0.01, momentum=0.5, centered=True),
    "adam": lambda: Adam(0.01),
    "adamw": lambda: AdamW(0.01),
}


def _model(make_param):
    return [
        make_param("layer/W", np.linspace(0, 1, 6).reshape(3, 2)),
        make_param("layer/b", [0.5, -0.5]),
    ]


def _train(xp, opt, params, steps, seed):
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        for p in params:
            p.grad = xp.asarray(rng.normal(size=tuple(p.value.shape)))
        opt.step()


@pytest.mark.parametrize("kind", sorted(FACTORIES))
@pytest.mark.parametrize("through_host", [False, True])
def test_state_round_trip_continues_identically(xp, host, make_param, kind, through_host):
    params = _model(make_param)
    opt = FACTORIES[kind]()
    opt.bind(params)
    _train(xp, opt, params, 3, seed=0)
    state = opt.state_dict()
    assert state["optimizer"] == type(opt).__name__ and state["step"] == 3
    if through_host:  # what a checkpoint file gives back
        state = {
            **state,
            "arrays": {
                k: np.array(host(v), dtype=np.dtype(v.dtype)) for k, v in state["arrays"].items()
            },
        }

    clone = [make_param(p.name, host(p.value)) for p in params]
    restored = FACTORIES[kind]()
    restored.bind(clone)
    restored.load_state_dict(state)
    assert restored.step_count == 3
    _train(xp, opt, params, 2, seed=1)
    _train(xp, restored, clone, 2, seed=1)
    for a, b in zip(params, clone):
        np.testing.assert_array_equal(host(a.value), host(b.value))


def test_state_names(make_param, xp):
    params = _model(make_param)
    opt = RMSProp(0.01, momentum=0.5, centered=True, params=params)
    assert opt.state_dict()["arrays"] == {}  # nothing allocated before the first update
    _train(xp, opt, params, 1, seed=0)
    assert sorted(opt.state_dict()["arrays"]) == [
        f"layer/{p}/{s}" for p in ("W", "b") for s in ("grad_avg", "momentum", "square_avg", "step")
    ]
    assert SGD(0.1).slots == () and SGD(0.1, 0.9).slots == ("momentum",)


def test_a_state_that_does_not_fit_changes_nothing(xp, host, make_param):
    params = _model(make_param)
    opt = Adam(0.01, params=params)
    _train(xp, opt, params, 2, seed=0)
    good = opt.state_dict()
    before = {k: host(v).copy() for k, v in good["arrays"].items()}
    arrays = {k: host(v) for k, v in good["arrays"].items()}
    cases = {
        "shape": {**arrays, "layer/W/m": np.zeros((2, 3))},
        "dtype": {**arrays, "layer/W/v": np.zeros((3, 2), dtype=np.float32)},
        "name": {**arrays, "other/W/m": np.zeros((3, 2))},
        "slot": {**arrays, "layer/W/momentum": np.zeros((3, 2))},
    }
    messages = {
        "shape": r"'layer/W/m': saved float64\[2, 3\], expected float64\[3, 2\]",
        "dtype": r"'layer/W/v': saved float32",
        "name": "no parameter named 'other/W'",
        "slot": "Adam has no slot 'momentum'",
    }
    for case, broken in cases.items():
        broken = {
            k: (v if k not in ("layer/W/m",) or case == "shape" else np.full_like(v, 7.0))
            for k, v in broken.items()
        }
        with pytest.raises(ValueError, match=messages[case]):
            opt.load_state_dict({"optimizer": "Adam", "step": 9, "arrays": broken})
        assert opt.step_count == 2
        assert {k: host(v) for k, v in opt.state_dict()["arrays"].items()}.keys() == before.keys()
        for k, v in opt.state_dict()["arrays"].items():
            np.testing.assert_array_equal(host(v), before[k])
    with pytest.raises(ValueError, match="state is of a SGD optimiser"):
        opt.load_state_dict({"optimizer": "SGD", "step": 1, "arrays": {}})
    with pytest.raises(ValueError, match="step must be an int"):
        opt.load_state_dict({"step": -1, "arrays": {}})
    with pytest.raises(ValueError, match="'step' and 'arrays'"):
        opt.load_state_dict({"arrays": {}})


def test_state_needs_unique_names(make_param, xp):
    params = [make_param("w", [1.0]), make_param("w", [2.0])]
    opt = SGD(0.1, 0.9, params=params)
    _train(xp, opt, params, 1, seed=0)
    with pytest.raises(ValueError, match="two parameters are named 'w'"):
        opt.state_dict()


def test_bind_keeps_own_params_and_state_of_staying_params(xp, make_param):
    a, b = make_param("a", [1.0]), make_param("b", [1.0])
    own = SGD(0.1, params=[a])
    own.bind([b])
    assert own.params == [a]
    opt = SGD(0.1, 0.9)
    opt.bind([a, b, a])
    assert opt.params == [a, b]
    _train(xp, opt, [a, b], 1, seed=0)
    opt.bind([b])
    assert list(opt.state_dict()["arrays"]) == ["b/momentum", "b/step"]


def test_deepcopy_is_a_fresh_optimizer_with_the_same_settings(xp, make_param):
    a = make_param("a", [1.0])
    opt = Adam(0.01, beta1=0.8, params=[a], clip_norm=2.0)
    _train(xp, opt, [a], 2, seed=0)
    twin = copy.deepcopy(opt)
    assert (twin.beta1, twin.clip_norm, twin.step_count, twin.params) == (0.8, 2.0, 0, [])
    b = make_param("b", [3.0])
    twin.bind([b])
    assert twin.params == [b] and opt.params == [a]
