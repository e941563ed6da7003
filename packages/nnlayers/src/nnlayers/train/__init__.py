"""Training: :func:`fit`, its :class:`History`, callbacks and checkpoints that resume.

Callbacks: :class:`EarlyStopping`, :class:`Checkpoint` (Keras's :class:`ModelCheckpoint`),
:class:`ReduceLROnPlateau`, :class:`LearningRateScheduler`, :class:`CSVLogger`,
:class:`TensorBoard`, :class:`TerminateOnNaN`, :class:`PlotCurves`, or a subclass of
:class:`Callback` (per-epoch and per-batch hooks).

>>> from nnlayers.train import Checkpoint, EarlyStopping, PlotCurves, fit  # doctest: +SKIP
>>> history = fit(
...     model,
...     feed,
...     epochs=20,
...     validation=(x_val, y_val),  # doctest: +SKIP
...     callbacks=[
...         EarlyStopping("val_loss", patience=3),
...         Checkpoint("run.safetensors", resume=True),
...         PlotCurves("curves.png"),
...     ],
... )

Optimisers, schedules and gradient clipping live in :mod:`nnlayers.optim`.
"""

from .callbacks import (
    BatchLogs,
    Callback,
    Checkpoint,
    EarlyStopping,
    ModelCheckpoint,
    PlotCurves,
    TerminateOnNaN,
)
from .checkpoints import read_metadata, restore, save
from .fit import TrainingState, fit
from .history import History
from .learning_rate import LearningRateScheduler, ReduceLROnPlateau
from .loggers import CSVLogger, TensorBoard
from .progress import Progress

__all__ = [
    "BatchLogs", "CSVLogger", "Callback", "Checkpoint", "EarlyStopping", "History",
    "LearningRateScheduler", "ModelCheckpoint", "PlotCurves", "Progress", "ReduceLROnPlateau",
    "TensorBoard", "TerminateOnNaN", "TrainingState", "fit", "read_metadata", "restore", "save",
]  # fmt: skip
