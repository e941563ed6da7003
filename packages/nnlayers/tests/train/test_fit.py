"""fit: epochs, history, validation, progress bar, host transfers only when shown, resuming."""

from __future__ import annotations

import numpy as np
import pytest

import arraycore
import nnlayers
from nnlayers.layers import Affine, Sequential
from nnlayers.models import Classifier, Regressor
from nnlayers.optim import SGD, Adam
from nnlayers.train import fit


def _blobs(n=64, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, size=n)
    x = (rng.normal(size=(n, 2)) + 2.0 * y[:, None] - 1.0).astype(np.float32)
    return x, y.astype(np.int64)


def _batches(x, y, size=16):
    return [(x[i : i + size], y[i : i + size]) for i in range(0, len(x), size)]


def _classifier(**options):
    net = Sequential([Affine(8, activation="tanh"), Affine(2)], seed=0)
    return Classifier(net, (2,), **options)


def test_fit_records_history_with_validation() -> None:
    x, y = _blobs()
    model = _classifier()
    history = fit(
        model, _batches(x, y), epochs=5, optimizer=Adam(0.05), validation=_blobs(32, 1),
        progress=False,
    )  # fmt: skip
    assert model.history is history and model.epoch == 5 and history.epochs == [1, 2, 3, 4, 5]
    memory = ["peak_device_mb"] if model.xp.__array_namespace_info__().memory_stats() else []
    assert history.keys() == [
        "loss", "accuracy", "time", "examples_per_second", *memory, "val_loss", "val_accuracy",
    ]  # fmt: skip
    assert history["loss"][-1] < history["loss"][0]
    assert history.last["val_accuracy"] > 0.9
    assert history.last["examples_per_second"] > 0
    # The epoch's mean loss is weighted by batch size (16, 16, 16, 16 here).
    fit(model, [(x[:10], y[:10]), (x[10:40], y[10:40])], epochs=1, progress=False)
    assert model.epoch == 6 and len(history) == 6


def test_a_second_fit_trains_more_epochs_and_fit_needs_an_optimizer() -> None:
    x, y = _blobs()
    model = _classifier()
    with pytest.raises(ValueError, match="has no optimizer"):
        fit(model, _batches(x, y), epochs=1)
    fit(model, _batches(x, y), epochs=2, optimizer=SGD(0.1), progress=False)
    fit(model, _batches(x, y), epochs=2, progress=False)  # Keras's second fit: two more
    assert model.epoch == 4 and len(model.history) == 4
    with pytest.warns(UserWarning, match="nothing to train: the model is at epoch 4"):
        fit(model, _batches(x, y), until_epoch=4, progress=False)
    fit(model, _batches(x, y), until_epoch=5, progress=False)
    assert model.history.epochs == [1, 2, 3, 4, 5]
    with pytest.raises(TypeError, match="not both"):
        fit(model, _batches(x, y), epochs=1, until_epoch=7, progress=False)
    with pytest.raises(ValueError, match="epochs must be >= 0"):
        fit(model, _batches(x, y), epochs=-1, progress=False)


def test_metrics_come_to_the_host_once_per_epoch_without_a_bar(monkeypatch) -> None:
    x, y = _blobs()
    model = _classifier(optimizer=SGD(0.1))
    calls = []
    to_numpy = model.xp.to_numpy
    monkeypatch.setattr(model.xp, "to_numpy", lambda a: calls.append(a.shape) or to_numpy(a))
    fit(model, _batches(x, y, 8), epochs=3, progress=False)
    assert calls == [(2, 8)] * 3  # one (metrics, steps) array per epoch


def test_the_progress_bar_shows_loss_and_throughput(capsys, monkeypatch) -> None:
    x, y = _blobs()
    model = _classifier(optimizer=SGD(0.1))
    calls = []
    to_numpy = model.xp.to_numpy
    monkeypatch.setattr(model.xp, "to_numpy", lambda a: calls.append(a.shape) or to_numpy(a))
    fit(model, _batches(x, y, 8), epochs=1, refresh=0.0)
    err = capsys.readouterr().err
    assert "epoch 1/1" in err and "ex/s" in err and "loss=" in err and "accuracy=" in err
    assert "64/64" in err
    assert len(calls) == 8  # refresh=0: shown after each of the 8 steps; nothing left at the end


def test_a_feed_with_set_epoch_hears_the_epoch() -> None:
    x, y = _blobs()

    class Feed:
        def __init__(self):
            self.epochs = []

        def set_epoch(self, epoch):
            self.epochs.append(epoch)

        def __iter__(self):
            return iter(_batches(x, y))

    feed = Feed()
    fit(_classifier(optimizer=SGD(0.1)), feed, epochs=3, progress=False)
    assert feed.epochs == [1, 2, 3]


def test_a_regressor_trains_with_fit() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(128, 3)).astype(np.float32)
    y = (x @ np.array([[1.0], [-1.0], [2.0]], np.float32)).astype(np.float32)
    model = Regressor(Affine(1, seed=0), (3,))
    history = fit(model, _batches(x, y, 32), epochs=20, optimizer=SGD(0.05, momentum=0.9),
                  progress=False)  # fmt: skip
    assert history.last["loss"] < 1e-2 < history["loss"][0]


def test_identical_runs_give_identical_parameters() -> None:
    x, y = _blobs()

    def run():
        net = Sequential([Affine(8, activation="relu"), nnlayers.Dropout(0.3), Affine(2)], seed=0)
        model = Classifier(net, (2,), optimizer=Adam(0.01))
        fit(model, _batches(x, y), epochs=3, progress=False)
        return [p.numpy() for p in model.params]

    for a, b in zip(run(), run()):
        np.testing.assert_array_equal(a, b)


def test_fit_with_a_feed_shows_its_size_and_sets_its_epoch(capsys) -> None:
    x, y = _blobs(100)
    feed = nnlayers.Feed(x, y, batch_size=32, seed=3)
    model = _classifier(optimizer=Adam(0.05))
    history = nnlayers.fit(model, feed, epochs=3, validation=nnlayers.Feed(x, y, shuffle=False))
    err = capsys.readouterr().err
    assert "100/100" in err and "epoch 3/3" in err and "val_accuracy=" in err
    assert feed.epoch == 4 and history.last["accuracy"] > 0.8


def test_fit_reports_peak_device_memory_where_the_backend_tracks_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A backend that reports device memory (CUDA: CuPy's pool) gets ``peak_device_mb`` in
    the epoch's logs and line; one that does not (NumPy) gets nothing."""
    x, y = _blobs()
    model = _classifier()
    info = model.xp.__array_namespace_info__()
    if info.memory_stats() is None:
        fit(model, _batches(x, y), epochs=1, optimizer=SGD(0.1), progress=False)
        assert "peak_device_mb" not in model.history.last
        # what a tracking backend's hook returns (a backend method, not a device, is replaced)
        monkeypatch.setattr(
            type(model.xp._backend),
            "memory_stats",
            lambda self: {"used_bytes": 1, "peak_bytes": 3 << 20},
        )
    fit(model, _batches(x, y), epochs=model.epoch + 1, optimizer=SGD(0.1), progress=True)
    peak = model.history.last["peak_device_mb"]
    captured = capsys.readouterr()
    assert peak > 0 and f"peak_device_mb={peak:.4g}" in captured.err + captured.out


class _LabelCheckProbe(nnlayers.train.Callback):
    """Records whether arraycore's per-batch label checks are on during each step."""

    def __init__(self) -> None:
        self.seen: list[bool] = []

    def on_train_batch_begin(self, step: int) -> None:
        self.seen.append(arraycore._checks.enabled("labels"))


def test_labels_checked_on_the_host_are_not_checked_again_per_batch() -> None:
    """A feed of host arrays has its labels (and the validation data's) checked once before
    training, so the steps skip arraycore's per-batch check (a transfer that waits for a GPU);
    index checks stay on, and the setting ends with fit."""
    x, y = _blobs()
    probe = _LabelCheckProbe()
    feed = nnlayers.Feed(x, y, batch_size=16, seed=0)
    fit(_classifier(), feed, epochs=1, optimizer=SGD(0.1), validation=_blobs(32, 1),
        progress=False, callbacks=[probe])  # fmt: skip
    assert probe.seen == [False] * 4
    assert arraycore._checks.enabled("labels") and arraycore._checks.enabled("indices")
    # labels already on a device were never checked on the host: each batch checks them (the
    # NumPy backend's arrays are host arrays, checked once like the others)
    xp = arraycore.namespace()
    dx, dy = xp.asarray(x), xp.asarray(y)
    on_device = nnlayers.Feed(dx, dy, batch_size=16, seed=0)
    probe = _LabelCheckProbe()
    fit(_classifier(), on_device, epochs=1, optimizer=SGD(0.1), progress=False,
        callbacks=[probe])  # fmt: skip
    assert probe.seen == [not isinstance(dy, np.ndarray)] * 4


def test_bad_validation_labels_are_refused_before_training() -> None:
    x, y = _blobs()
    vx, vy = _blobs(32, 1)
    vy[5] = 2  # the classifier has two classes
    model = _classifier()
    before = [p.numpy().copy() for p in model.params]
    with pytest.raises(nnlayers.errors.FeedError, match=r"got 2 at \(5,\)"):
        fit(model, nnlayers.Feed(x, y, batch_size=16), epochs=1, optimizer=SGD(0.1),
            validation=(vx, vy), progress=False)  # fmt: skip
    for p, value in zip(model.params, before):
        np.testing.assert_array_equal(p.numpy(), value)


def test_validation_split_holds_out_the_last_examples_as_keras_does() -> None:
    from nnlayers import Feed

    x, y = _blobs()
    n = len(x)
    model = _classifier()
    history = fit(
        model, Feed(x, y, batch_size=16), epochs=2, optimizer=SGD(0.1), validation_split=0.25,
        progress=False,
    )  # fmt: skip
    held = n // 4
    assert "val_loss" in history.last
    assert history.last["val_loss"] == pytest.approx(model.evaluate(x[-held:], y[-held:])["loss"])
    assert history.last["examples_per_second"] > 0
    train, tail = Feed(x, y, batch_size=16).split(0.25)
    assert train.num_examples == n - held and len(tail[0]) == held
    with pytest.raises(TypeError, match="not both"):
        fit(model, Feed(x, y), validation=(x, y), validation_split=0.2, progress=False)
    with pytest.raises(TypeError, match=r"splits a nnlayers\.Feed"):
        fit(model, _batches(x, y), validation_split=0.2, progress=False)
    with pytest.raises(ValueError, match=r"lie in \(0, 1\)"):
        fit(model, Feed(x, y), validation_split=1.5, progress=False)
