"""Optimisers, learning-rate schedules and gradient clipping.

Every optimiser updates parameters in place on their device through ``xp.inplace`` ops, with
buffers allocated once per parameter; a parameter is anything with ``.name``, ``.value`` and
``.grad`` (see :class:`ParameterLike`), optionally ``.weight_decay`` and ``.lr_multiplier``.

>>> import numpy as np
>>> from types import SimpleNamespace
>>> from nnlayers.optim import SGD, Warmup, CosineDecay
>>> w = SimpleNamespace(name="w", value=np.array([1.0, 2.0]), grad=np.array([1.0, 1.0]))
>>> opt = SGD(
...     Warmup(CosineDecay(0.1, total_steps=100), warmup_steps=5),
...     momentum=0.9,
...     params=[w],
...     clip_norm=1.0,
... )
>>> for _ in range(3):
...     opt.step()
>>> opt.step_count, round(opt.learning_rate, 3)
(3, 0.06)
"""

from .adam import Adam, AdamW
from .base import (
    Optimizer,
    ParameterLike,
    clip_grad_norm,
    clip_scale,
    global_norm,
)
from .rmsprop import RMSProp
from .schedules import (
    Constant,
    CosineDecay,
    ExponentialDecay,
    LearningRate,
    Schedule,
    StepDecay,
    Warmup,
    as_schedule,
)
from .sgd import SGD

__all__ = [
    "SGD", "Adam", "AdamW", "Optimizer", "ParameterLike", "RMSProp",
    "clip_grad_norm", "clip_scale", "global_norm",
    "Constant", "CosineDecay", "ExponentialDecay", "LearningRate", "Schedule", "StepDecay",
    "Warmup", "as_schedule",
]  # fmt: skip
