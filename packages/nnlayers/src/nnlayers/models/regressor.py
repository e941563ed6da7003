"""``Regressor``: squared error between a network's output and real targets."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .. import expr as ex
from ..expr.node import Expr
from .model import Model


class Regressor(Model):
    """A regressor: ``network(inputs)`` predicts targets of ``target_shape`` (default: the
    network's output shape); the loss is the squared error summed over each example and averaged
    over the batch, and ``mae`` (the mean absolute error of an element) is tracked with it.

    >>> import numpy as np
    >>> from nnlayers.layers import Affine
    >>> model = Regressor(Affine(2, seed=0), (3,))
    >>> model.predict(np.ones((4, 3))).shape
    (4, 2)
    """

    def __init__(
        self,
        network: Callable[[Expr], Expr],
        input_shape: Sequence[int | None],
        *,
        target_shape: Sequence[int] | None = None,
        input_dtype: Any = None,
        optimizer: Any = None,
        seed: int = 0,
        check_finite: bool = False,
    ) -> None:
        x = ex.placeholder((None, *input_shape), input_dtype, name="inputs")
        prediction = network(x)
        if not isinstance(prediction, Expr):
            raise TypeError(f"Regressor: the network must return an expression, got {prediction!r}")
        prediction = prediction.named(prediction.name or "prediction")
        shape = tuple(prediction.shape[1:]) if target_shape is None else tuple(target_shape)
        y = ex.placeholder((None, *shape), prediction.dtype, name="targets")
        self.network = network
        self.prediction = prediction
        super().__init__(
            ex.squared_error(prediction, y),
            inputs=[x, y],
            outputs={"prediction": prediction},
            metrics={"mae": ex.mean(ex.abs(prediction - y))},
            optimizer=optimizer,
            seed=seed,
            check_finite=check_finite,
        )
