"""Errors that nnlayers raises, each naming the op, the user's name for the node and the shapes."""

from __future__ import annotations


class NNLayersError(Exception):
    """Base class of the errors nnlayers raises on purpose."""


class ShapeError(NNLayersError, ValueError):
    """Shapes or dtypes that an op cannot accept, found by shape inference before anything runs."""


class FeedError(NNLayersError, ValueError):
    """A missing, unknown or mis-shaped value fed to a placeholder."""


class FeedIndexError(FeedError, IndexError):
    """Indices fed to a placeholder (an embedding's ids) outside the axis they index; an
    ``IndexError`` too, as arraycore's own check of them raises."""


class GraphError(NNLayersError, RuntimeError):
    """A graph used in a way it cannot support (backward without forward, nothing to run, ...)."""


class NonFiniteError(NNLayersError, FloatingPointError):
    """The NaN/Inf guard found a NaN or an infinity; the message names the op that made it."""


class DistributedError(NNLayersError, RuntimeError):
    """A data-parallel run that cannot go on: ranks that disagree (models of other shapes,
    feeds of other lengths), a launcher and an MPI library that do not match, mpi4py missing."""


class PrecisionWarning(UserWarning):
    """Half-precision parameters trained without a mixed-precision policy: small gradients
    flush to zero and large ones overflow (use ``Model(..., precision="mixed_float16")``)."""
