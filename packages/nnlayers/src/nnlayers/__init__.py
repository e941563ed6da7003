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
"""

from . import expr, init, layers, ops
from .errors import FeedError, GraphError, NNLayersError, NonFiniteError, ShapeError
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
from .parameter import Parameter

__version__ = "0.1.0"

__all__ = [
    "FeedError", "Graph", "GraphError", "NNLayersError", "NonFiniteError", "Parameter",
    "ShapeError", "__version__", "compile", "expr", "ops",
    # layers
    "GRU", "LSTM", "RNN", "Affine", "BatchNorm", "Conv2D", "Conv2DTranspose", "Dropout",
    "Embedding", "Flatten", "Layer", "LayerNorm", "Linear", "Pool2D", "Sequential", "init",
    "layers", "seed",
]  # fmt: skip
