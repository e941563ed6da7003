"""``generate``: continue a sequence with a trained sequence model, one token at a time.

The model is a :class:`~nnlayers.models.Classifier` over token ids whose network gives logits
for every position (``(N, T) -> (N, T, vocabulary)``, trained with ``target_shape=(T,)``), as the
character models of the examples are. Each new token is drawn from the model's distribution at
the last position of the context (the prompt and what was drawn so far), sharpened or flattened
by ``temperature`` and cut to the ``top_k`` most likely tokens.

How the context is read depends on the model's input length:

* unknown (``input_shape=(None,)``): the context itself, up to ``context`` tokens or the
  longest sequence the model's position tables cover (the model's graph compiles one plan per
  new length, kept in its bounded cache);
* known, ``T``: a window of ``T`` tokens. A shorter context is placed at the start of the
  window and the prediction read at its last position, which is right only for a *causal*
  model (position ``t`` sees positions ``<= t``: LSTM, GRU, RNN, attention with
  ``causal=True``). That is checked once before anything is drawn, by predicting the same
  context under two different fillings of the rest of the window: a model that is not causal
  is refused with a ``ValueError`` rather than sampled from wrongly.

Each token costs one forward pass over the context (``O(T)``); a stateful recurrent decoder
(the LSTM example's hand-built step) costs ``O(1)`` per token where that matters.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..graph.topo import topological_order
from ..ops.nn.sequence import AddPositions
from .classifier import Classifier


def generate(
    model: Classifier,
    prompt: Sequence[int] | np.ndarray,
    length: int,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    context: int | None = None,
    seed: int | None = None,
) -> np.ndarray:
    """``prompt`` (token ids) followed by ``length`` tokens drawn from ``model``, int64.

    ``temperature`` divides the logits (``0``: always the most likely token); ``top_k`` keeps
    the ``k`` most likely tokens; ``context`` caps how many of the last tokens the model reads
    (default: the model's input length, or everything where that is unknown); ``seed`` seeds
    the draws (NumPy's ``default_rng``).

    >>> import numpy as np
    >>> from nnlayers import Classifier
    >>> from nnlayers.layers import Affine, Embedding, LSTM, Sequential
    >>> net = Sequential([Embedding(5, 4), LSTM(8, return_sequences=True), Affine(5)], seed=0)
    >>> model = Classifier(net, (None,), target_shape=(None,), input_dtype="int64")
    >>> out = generate(model, [1, 2], 6, seed=0)
    >>> out.shape, out[:2].tolist(), bool(((0 <= out) & (out < 5)).all())
    ((8,), [1, 2], True)
    """
    if not isinstance(model, Classifier):
        raise TypeError(
            f"generate: needs a Classifier over token ids (logits per position), got "
            f"{type(model).__name__}"
        )
    window = _window(model)
    ids = np.asarray(prompt)
    if ids.ndim != 1 or ids.size == 0 or ids.dtype.kind not in "iu":
        raise ValueError(
            f"generate: the prompt must be a non-empty 1-D sequence of token ids, got "
            f"{ids.dtype.name} of shape {ids.shape}"
        )
    vocabulary = int(model.classes)  # type: ignore[arg-type]
    if ids.min() < 0 or ids.max() >= vocabulary:
        raise ValueError(
            f"generate: prompt ids must lie in [0, {vocabulary}) (the model's classes), got "
            f"{int(ids.min())}..{int(ids.max())}"
        )
    if int(length) < 0:
        raise ValueError(f"generate: length must be at least 0, got {length}")
    if temperature < 0:
        raise ValueError(f"generate: temperature must be >= 0, got {temperature}")
    if top_k is not None and not 1 <= int(top_k) <= vocabulary:
        raise ValueError(f"generate: top_k must lie in [1, {vocabulary}], got {top_k}")
    if context is not None and int(context) < 1:
        raise ValueError(f"generate: context must be positive, got {context}")
    if context is None:  # the model's length, else the longest its position tables take
        limit = window if window is not None else _longest(model)
    else:
        limit = min(window or int(context), int(context))
    rng = np.random.default_rng(seed)
    out = [int(i) for i in ids]
    if window is not None and length > 0:
        _check_causal(model, out[-window:], window, vocabulary)
    for _ in range(int(length)):
        recent = out if limit is None else out[-limit:]
        if window is None:
            batch = np.asarray([recent], dtype=np.int64)
        else:
            batch = np.zeros((1, window), dtype=np.int64)
            batch[0, : len(recent)] = recent
        p = model.predict_proba(batch, batch_size=1)[0, len(recent) - 1]
        out.append(_draw(np.asarray(p, dtype=np.float64), temperature, top_k, rng))
    return np.asarray(out, dtype=np.int64)


def _window(model: Classifier) -> int | None:
    """The model's input length (``None``: unknown), after checking it reads token ids and gives
    logits per position."""
    inputs = model.inputs[0]
    if inputs.ndim != 2 or inputs.dtype.kind not in "iu" or model.logits.ndim != 3:
        raise ValueError(
            "generate: needs a model over token ids (N, T) giving logits per position "
            f"(N, T, vocabulary), got inputs {inputs.spec} and logits {model.logits.spec} (train "
            "it with input_dtype='int64' and target_shape=(T,) or (None,))"
        )
    t = inputs.shape[1]
    return None if t is None else int(t)


def _longest(model: Classifier) -> int | None:
    """The longest sequence the model's position tables cover (``None``: no limit)."""
    rows = [
        node.inputs[1].shape[0]
        for node in topological_order([model.logits])
        if isinstance(node.op, AddPositions)
    ]
    known = [int(r) for r in rows if r is not None]
    return min(known) if known else None


def _check_causal(model: Classifier, recent: list[int], window: int, vocabulary: int) -> None:
    """Refuse a model whose prediction at the context's last position depends on what fills the
    rest of its window."""
    if len(recent) == window or vocabulary < 2:
        return  # nothing is filled in, or nothing else could fill it
    batch = np.zeros((2, window), dtype=np.int64)
    batch[:, : len(recent)] = recent
    batch[1, len(recent) :] = np.arange(window - len(recent)) % (vocabulary - 1) + 1
    p = model.predict_proba(batch, batch_size=2)[:, len(recent) - 1]
    if not np.allclose(p[0], p[1], rtol=1e-4, atol=1e-6):
        raise ValueError(
            f"generate: the model reads windows of {window} tokens and its prediction at "
            f"position {len(recent) - 1} depends on the positions after it, so a shorter "
            "context cannot be read from a padded window: the model is not causal. Give a "
            f"prompt of at least {window} tokens, or build the model with input_shape=(None,) "
            "(any length)"
        )


def _draw(p: np.ndarray, temperature: float, top_k: int | None, rng: np.random.Generator) -> int:
    """One token from probabilities ``p``, at ``temperature`` and cut to ``top_k``."""
    if temperature == 0:
        return int(np.argmax(p))
    with np.errstate(divide="ignore"):
        logits = np.log(p) / temperature
    if top_k is not None and top_k < len(p):
        cut = np.partition(logits, -top_k)[-top_k]
        logits = np.where(logits >= cut, logits, -np.inf)
    logits -= logits.max()
    w = np.exp(logits)
    return int(rng.choice(len(p), p=w / w.sum()))
