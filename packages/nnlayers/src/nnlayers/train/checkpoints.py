"""Save and resume a training run: parameters, buffers, optimiser state, epoch and history.

One safetensors file (see :mod:`nnlayers.checkpoint`: atomic writes, a checksum, loadable on any
backend) holds everything a run needs to continue:

- ``model/<parameter name>``: every parameter and buffer (batch-norm statistics);
- ``optimizer/<name>/<parameter name>/<slot>``: each optimiser's state (``name`` is
  ``optimizer``, or ``discriminator`` and ``generator`` for a GAN), with its class and step
  count in the metadata;
- metadata ``epoch`` (epochs completed), ``history`` (JSON) and ``model`` (the class name);
  a best-only :class:`~nnlayers.train.Checkpoint` adds ``checkpoint.monitor``,
  ``checkpoint.mode`` and ``checkpoint.best`` (the value it saved on), so that a resumed run
  never replaces the file with a worse model;
- metadata ``callbacks`` (JSON: callback key -> its :meth:`~nnlayers.train.Callback.state_dict`)
  and ``callback/<key>/<path>`` tensors for the arrays in those states (an
  :class:`~nnlayers.train.EarlyStopping`'s best weights), where a JSON value
  ``{"__tensor__": "callback/..."}`` stands for each; :func:`resume` returns them.

:func:`restore` checks the whole file against the model before it changes anything, so a file
that does not fit (another architecture, another optimiser, a corrupt or truncated file,
malformed metadata such as a ``history`` that is not a JSON list of records) raises
:class:`~nnlayers.checkpoint.CheckpointError` naming the file and what is wrong, and leaves the
model, its optimisers and its epoch counter as they were.

>>> import numpy as np, os, tempfile
>>> from nnlayers.layers import Affine
>>> from nnlayers.models import Regressor
>>> from nnlayers.optim import Adam
>>> model = Regressor(Affine(1, seed=0), (2,), optimizer=Adam(0.1))
>>> _ = model.train_step((np.ones((4, 2), "float32"), np.zeros((4, 1), "float32")))
>>> model.epoch = 1
>>> path = save(model, os.path.join(tempfile.mkdtemp(), "run.safetensors"))
>>> fresh = Regressor(Affine(1, seed=5), (2,), optimizer=Adam(0.1))
>>> restore(fresh, path).epoch, fresh.optimizer.step_count
(1, 1)
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from ..checkpoint import (
    _DIGEST_KEY,
    CheckpointError,
    _check_source,
    _decode_metadata,
    _json_type,
    _read_header,
    load_checkpoint,
    restore_into,
    save_checkpoint,
)
from .history import History

_MODEL = "model/"
_OPTIMIZER = "optimizer/"
_CALLBACK = "callback/"
_TENSOR = "__tensor__"


def save(
    model: Any,
    path: str | Path,
    *,
    extra: Mapping[str, Any] | None = None,
    callbacks: Mapping[str, Mapping[str, Any]] | None = None,
) -> Path:
    """Write ``model`` (parameters, buffers, optimisers, epoch, history) to ``path``.

    ``extra``: more metadata entries (str, int, float or bool values), such as the best
    monitored value a :class:`~nnlayers.train.Checkpoint` keeps (``checkpoint.best``); read
    them back with :func:`read_metadata`. ``callbacks``: callback key -> the callback's
    :meth:`~nnlayers.train.Callback.state_dict` (JSON values and arrays), which
    :func:`resume` gives back.
    """
    tensors: dict[str, Any] = {
        f"{_MODEL}{p.name}": p.value for p in [*model.params, *model.buffers]
    }
    if callbacks is not None:
        text, arrays = _pack_callbacks(callbacks)
        tensors.update(arrays)
    metadata: dict[str, Any] = {**(extra or {})}
    metadata.update(model=type(model).__name__, epoch=int(model.epoch))
    for name, optimizer in model.optimizers().items():
        state = optimizer.state_dict()
        metadata[f"optimizer.{name}.class"] = state["optimizer"]
        metadata[f"optimizer.{name}.step"] = int(state["step"])
        for key, array in state["arrays"].items():
            tensors[f"{_OPTIMIZER}{name}/{key}"] = array
    history = getattr(model, "history", None)
    if isinstance(history, History):
        metadata["history"] = history.to_json()
    if callbacks is not None:
        metadata["callbacks"] = text
    scaler = getattr(model, "loss_scaler", None)
    if scaler is not None:  # mixed precision: the loss scale resumes where it was
        metadata["loss_scale"] = float(scaler.scale)
        metadata["loss_scale.good_steps"] = int(scaler.good_steps)
        metadata["loss_scale.skipped"] = int(scaler.skipped)
    return save_checkpoint(path, tensors, metadata)


def read_metadata(path: str | Path) -> dict[str, Any]:
    """The metadata of the checkpoint ``path`` (epoch, history, optimiser classes and steps,
    ``extra`` entries), read from its header alone: the tensors are neither read nor checked.
    """
    source = Path(path)

    def fail(reason: str) -> CheckpointError:
        return CheckpointError(f"checkpoint {source}: {reason}")

    _check_source(source)
    header, _ = _read_header(source, fail)
    raw = header.get("__metadata__") or {}
    if not isinstance(raw, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in raw.items()
    ):
        raise fail("corrupt header (__metadata__ must map str to str)")
    raw = {k: v for k, v in raw.items() if k != _DIGEST_KEY}
    return _decode_metadata(raw, fail)


def resume(model: Any, path: str | Path) -> dict[str, dict[str, Any]] | None:
    """:func:`restore` ``path`` into ``model`` and return the callbacks' states the file holds
    (callback key -> state, arrays as host NumPy arrays), or ``None`` for a file written
    without them. Malformed states raise before anything about the model changes."""
    return _restore(model, path, weights_only=False)[1]


def restore(model: Any, path: str | Path, *, weights_only: bool = False) -> Any:
    """Load ``path`` into ``model``: parameters and buffers, and unless ``weights_only`` also
    the optimisers' state, the epoch counter and the history. Returns ``model``.

    The state of optimisers the model does not have is ignored (a model without an optimiser
    loads a training checkpoint for prediction); a model optimiser without saved state is an
    error, since training could not resume as it was.

    Raises ``FileNotFoundError`` for a missing file,
    :class:`nnlayers.checkpoint.CheckpointError` for one that is corrupt or does not fit, and
    :class:`nnlayers.checkpoint.CheckpointIOError` (both a ``CheckpointError`` and an
    ``OSError``) for one the OS does not let nnlayers read; in each case nothing about the
    model has changed.
    """
    return _restore(model, path, weights_only=weights_only)[0]


def _restore(
    model: Any, path: str | Path, *, weights_only: bool
) -> tuple[Any, dict[str, dict[str, Any]] | None]:
    tensors, metadata = load_checkpoint(path)
    weights = {k[len(_MODEL) :]: v for k, v in tensors.items() if k.startswith(_MODEL)}
    others = [k for k in tensors if not k.startswith((_MODEL, _OPTIMIZER, _CALLBACK))]
    if others:
        raise CheckpointError(
            f"checkpoint {path} is not a training checkpoint of nnlayers (unexpected entries "
            f"{', '.join(repr(k) for k in others[:5])})"
        )
    targets = {str(p.name): p.value for p in [*model.params, *model.buffers]}
    _check_weights(targets, weights, path)
    states: dict[str, dict[str, Any]] = {}
    callbacks = None
    if not weights_only:
        callbacks = _callback_states(metadata.get("callbacks"), tensors, path)
        states = _optimizer_states(model, tensors, metadata, path)
        for name, state in states.items():  # a dry run on a copy: raises before any change
            trial = copy.deepcopy(model.optimizers()[name])
            trial.bind(model.optimizers()[name].params)
            _load(trial, state, name, path)
        epoch = metadata.get("epoch", 0)
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
            raise CheckpointError(
                f"checkpoint {path}: bad epoch {epoch!r} in its metadata (an int >= 0)"
            )
        history = _history(metadata.get("history"), path)
        scale = _loss_scale(model, metadata, path)
    restore_into(targets, weights, path)
    if not weights_only:
        for name, state in states.items():
            _load(model.optimizers()[name], state, name, path)
        model.epoch = epoch
        model.resumed = True  # the next fit's epochs= counts from the start of this run
        model.history = history
        if scale is not None:
            model.loss_scaler.scale, model.loss_scaler.good_steps = scale[0], scale[1]
            model.loss_scaler.skipped = scale[2]
    return model, callbacks


def _pack_callbacks(
    states: Mapping[str, Mapping[str, Any]],
) -> tuple[str, dict[str, Any]]:
    """The JSON text of the callbacks' states, with each array replaced by a reference to a
    ``callback/...`` tensor, and those tensors."""
    tensors: dict[str, Any] = {}

    def pack(value: Any, key: str, where: list[str]) -> Any:
        if isinstance(value, np.generic):
            value = value.item()
        if value is None or isinstance(value, str | bool | int | float):
            return value
        if isinstance(value, Mapping):
            if not all(isinstance(k, str) for k in value):
                raise TypeError(
                    f"callback {key}: state_dict() entry {'/'.join(where) or '(top)'} has keys "
                    "that are not str"
                )
            if _TENSOR in value:
                raise TypeError(f"callback {key}: state_dict() uses the reserved key {_TENSOR!r}")
            return {k: pack(v, key, [*where, k]) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [pack(v, key, [*where, str(i)]) for i, v in enumerate(value)]
        if hasattr(value, "shape") and hasattr(value, "dtype"):  # an array of any backend
            name = f"{_CALLBACK}{key}/{'/'.join(where)}"
            while name in tensors:
                name += "_"
            tensors[name] = value
            return {_TENSOR: name}
        raise TypeError(
            f"callback {key}: state_dict() entry {'/'.join(where)!r} is a "
            f"{type(value).__name__}; a state holds JSON values (str, numbers, bool, None, "
            "lists, dicts) and arrays"
        )

    packed = {str(key): pack(dict(state), str(key), []) for key, state in states.items()}
    return json.dumps(packed), tensors


def _callback_states(
    text: Any, tensors: Mapping[str, Any], path: Any
) -> dict[str, dict[str, Any]] | None:
    """The callbacks' states stored in the metadata (``None`` if there is none), with their
    arrays put back, or a :class:`CheckpointError` saying what is wrong."""
    if text is None:
        return None

    def fail(reason: str) -> CheckpointError:
        return CheckpointError(f"checkpoint {path}: metadata 'callbacks' {reason}")

    if not isinstance(text, str):
        raise fail(f"is {text!r:.60}, not the JSON text of the callbacks' states")
    try:
        states = json.loads(text)
    except (ValueError, RecursionError) as exc:
        reason = str(exc) or type(exc).__name__
        raise fail(f"is not valid JSON ({reason[:200]})") from exc
    if not isinstance(states, dict) or not all(isinstance(s, dict) for s in states.values()):
        raise fail("is not a JSON object of one object (a state) per callback")

    def unpack(value: Any) -> Any:
        if isinstance(value, dict):
            if set(value) == {_TENSOR}:
                name = value[_TENSOR]
                if not isinstance(name, str) or not name.startswith(_CALLBACK):
                    raise fail(f"refers to {name!r}, not a callback tensor")
                if name not in tensors:
                    raise fail(f"refers to the tensor {name!r}, which the file lacks")
                return tensors[name]
            return {k: unpack(v) for k, v in value.items()}
        if isinstance(value, list):
            return [unpack(v) for v in value]
        return value

    return {key: unpack(state) for key, state in states.items()}


def _loss_scale(model: Any, metadata: dict[str, Any], path: Any) -> tuple[float, int, int] | None:
    """The saved loss scale, good-step and skipped-step counts for a model with a loss scaler
    (``None`` without one, or for a checkpoint saved without mixed precision)."""
    if getattr(model, "loss_scaler", None) is None or "loss_scale" not in metadata:
        return None
    scale = metadata["loss_scale"]
    counts = [metadata.get("loss_scale.good_steps", 0), metadata.get("loss_scale.skipped", 0)]
    if (
        isinstance(scale, bool)
        or not isinstance(scale, int | float)
        or not 0 < scale < float("inf")
        or any(isinstance(c, bool) or not isinstance(c, int) or c < 0 for c in counts)
    ):
        raise CheckpointError(
            f"checkpoint {path}: bad loss scale {scale!r} or counts {counts!r} in its metadata "
            "(a positive finite number and ints >= 0)"
        )
    return float(scale), counts[0], counts[1]


def _check_weights(targets: dict[str, Any], weights: dict[str, Any], path: Any) -> None:
    problems = []
    for name, target in targets.items():
        if name not in weights:
            problems.append(f"{name!r} is missing")
            continue
        got = (tuple(weights[name].shape), np.dtype(weights[name].dtype))
        want = (tuple(target.shape), np.dtype(target.dtype))
        if got != want:
            problems.append(
                f"{name!r} is {got[1].name}{list(got[0])} in the file but "
                f"{want[1].name}{list(want[0])} in the model"
            )
    extra = sorted(set(weights) - set(targets))
    if extra:
        problems.append("unexpected parameters " + ", ".join(repr(n) for n in extra))
    if problems:
        raise CheckpointError(
            f"checkpoint {path} does not fit this model (nothing was changed): "
            + "; ".join(problems)
        )


def _optimizer_states(
    model: Any, tensors: dict[str, Any], metadata: dict[str, Any], path: Any
) -> dict[str, dict[str, Any]]:
    optimizers = model.optimizers()
    saved = {k.split(".")[1] for k in metadata if k.startswith("optimizer.") and k.count(".") >= 2}
    missing = sorted(set(optimizers) - saved)
    if missing:
        raise CheckpointError(
            f"checkpoint {path} does not fit this model (nothing was changed): no state for "
            f"the model's optimizer {', '.join(map(repr, missing))} "
            "(restore(..., weights_only=True) loads the parameters alone)"
        )
    states = {}
    for name in optimizers:
        prefix = f"{_OPTIMIZER}{name}/"
        kind = metadata.get(f"optimizer.{name}.class")
        if not isinstance(kind, str):
            what = "no" if kind is None else f"a bad ({kind!r})"
            raise CheckpointError(
                f"checkpoint {path}: {what} metadata 'optimizer.{name}.class' (the optimizer's "
                f"class name) for the state of optimizer {name!r}"
            )
        states[name] = {
            "optimizer": kind,
            "step": metadata.get(f"optimizer.{name}.step", 0),
            "arrays": {k[len(prefix) :]: v for k, v in tensors.items() if k.startswith(prefix)},
        }
    return states


def _load(optimizer: Any, state: dict[str, Any], name: str, path: Any) -> None:
    try:
        optimizer.load_state_dict(state)
    except ValueError as exc:
        raise CheckpointError(
            f"checkpoint {path}: the state of optimizer {name!r} does not fit (nothing was "
            f"changed): {exc}"
        ) from exc


def _history(text: Any, path: Any) -> History:
    """The history stored in the metadata: JSON, a list of per-epoch records (objects whose
    values are numbers), or a :class:`CheckpointError` saying what is wrong with it."""
    if text is None:
        return History()

    def fail(reason: str) -> CheckpointError:
        return CheckpointError(f"checkpoint {path}: metadata 'history' {reason}")

    if not isinstance(text, str):
        raise fail(f"is {text!r:.60}, not the JSON text of the records")
    try:
        records = json.loads(text)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, or an oversized integer
        reason = str(exc) or type(exc).__name__
        raise fail(f"is not valid JSON ({reason[:200]})") from exc
    if not isinstance(records, list):
        raise fail(f"is a JSON {_json_type(records)}, not a list of per-epoch records")
    for i, record in enumerate(records):
        if not isinstance(record, dict):
            raise fail(f"record {i} is a JSON {_json_type(record)}, not an object")
        for key, value in record.items():
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise fail(f"record {i}: {key!r} is a JSON {_json_type(value)}, not a number")
        epoch = record.get("epoch", 1)
        if not isinstance(epoch, int) or epoch < 1:
            raise fail(f"record {i}: epoch {epoch!r} is not an int >= 1")
    return History(records)


class IncompatibleKeys(NamedTuple):
    """What :func:`load_weights` with ``strict=False`` left out (PyTorch's ``missing_keys`` and
    ``unexpected_keys``): the model's parameters the file has no entry for (they keep their
    values) and the file's entries the model has no parameter for (ignored)."""

    missing: list[str]
    unexpected: list[str]


def load_weights(model: Any, path: str | Path, *, strict: bool = True) -> IncompatibleKeys:
    """Load only the parameters and buffers of the checkpoint ``path`` into ``model`` (no
    optimiser state, epoch or history): the pretrained weights for fine-tuning.

    With ``strict=True`` the file must hold exactly the model's parameters. With
    ``strict=False`` (a model that differs in some layers: a new classifier head, a layer
    added or removed) the names both have are loaded and the rest are reported in the returned
    :class:`IncompatibleKeys`. A name both have with another shape or dtype is a
    :class:`~nnlayers.checkpoint.CheckpointError` naming it either way, and on any error
    nothing in the model has changed.
    """
    tensors, _ = load_checkpoint(path)
    weights = {k[len(_MODEL) :]: v for k, v in tensors.items() if k.startswith(_MODEL)}
    if not weights and tensors:
        raise CheckpointError(
            f"checkpoint {path} holds no model weights (no 'model/...' entries); it was not "
            "written by nnlayers.train.save or Model.save"
        )
    targets = {str(p.name): p.value for p in [*model.params, *model.buffers]}
    missing = sorted(set(targets) - set(weights))
    unexpected = sorted(set(weights) - set(targets))
    if strict:
        _check_weights(targets, weights, path)
    else:
        targets = {k: v for k, v in targets.items() if k in weights}
        _check_weights(targets, {k: weights[k] for k in targets}, path)
    restore_into(targets, weights, path, strict=False)
    return IncompatibleKeys(missing, unexpected)
