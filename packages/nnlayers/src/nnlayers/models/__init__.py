"""Models: a compiled graph plus training, evaluation and prediction.

:class:`Model` wraps any loss; :class:`Classifier`, :class:`Regressor`, :class:`VAE` and
:class:`GAN` build the loss for you from networks (layers or functions of expressions).

>>> import numpy as np
>>> from nnlayers.layers import Affine, Sequential
>>> from nnlayers.models import Classifier
>>> model = Classifier(Sequential([Affine(32, activation="relu"), Affine(3)], seed=0), (2,))
>>> model.predict(np.zeros((4, 2))).shape
(4,)
"""

from .classifier import Classifier
from .gan import GAN
from .generation import generate
from .model import Model, unique_names
from .regressor import Regressor
from .vae import VAE

__all__ = ["GAN", "VAE", "Classifier", "Model", "Regressor", "generate", "unique_names"]
