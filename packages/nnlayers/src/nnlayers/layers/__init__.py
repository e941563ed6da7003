"""Layers: reusable callables on expressions whose parameters appear at first application.

>>> import nnlayers.expr as ex
>>> from nnlayers.layers import Affine, BatchNorm, Conv2D, Dropout, Flatten, Pool2D, Sequential
>>> net = Sequential(
...     [
...         Conv2D(16, 3, padding="same"),
...         BatchNorm(),
...         "relu",
...         Pool2D(2),
...         Flatten(),
...         Dropout(0.25),
...         Affine(10),
...     ],
...     seed=0,
... )
>>> net(ex.placeholder((None, 1, 8, 8), name="images")).shape
(None, 10)

One layer per file: :class:`Affine` (``Linear``), :class:`Conv2D`, :class:`Conv2DTranspose`,
:class:`Pool2D`, :class:`BatchNorm`, :class:`Dropout`, :class:`Embedding`, :class:`RNN`,
:class:`LSTM`, :class:`GRU`, :class:`LayerNorm`, :class:`Flatten`, :class:`Sequential`,
:class:`MultiHeadAttention`, :class:`TransformerEncoderLayer`, :class:`TransformerDecoderLayer`,
:class:`TransformerEncoder`, :class:`TransformerDecoder`,
:class:`PositionalEmbedding`, :class:`SinusoidalPositionalEncoding`, :class:`ResidualBlock`,
:class:`GroupNorm`, :class:`GlobalPool2D` (``GlobalAvgPool2D``, ``GlobalMaxPool2D``),
:class:`Bidirectional`, :class:`RNNStack`.
"""

from .affine import Affine, Linear
from .attention import MultiHeadAttention
from .base import ACTIVATIONS, Layer, get_activation
from .batch_norm import BatchNorm
from .bidirectional import Bidirectional
from .conv2d import Conv2D
from .conv2d_transpose import Conv2DTranspose
from .dropout import Dropout, SpatialDropout
from .embedding import Embedding
from .flatten import Flatten
from .group_norm import GroupNorm
from .gru import GRU
from .layer_norm import LayerNorm
from .lstm import LSTM
from .pool2d import AvgPool2D, GlobalAvgPool2D, GlobalMaxPool2D, GlobalPool2D, MaxPool2D, Pool2D
from .positional import PositionalEmbedding, SinusoidalPositionalEncoding
from .recurrent import Recurrent
from .residual import ResidualBlock
from .rnn import RNN
from .rnn_stack import RNNStack
from .sequential import Sequential
from .transformer import (
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)

__all__ = [
    "ACTIVATIONS", "GRU", "LSTM", "RNN", "Affine", "AvgPool2D", "BatchNorm", "Bidirectional", "Conv2D",
    "Conv2DTranspose", "Dropout", "Embedding", "Flatten", "GlobalAvgPool2D", "GlobalMaxPool2D",
    "GlobalPool2D", "GroupNorm", "Layer", "LayerNorm", "Linear",
    "MaxPool2D", "MultiHeadAttention", "Pool2D", "PositionalEmbedding", "Recurrent",
    "ResidualBlock", "RNNStack", "Sequential", "SinusoidalPositionalEncoding", "SpatialDropout", "TransformerDecoder",
    "TransformerDecoderLayer", "TransformerEncoder", "TransformerEncoderLayer", "get_activation",
]  # fmt: skip
