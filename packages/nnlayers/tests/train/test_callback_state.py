"""The callbacks' state protocol: state_dict()/load_state_dict(), stored by Checkpoint and
handed back on resume after on_train_begin, so that a resumed run goes on as if never
stopped (the killed-process version: test_resume_killed.py)."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

from nnlayers.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from nnlayers.layers import Affine, Sequential
from nnlayers.models import Classifier
from nnlayers.optim import SGD
from nnlayers.train import (
    Callback,
    Checkpoint,
    EarlyStopping,
    ModelCheckpoint,
    ReduceLROnPlateau,
    fit,
    read_metadata,
)
from nnlayers.train.checkpoints import resume


def _data(n=64, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 2)).astype(np.float32)
    return x, (x[:, 0] + 0.3 * x[:, 1] > 0).astype(np.int64)


def _batches(x, y, size=16):
    return [(x[i : i + size], y[i : i + size]) for i in range(0, len(x), size)]


def _classifier(seed=0):
    net = Sequential([Affine(8, activation="tanh"), Affine(2)], seed=seed)
    return Classifier(net, (2,), optimizer=SGD(0.5))


def _values(model):
    return [p.numpy() for p in [*model.params, *model.buffers]]


class Interrupt(Callback):
    """Ctrl-C at the start of epoch ``at``: after the checkpoint of the epoch before."""

    def __init__(self, at: int) -> None:
        self.at = at

    def on_epoch_begin(self, epoch: int) -> None:
        if epoch == self.at:
            raise KeyboardInterrupt


class Tally(Callback):
    """A custom stateful callback: a running sum, an array and an infinity, reset at train
    begin (as EarlyStopping is)."""

    def __init__(self, key: str | None = None) -> None:
        self.state_key = key
        self.total = 0.0
        self.seen = np.zeros(3, np.float32)
        self.low = math.inf

    def on_train_begin(self) -> None:
        self.total, self.seen, self.low = 0.0, np.zeros(3, np.float32), math.inf

    def on_epoch_end(self, epoch: int, logs) -> None:
        self.total += logs["loss"]
        self.seen = self.seen + np.float32(epoch)
        self.low = min(self.low, logs["loss"])

    def state_dict(self):
        return {"total": self.total, "nested": {"seen": self.seen.copy()}, "low": self.low}

    def load_state_dict(self, state) -> None:
        self.total, self.low = state["total"], state["low"]
        self.seen = np.asarray(state["nested"]["seen"]).copy()


def _stopping():  # min_delta: no epoch after the first improves, so it stops after epoch 3
    return EarlyStopping("loss", patience=2, min_delta=10.0)


@pytest.mark.parametrize("order", ["stopping first", "checkpoint first"])
def test_early_stopping_resumes_as_if_never_interrupted(tmp_path, order) -> None:
    x, y = _data()
    straight, stopping = _classifier(), _stopping()
    fit(straight, _batches(x, y), epochs=10, callbacks=[stopping], progress=False)
    assert stopping.stopped_epoch == 3 and stopping.best_epoch == 1

    path = tmp_path / "run.safetensors"

    def callbacks(stop, *more):
        pair = [stop, Checkpoint(path, resume=True)]
        return [*(pair if order == "stopping first" else pair[::-1]), *more]

    with pytest.raises(KeyboardInterrupt):
        fit(_classifier(), _batches(x, y), epochs=10, callbacks=callbacks(_stopping(),
            Interrupt(3)), progress=False)  # fmt: skip
    assert read_metadata(path)["epoch"] == 2
    resumed, again = _classifier(seed=4), _stopping()
    history = fit(resumed, _batches(x, y), epochs=10, callbacks=callbacks(again), progress=False)
    assert history.epochs == [1, 2, 3] and again.stopped_epoch == 3 and again.best_epoch == 1
    assert history["loss"] == straight.history["loss"]
    for a, b in zip(_values(straight), _values(resumed)):  # epoch 1's, put back
        np.testing.assert_array_equal(a, b)

    # a run that had stopped stays stopped: run the script again, nothing trains
    third, stays = _classifier(seed=5), _stopping()
    fit(third, _batches(x, y), epochs=10, callbacks=callbacks(stays), progress=False)
    assert third.epoch == 3 and stays.stopped_epoch == 3 and len(third.history) == 3
    for a, b in zip(_values(straight), _values(third)):
        np.testing.assert_array_equal(a, b)


def test_a_custom_callback_opts_in_and_the_file_holds_its_state_after_the_epoch(tmp_path) -> None:
    x, y = _data()
    straight = Tally()
    fit(_classifier(), _batches(x, y), epochs=4, callbacks=[straight], progress=False)

    path = tmp_path / "run.safetensors"
    with pytest.raises(KeyboardInterrupt):  # the checkpoint comes first: it still saves the
        fit(_classifier(), _batches(x, y), epochs=4,  # tally after the tally's epoch end
            callbacks=[Checkpoint(path), Tally(), Interrupt(3)], progress=False)  # fmt: skip
    tensors, meta = load_checkpoint(path)
    np.testing.assert_array_equal(tensors["callback/Tally/nested/seen"], [3, 3, 3])
    tally = Tally()
    fit(_classifier(), _batches(x, y), epochs=4, callbacks=[Checkpoint(path, resume=True), tally],
        progress=False)  # fmt: skip
    assert tally.total == straight.total and tally.low == straight.low
    np.testing.assert_array_equal(tally.seen, straight.seen)
    assert isinstance(meta["callbacks"], str) and '"Tally"' in meta["callbacks"]


def test_keys_are_class_names_numbered_or_the_state_key(tmp_path) -> None:
    x, y = _data()
    path = tmp_path / "run.safetensors"
    fit(_classifier(), _batches(x, y), epochs=1, progress=False,
        callbacks=[Checkpoint(path), Tally(), Tally(), Tally("mine")])  # fmt: skip
    assert read_metadata(path)["callbacks"].count('"total"') == 3
    states = resume(_classifier(), path)
    assert states is not None and sorted(states) == ["Tally", "Tally#2", "mine"]
    with pytest.raises(ValueError, match="two callbacks have the state key 'mine'"):
        fit(_classifier(), _batches(x, y), epochs=1, callbacks=[Tally("mine"), Tally("mine")],
            progress=False)  # fmt: skip


def test_a_resume_names_callbacks_without_saved_state_and_states_without_callback(
    tmp_path,
) -> None:
    x, y = _data()
    path = tmp_path / "run.safetensors"
    fit(_classifier(), _batches(x, y), epochs=1, callbacks=[Checkpoint(path), Tally()],
        progress=False)  # fmt: skip
    with pytest.warns(UserWarning, match=r"state of the callback Tally, not passed to this run"):
        fit(_classifier(), _batches(x, y), epochs=2, callbacks=[Checkpoint(path, resume=True)],
            progress=False)  # fmt: skip
    model = _classifier()
    fit(model, _batches(x, y), epochs=1, progress=False)
    old = model.save(tmp_path / "old.safetensors")  # no callback states in it
    with pytest.warns(UserWarning, match=r"no state for the callback EarlyStopping, Tally"):
        fit(_classifier(), _batches(x, y), epochs=2, progress=False,
            callbacks=[Checkpoint(old, resume=True), EarlyStopping("loss"), Tally()])  # fmt: skip


def test_early_stopping_ignores_a_state_of_another_monitor(tmp_path) -> None:
    x, y = _data()
    path = tmp_path / "run.safetensors"
    fit(_classifier(), _batches(x, y), epochs=1, callbacks=[Checkpoint(path), _stopping()],
        progress=False)  # fmt: skip
    other = EarlyStopping("accuracy")
    with pytest.warns(UserWarning) as caught:
        fit(_classifier(), _batches(x, y), epochs=1, progress=False,
            callbacks=[Checkpoint(path, resume=True), other])  # fmt: skip
    said = [str(w.message) for w in caught]
    assert any("monitor='loss', mode='min'; it is ignored" in m for m in said), said
    assert any("nothing to train" in m for m in said), said  # the run is complete
    assert other.best == -math.inf and other.best_epoch == 0


def test_a_best_only_checkpoint_takes_its_best_back_from_the_resumed_file(tmp_path) -> None:
    x, y = _data()
    last, best = tmp_path / "last.safetensors", tmp_path / "best.safetensors"

    def keeper():
        return ModelCheckpoint(best, monitor="loss", save_best_only=True)

    first = keeper()
    fit(_classifier(), _batches(x, y), epochs=3, progress=False,
        callbacks=[Checkpoint(last, resume=True), first])  # fmt: skip
    assert read_metadata(last)["epoch"] == 3
    again = keeper()
    with pytest.warns(UserWarning, match="nothing to train: the model is at epoch 3"):
        fit(_classifier(), _batches(x, y), epochs=3, progress=False,
            callbacks=[Checkpoint(last, resume=True), again])  # fmt: skip
    assert again.best == first.best < math.inf  # no epoch ran: it came from last's file


def test_reduce_lr_and_early_stopping_resume_together(tmp_path) -> None:
    x, y = _data()
    settings = {"factor": 0.5, "patience": 1, "min_delta": 10.0}

    def callbacks(*more):
        return [ReduceLROnPlateau("loss", **settings), EarlyStopping("loss", patience=4,
                min_delta=10.0), Checkpoint(path, resume=True), *more]  # fmt: skip

    path = tmp_path / "straight.safetensors"
    straight = _classifier()
    fit(straight, _batches(x, y), epochs=10, callbacks=callbacks(), progress=False)
    assert len(straight.history) == 5
    path = tmp_path / "run.safetensors"
    with pytest.raises(KeyboardInterrupt):
        fit(_classifier(), _batches(x, y), epochs=10, callbacks=callbacks(Interrupt(4)),
            progress=False)  # fmt: skip
    resumed = _classifier(seed=2)
    fit(resumed, _batches(x, y), epochs=10, callbacks=callbacks(), progress=False)
    assert resumed.history["lr"] == straight.history["lr"]
    assert resumed.history["loss"] == straight.history["loss"]
    for a, b in zip(_values(straight), _values(resumed)):
        np.testing.assert_array_equal(a, b)


def test_states_are_checked_when_saved_and_when_read(tmp_path) -> None:
    x, y = _data()

    class Bad(Callback):
        def state_dict(self):
            return {"when": object()}

    class NoLoad(Callback):
        def state_dict(self):
            return {"n": 1}

    path = tmp_path / "run.safetensors"
    with pytest.raises(TypeError, match=r"callback Bad: state_dict\(\) entry 'when' is a object"):
        fit(_classifier(), _batches(x, y), epochs=1, callbacks=[Checkpoint(path), Bad()],
            progress=False)  # fmt: skip
    fit(_classifier(), _batches(x, y), epochs=1, callbacks=[Checkpoint(path), NoLoad()],
        progress=False)  # fmt: skip
    with pytest.raises(NotImplementedError, match="does not override load_state_dict"):
        fit(_classifier(), _batches(x, y), epochs=1, progress=False,
            callbacks=[Checkpoint(path, resume=True), NoLoad()])  # fmt: skip

    fit(_classifier(), _batches(x, y), epochs=1, callbacks=[Checkpoint(path), _stopping()],
        progress=False)  # fmt: skip
    tensors, meta = load_checkpoint(path)
    assert any(k.startswith("callback/EarlyStopping/weights/") for k in tensors)
    restored = _classifier(seed=3).restore(path)  # restore() takes a file with callback state
    assert restored.epoch == 1
    bad = tmp_path / "bad.safetensors"
    for text, reason in [
        ("[1]", "not a JSON object"),
        ('{"EarlyStopping": {"w": {"__tensor__": "callback/gone"}}}', "which the file lacks"),
        ("{", "not valid JSON"),
    ]:
        save_checkpoint(bad, tensors, {**meta, "callbacks": text})
        model = _classifier(seed=8)
        before = _values(model)
        with pytest.raises(CheckpointError, match=reason):
            resume(model, bad)
        assert model.epoch == 0
        for a, b in zip(before, _values(model)):
            np.testing.assert_array_equal(a, b)


def test_the_resuming_snippet_of_the_docs_runs(tmp_path, monkeypatch, capsys) -> None:
    page = Path(__file__).parents[2] / "docs" / "training.md"
    section = re.split(r"\n##+ ", page.read_text(encoding="utf-8").split("### Resuming\n")[1])[0]
    (block,) = re.findall(r"^```python\n(.*?)^```", section, re.S | re.M)
    monkeypatch.chdir(tmp_path)
    exec(compile(block, str(page), "exec"), {"__name__": "snippet"})
    assert capsys.readouterr().out == "[1, 2, 3, 4, 5, 6]\n"
