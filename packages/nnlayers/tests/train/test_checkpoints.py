"""Checkpoints: round trips, bad files that change nothing, and resuming as if never stopped."""

from __future__ import annotations

import numpy as np
import pytest

from nnlayers.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from nnlayers.feeds import Feed
from nnlayers.layers import Affine, BatchNorm, Dropout, Sequential
from nnlayers.models import GAN, Classifier
from nnlayers.optim import SGD, Adam
from nnlayers.train import Checkpoint, fit, restore, save


def _data(n=96, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, size=n)
    x = (rng.normal(size=(n, 4)) + np.eye(3, 4)[y] * 2.0).astype(np.float32)
    return x, y.astype(np.int64)


def Shuffled(x, y):  # noqa: N802 - reads like the class it stands for
    """Reshuffled each epoch from (seed, epoch) only: resumable."""
    return Feed(x, y, batch_size=16, seed=0)


def _model(seed=0, optimizer=None, width=8):
    net = Sequential(
        [Affine(width, activation="relu"), BatchNorm(), Dropout(0.2), Affine(3)], seed=seed
    )
    return Classifier(net, (4,), optimizer=optimizer or Adam(0.01))


def _values(model):
    return [p.numpy() for p in [*model.params, *model.buffers]]


def test_round_trip_restores_weights_optimizer_epoch_and_history(tmp_path) -> None:
    x, y = _data()
    model = _model()
    fit(model, Shuffled(x, y), epochs=2, progress=False)
    path = model.save(tmp_path / "run.safetensors")
    tensors, meta = load_checkpoint(path)
    assert meta["epoch"] == 2 and meta["model"] == "Classifier"
    assert "model/affine/weight" in tensors and "optimizer/optimizer/affine/weight/m" in tensors
    other = _model(seed=1)
    other.restore(path)
    for a, b in zip(_values(model), _values(other)):
        np.testing.assert_array_equal(a, b)
    assert other.epoch == 2 and other.history.records == model.history.records
    assert other.optimizer.step_count == model.optimizer.step_count == 12
    state, again = model.optimizer.state_dict(), other.optimizer.state_dict()
    for key, value in state["arrays"].items():
        np.testing.assert_array_equal(
            model.xp.to_numpy(value), other.xp.to_numpy(again["arrays"][key])
        )


def test_resume_gives_the_parameters_of_an_uninterrupted_run(tmp_path) -> None:
    x, y = _data()
    straight = _model()
    fit(straight, Shuffled(x, y), epochs=4, progress=False)

    path = tmp_path / "run.safetensors"
    first = _model()
    fit(first, Shuffled(x, y), epochs=2, callbacks=[Checkpoint(path)], progress=False)
    resumed = _model(seed=9)  # another start: everything comes from the file
    checkpoint = Checkpoint(path, resume=True)
    history = fit(resumed, Shuffled(x, y), epochs=4, callbacks=[checkpoint], progress=False)
    assert checkpoint.resumed_from == 2 and checkpoint.saved == [3, 4]
    assert history.epochs == [1, 2, 3, 4]
    for a, b in zip(_values(straight), _values(resumed)):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(history["loss"], straight.history["loss"], rtol=1e-6)


def test_a_mismatched_file_leaves_the_model_unchanged(tmp_path) -> None:
    x, y = _data()
    small = _model()
    fit(small, Shuffled(x, y), epochs=1, progress=False)
    path = small.save(tmp_path / "small.safetensors")
    wider = _model(width=16)
    fit(wider, Shuffled(x, y), epochs=1, progress=False)
    before, step = _values(wider), wider.optimizer.step_count
    with pytest.raises(CheckpointError, match=r"'affine/weight' is float32\[4, 8\] in the file"):
        wider.restore(path)
    other_optimizer = _model(optimizer=SGD(0.1, momentum=0.9))
    with pytest.raises(CheckpointError, match="optimizer 'optimizer' does not fit"):
        other_optimizer.restore(path)
    for model in (wider, other_optimizer):
        assert model.epoch == (1 if model is wider else 0)
    for a, b in zip(before, _values(wider)):
        np.testing.assert_array_equal(a, b)
    assert wider.optimizer.step_count == step
    other_optimizer.restore(path, weights_only=True)  # the weights alone do fit
    assert other_optimizer.epoch == 0


def test_bad_files_raise_clear_errors_and_change_nothing(tmp_path) -> None:
    model = _model()
    before = _values(model)
    with pytest.raises(FileNotFoundError, match="no such file"):
        restore(model, tmp_path / "absent.safetensors")
    path = save(model, tmp_path / "ok.safetensors")
    data = path.read_bytes()
    (tmp_path / "cut.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="truncated"):
        restore(model, tmp_path / "cut.safetensors")
    flipped = bytearray(data)
    flipped[-3] ^= 0xFF
    (tmp_path / "flip.safetensors").write_bytes(bytes(flipped))
    with pytest.raises(CheckpointError, match="SHA-256"):
        restore(model, tmp_path / "flip.safetensors")
    save_checkpoint(tmp_path / "other.safetensors", {"weights": np.zeros(3)})
    with pytest.raises(CheckpointError, match="not a training checkpoint"):
        restore(model, tmp_path / "other.safetensors")
    for a, b in zip(before, _values(model)):
        np.testing.assert_array_equal(a, b)


def test_a_gan_saves_and_restores_both_optimizers(tmp_path) -> None:
    def gan(seed):
        return GAN(
            Affine(1, seed=seed), Affine(1, seed=seed + 1), (1,), noise_dim=2,
            optimizer=Adam(0.01),
        )  # fmt: skip

    a = gan(0)
    a.train_step((np.ones((8, 1), np.float32),))
    b = gan(5)
    b.restore(a.save(tmp_path / "gan.safetensors"))
    assert b.optimizers()["generator"].step_count == 1
    for p, q in zip(a.params, b.params):
        np.testing.assert_array_equal(p.numpy(), q.numpy())


def test_checkpoint_callback_every_and_best_only(tmp_path) -> None:
    x, y = _data()
    every = Checkpoint(tmp_path / "every.safetensors", every=2)
    best = Checkpoint(tmp_path / "best.safetensors", monitor="loss", save_best_only=True)
    fit(_model(), Shuffled(x, y), epochs=5, callbacks=[every, best], progress=False)
    assert every.saved == [2, 4, 5]
    assert best.saved == sorted(best.saved) and best.saved[0] == 1
    with pytest.raises(ValueError, match="needs a monitor"):
        Checkpoint(tmp_path / "x.safetensors", save_best_only=True)


def test_a_model_without_an_optimizer_loads_a_training_checkpoint(tmp_path) -> None:
    x, y = _data()
    trained = _model()
    fit(trained, Shuffled(x, y), epochs=1, progress=False)
    path = trained.save(tmp_path / "run.safetensors")
    net = Sequential([Affine(8, activation="relu"), BatchNorm(), Dropout(0.2), Affine(3)], seed=4)
    for_prediction = Classifier(net, (4,)).restore(path)
    np.testing.assert_array_equal(for_prediction.predict(x), trained.predict(x))
    assert for_prediction.epoch == 1


def _with_metadata(path, **changes):
    """Rewrite the checkpoint at ``path`` (a valid file, checksum and all) with other metadata;
    ``None`` removes a key."""
    tensors, meta = load_checkpoint(path)
    meta.update(changes)
    save_checkpoint(path, tensors, {k: v for k, v in meta.items() if v is not None})
    return path


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"history": "[{'epoch': 1}"}, r"metadata 'history' is not valid JSON \(Expecting"),
        ({"history": "[" * 100_000}, r"metadata 'history' is not valid JSON"),
        ({"history": "1" * 5000}, r"metadata 'history' is not valid JSON \(.*digits"),
        ({"history": '{"loss": [1.0]}'}, "'history' is a JSON object, not a list of per-epoch"),
        ({"history": 3}, "'history' is 3, not the JSON text of the records"),
        ({"history": "[[1, 2]]"}, "'history' record 0 is a JSON array, not an object"),
        ({"history": '[{"epoch": 1, "loss": "low"}]'}, r"record 0: 'loss' is a JSON string, not"),
        ({"history": '[{"epoch": 0, "loss": 1}]'}, "record 0: epoch 0 is not an int >= 1"),
        ({"optimizer.optimizer.class": None}, r"no metadata 'optimizer\.optimizer\.class'"),
        ({"optimizer.optimizer.class": 3}, r"a bad \(3\) metadata 'optimizer\.optimizer\.class'"),
        ({"epoch": "2"}, r"bad epoch '2' in its metadata \(an int >= 0\)"),
    ],
)
def test_malformed_metadata_raises_a_checkpoint_error_naming_the_file(tmp_path, changes, message):
    x, y = _data()
    model = _model()
    fit(model, Shuffled(x, y), epochs=1, progress=False)
    path = _with_metadata(model.save(tmp_path / "run.safetensors"), **changes)
    fresh = _model(seed=3)
    before = _values(fresh)
    with pytest.raises(CheckpointError, match=rf"checkpoint .*run\.safetensors: .*{message}"):
        fresh.restore(path)
    assert fresh.epoch == 0 and not fresh.history and fresh.optimizer.step_count == 0
    for a, b in zip(before, _values(fresh)):
        np.testing.assert_array_equal(a, b)
    fresh.restore(path, weights_only=True)  # the weights alone are fine


def test_the_checkpoint_path_is_checked_before_the_first_epoch(tmp_path) -> None:
    x, y = _data()
    with pytest.raises(ValueError, match=r"Checkpoint: path '' is empty"):
        Checkpoint("")
    folder = tmp_path / "runs"
    folder.mkdir()
    for path, error, message in [
        (folder, IsADirectoryError, rf"checkpoint {folder}: is a folder, not a file"),
        (tmp_path / "absent" / "r.safetensors", FileNotFoundError, r"folder .*absent does not"),
    ]:
        model = _model()
        with pytest.raises(error, match=message):
            fit(model, Shuffled(x, y), epochs=2, callbacks=[Checkpoint(path)], progress=False)
        assert model.epoch == 0  # nothing was trained in vain
    assert list(folder.iterdir()) == []
