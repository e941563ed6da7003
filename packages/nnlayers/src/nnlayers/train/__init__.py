"""Training: :func:`fit`, its :class:`History`, callbacks and checkpoints that resume.

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

from .callbacks import Callback, Checkpoint, EarlyStopping, PlotCurves
from .checkpoints import restore, save
from .fit import TrainingState, fit
from .history import History
from .progress import Progress

__all__ = [
    "Callback", "Checkpoint", "EarlyStopping", "History", "PlotCurves", "Progress",
    "TrainingState", "fit", "restore", "save",
]  # fmt: skip
