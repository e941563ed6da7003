"""Learning-rate schedules: their values, composition and argument checks."""

from __future__ import annotations

import doctest
import itertools
import math

import pytest

import nnlayers.optim as optim
from nnlayers.optim import (
    Constant,
    CosineDecay,
    ExponentialDecay,
    StepDecay,
    Warmup,
    as_schedule,
)


def test_constant():
    assert [Constant(0.3)(s) for s in (0, 1, 10**6)] == [0.3, 0.3, 0.3]


def test_step_decay():
    schedule = StepDecay(0.1, step_size=3, gamma=0.5)
    assert [schedule(s) for s in range(8)] == pytest.approx(
        [0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.025, 0.025], rel=1e-15
    )


def test_exponential_decay_continuous_and_staircase():
    smooth = ExponentialDecay(1.0, gamma=0.9, decay_steps=2)
    stairs = ExponentialDecay(1.0, gamma=0.9, decay_steps=2, staircase=True)
    assert [smooth(s) for s in range(4)] == pytest.approx([0.9 ** (s / 2) for s in range(4)])
    assert [stairs(s) for s in range(5)] == pytest.approx([1.0, 1.0, 0.9, 0.9, 0.81])


def test_cosine_decay_with_min_lr():
    schedule = CosineDecay(1.0, total_steps=10, min_lr=0.1)
    values = [schedule(s) for s in range(13)]
    expected = [0.1 + 0.9 * (1 + math.cos(math.pi * s / 10)) / 2 for s in range(10)]
    assert values[:10] == pytest.approx(expected, rel=1e-14)
    assert values[10:] == [0.1, 0.1, 0.1]
    assert all(a >= b for a, b in itertools.pairwise(values))


def test_warmup_composes_with_any_schedule():
    inner = CosineDecay(0.2, total_steps=4)
    schedule = Warmup(inner, warmup_steps=4, start_factor=0.5)
    got = [schedule(s) for s in range(10)]
    assert got[:4] == pytest.approx([0.1, 0.125, 0.15, 0.175])
    assert got[4:9] == pytest.approx([inner(s) for s in range(5)])
    assert got[9] == 0.0
    # a plain number or any callable works as the inner schedule too
    assert Warmup(0.4, 2)(1) == pytest.approx(0.2)
    assert Warmup(lambda s: 1.0 / (s + 1), 2)(3) == pytest.approx(0.5)
    # warm-ups nest
    assert Warmup(Warmup(1.0, 2), 2)(2) == pytest.approx(0.0)


def test_as_schedule():
    assert as_schedule(0.5)(7) == 0.5
    fn = lambda s: s
    assert as_schedule(fn) is fn


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Constant(-0.1), "lr must be"),
        (lambda: StepDecay(0.1, 0), "step_size"),
        (lambda: ExponentialDecay(0.1, -0.5), "gamma"),
        (lambda: CosineDecay(0.1, 10, min_lr=0.2), "min_lr"),
        (lambda: Warmup(0.1, 0), "warmup_steps"),
        (lambda: Warmup(0.1, 5, start_factor=2.0), "start_factor"),
    ],
)
def test_bad_arguments(make, message):
    with pytest.raises(ValueError, match=message):
        make()


@pytest.mark.parametrize("step", [-1, 1.5, True])
def test_bad_step(step):
    with pytest.raises(ValueError, match="step must be an int"):
        Constant(0.1)(step)


def test_docstring_examples_run():
    for module in (optim, optim.schedules, optim.sgd, optim.adam, optim.base):
        result = doctest.testmod(module, raise_on_error=False, verbose=False)
        assert result.failed == 0, module.__name__
