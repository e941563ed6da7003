"""nnlayers: expression graphs, automatic differentiation and training on any arraycore backend.

>>> import numpy as np
>>> import nnlayers
>>> import nnlayers.expr as ex
>>> x = ex.placeholder((None, 2), name="x")
>>> W = nnlayers.Parameter(np.eye(2), name="W")
>>> graph = nnlayers.compile(ex.sum(ex.tanh(x @ W)))
>>> loss = graph.forward({x: np.zeros((3, 2))})
>>> sorted(g.shape for g in graph.backward().values())
[(2, 2)]

Layers, models and training (``docs/training.md``):

>>> from nnlayers.layers import Affine, Sequential
>>> from nnlayers.optim import Adam
>>> data = np.random.default_rng(0).normal(size=(200, 2)).astype("float32")
>>> labels = (data[:, 0] * data[:, 1] > 0).astype("int64")
>>> net = Sequential([Affine(32, activation="relu"), Affine(2)], seed=0)
>>> model = nnlayers.Classifier(net, input_shape=(2,), optimizer=Adam(0.02))
>>> history = nnlayers.fit(
...     model, nnlayers.Feed(data, labels, batch_size=32), epochs=30, progress=False
... )
>>> model.evaluate(data, labels)["accuracy"] > 0.9
True
"""

from . import (
    augment,
    checkpoint,
    distributed,
    export,
    expr,
    init,
    layers,
    models,
    ops,
    optim,
    plotting,
    train,
)
from .errors import (
    EmptyEpochError,
    FeedError,
    FeedIndexError,
    FileFaultError,
    GraphError,
    NNLayersError,
    NonFiniteError,
    ShapeError,
)
from .feeds import Feed, StreamFeed
from .graph import Graph, compile
from .init import seed
from .layers import (
    GRU,
    LSTM,
    RNN,
    Affine,
    BatchNorm,
    Conv2D,
    Conv2DTranspose,
    Dropout,
    Embedding,
    Flatten,
    Layer,
    LayerNorm,
    Linear,
    Pool2D,
    Sequential,
)
from .models import GAN, VAE, Classifier, Model, Regressor, generate
from .parameter import Parameter
from .profiler import Profile, profile
from .summary import summary
from .train import History, fit

__version__ = "0.1.0"

__all__ = [
    "EmptyEpochError", "FeedError", "FeedIndexError", "FileFaultError", "Graph", "GraphError",
    "NNLayersError", "NonFiniteError",
    "Parameter", "ShapeError", "__version__", "augment", "compile", "export", "expr", "ops",
    # layers
    "GRU", "LSTM", "RNN", "Affine", "BatchNorm", "Conv2D", "Conv2DTranspose", "Dropout",
    "Embedding", "Flatten", "Layer", "LayerNorm", "Linear", "Pool2D", "Sequential", "init",
    "layers", "seed",
    # data, models and training
    "GAN", "VAE", "Classifier", "Feed", "History", "Model", "Regressor", "StreamFeed",
    "checkpoint", "distributed", "fit", "generate", "models", "optim", "plotting", "summary",
    "train",
    # looking inside a step
    "Profile", "profile",
]  # fmt: skip
