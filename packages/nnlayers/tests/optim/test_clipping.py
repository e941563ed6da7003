"""Gradient clipping by global norm, computed on the device."""

from __future__ import annotations

import numpy as np
import pytest

from nnlayers.optim import SGD, clip_grad_norm, clip_scale, global_norm

GRADS = [np.array([[3.0, 0.0], [0.0, 4.0]]), np.array([12.0])]  # global norm 13


def test_global_norm_and_scale(xp, host):
    norm = global_norm([xp.asarray(g) for g in GRADS])
    assert tuple(norm.shape) == ()
    assert host(norm) == pytest.approx(13.0, rel=1e-15)
    assert host(clip_scale(norm, 6.5, eps=0.0)) == pytest.approx(0.5)
    assert host(clip_scale(norm, 100.0)) == 1.0


@pytest.mark.parametrize("max_norm", [1.0, 13.0 / 2, 50.0])
def test_optimizer_clips_by_global_norm(xp, host, make_param, max_norm):
    params = [make_param("a", np.zeros((2, 2))), make_param("b", np.zeros(1))]
    for p, g in zip(params, GRADS):
        p.grad = xp.asarray(g)
    opt = SGD(1.0, params=params, clip_norm=max_norm, clip_eps=1e-6)
    opt.step()
    scale = min(1.0, max_norm / (13.0 + 1e-6))
    for p, g in zip(params, GRADS):
        np.testing.assert_allclose(host(p.value), -scale * g, rtol=1e-13)
        np.testing.assert_array_equal(host(p.grad), g)  # gradients are left as they were
    assert host(opt.last_grad_norm) == pytest.approx(13.0)


def test_clipping_runs_before_weight_decay(xp, host, make_param):
    p = make_param("w", [2.0])
    p.grad = xp.asarray(np.array([10.0]))
    SGD(1.0, params=[p], clip_norm=1.0, clip_eps=0.0, weight_decay=0.5).step()
    np.testing.assert_allclose(host(p.value), [2.0 - (1.0 + 0.5 * 2.0)], rtol=1e-14)


def test_clip_grad_norm_replaces_gradients(xp, host, make_param):
    params = [
        make_param("a", np.zeros((2, 2))),
        make_param("b", np.zeros(1)),
        make_param("c", [0.0]),
    ]
    for p, g in zip(params, GRADS):
        p.grad = xp.asarray(g)
    norm = clip_grad_norm(params, 1.3, eps=0.0)
    assert host(norm) == pytest.approx(13.0)
    for p, g in zip(params, GRADS):
        np.testing.assert_allclose(host(p.grad), g / 10.0, rtol=1e-14)
    assert params[2].grad is None


def test_clip_grad_norm_errors(make_param):
    with pytest.raises(ValueError, match="max_norm"):
        clip_grad_norm([], 0.0)
    with pytest.raises(ValueError, match="no parameter has a gradient"):
        clip_grad_norm([make_param("a", [1.0])], 1.0)
    with pytest.raises(ValueError, match="at least one"):
        global_norm([])
