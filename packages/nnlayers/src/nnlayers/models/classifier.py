"""``Classifier``: softmax cross-entropy on a network's logits, with accuracy."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .. import expr as ex
from ..expr.node import Expr
from .model import Model


class Classifier(Model):
    """A classifier: ``network(inputs)`` gives logits (classes on the last axis) trained with
    softmax cross-entropy against integer labels; ``accuracy`` is tracked with the loss.

    ``input_shape`` excludes the batch axis. ``target_shape`` is ``()`` for one label per
    example, or e.g. ``(T,)`` for a label per time step (a language model), in which case the
    loss is the mean per position. A size may be ``None`` (unknown): ``input_shape=(None,)``,
    ``target_shape=(None,)`` trains and predicts sequences of any length, each new length
    compiled once (plans cached per shape).

    >>> import numpy as np
    >>> from nnlayers.layers import Affine, Sequential
    >>> model = Classifier(Sequential([Affine(16, activation="relu"), Affine(3)], seed=0), (4,))
    >>> x = np.random.default_rng(0).normal(size=(5, 4))
    >>> model.predict_proba(x).shape, model.predict(x).dtype.name
    ((5, 3), 'int64')
    >>> sorted(model.evaluate(x, np.zeros(5, dtype=np.int64)))
    ['accuracy', 'loss']
    """

    def __init__(
        self,
        network: Callable[[Expr], Expr],
        input_shape: Sequence[int | None],
        *,
        target_shape: Sequence[int | None] = (),
        input_dtype: Any = None,
        optimizer: Any = None,
        seed: int = 0,
        check_finite: bool = False,
        precision: Any = None,
    ) -> None:
        x = ex.placeholder((None, *input_shape), input_dtype, name="inputs")
        y = ex.placeholder((None, *target_shape), "int64", name="labels")
        logits = network(x)
        if not isinstance(logits, Expr):
            raise TypeError(f"Classifier: the network must return an expression, got {logits!r}")
        logits = logits.named(logits.name or "logits")
        want = (None, *target_shape)
        if logits.ndim != len(want) + 1 or any(
            w is not None and g is not None and w != g for w, g in zip(want, logits.shape)
        ):
            raise ValueError(
                f"Classifier: the network gives logits of shape {logits.shape}; expected "
                f"{(*want, 'classes')} for targets of shape {tuple(target_shape)}"
            )
        self.classes = logits.shape[-1]
        if None in tuple(target_shape):  # a length known only per batch: mean per position
            loss = ex.softmax_cross_entropy(logits, y, per_position=True)
        else:
            loss = ex.softmax_cross_entropy(logits, y)
            positions = math.prod(int(d) for d in target_shape if d is not None)
            if positions > 1:
                loss = loss * (1.0 / positions)
        hits = ex.astype(ex.equal(ex.argmax(logits, axis=-1), y), logits.dtype)
        self.network = network
        self.logits = logits
        self.probabilities = ex.softmax(logits, axis=-1)
        super().__init__(
            loss,
            inputs=[x, y],
            outputs={"probabilities": self.probabilities},
            metrics={"accuracy": ex.mean(hits)},
            optimizer=optimizer,
            seed=seed,
            check_finite=check_finite,
            precision=precision,
        )
        self.probabilities = self.outputs["probabilities"]

    def predict_proba(self, x: Any, batch_size: int = 256) -> np.ndarray:
        """Class probabilities (softmax of the logits), shape ``(N, ..., classes)``."""
        return np.asarray(self.predict_outputs(x, batch_size=batch_size)["probabilities"])

    def predict(self, x: Any, *more: Any, batch_size: int = 256) -> np.ndarray:
        """The most likely class of each example (int64)."""
        proba = self.predict_proba(x, batch_size=batch_size)
        return np.asarray(np.argmax(proba, axis=-1), dtype=np.int64)
