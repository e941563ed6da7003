"""More callbacks: per-batch hooks, CSVLogger, ReduceLROnPlateau, LearningRateScheduler,
TerminateOnNaN, ModelCheckpoint (best-only, resumed), TensorBoard, and Keras's fit(x, y)."""

from __future__ import annotations

import csv
import math
import struct
import sys

import numpy as np
import pytest

import nnlayers
from nnlayers.errors import NonFiniteError
from nnlayers.layers import Affine, Sequential
from nnlayers.models import Classifier, Regressor
from nnlayers.optim import SGD, Adam, StepDecay
from nnlayers.optim.schedules import Scaled
from nnlayers.train import (
    BatchLogs,
    Callback,
    Checkpoint,
    CSVLogger,
    LearningRateScheduler,
    ModelCheckpoint,
    ReduceLROnPlateau,
    TensorBoard,
    TerminateOnNaN,
    fit,
    read_metadata,
)
from nnlayers.train.callbacks import CallbackList, overrides


def _data(n=64, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 2)).astype(np.float32)
    return x, (x[:, 0] + 0.3 * x[:, 1] > 0).astype(np.int64)


def _batches(x, y, size=16):
    return [(x[i : i + size], y[i : i + size]) for i in range(0, len(x), size)]


def _classifier(optimizer=None, seed=0):
    net = Sequential([Affine(8, activation="tanh"), Affine(2)], seed=seed)
    return Classifier(net, (2,), optimizer=optimizer or SGD(0.5))


def _values(model):
    return [p.numpy() for p in model.params]


# -- per-batch hooks ------------------------------------------------------------------------------
class BatchRecorder(Callback):
    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def on_epoch_begin(self, epoch: int) -> None:
        self.calls.append(("epoch", epoch))

    def on_train_batch_begin(self, step: int) -> None:
        self.calls.append(("begin", step))

    def on_train_batch_end(self, step: int, logs: BatchLogs) -> None:
        self.calls.append(("end", step, logs.epoch, logs.global_step, logs.size, dict(logs)))


def test_batch_hooks_run_around_every_step_with_lazy_logs() -> None:
    x, y = _data(40)
    model = _classifier()
    recorder = BatchRecorder()
    history = fit(model, _batches(x, y), epochs=2, callbacks=[recorder], progress=False)
    kinds = [c[:2] for c in recorder.calls]
    assert kinds == [
        ("epoch", 1), ("begin", 1), ("end", 1), ("begin", 2), ("end", 2), ("begin", 3), ("end", 3),
        ("epoch", 2), ("begin", 1), ("end", 1), ("begin", 2), ("end", 2), ("begin", 3), ("end", 3),
    ]  # fmt: skip
    ends = [c for c in recorder.calls if c[0] == "end"]
    assert [c[2] for c in ends] == [1, 1, 1, 2, 2, 2]
    assert [c[3] for c in ends] == [1, 2, 3, 4, 5, 6]  # global steps
    assert [c[4] for c in ends] == [16, 16, 8] * 2  # batch sizes
    first_epoch = ends[:3]
    mean = sum(c[5]["loss"] * c[4] for c in first_epoch) / 40
    assert mean == pytest.approx(history["loss"][0], rel=1e-6)
    assert set(ends[0][5]) == {"loss", "accuracy"}
    # a later fit continues the global step from the optimiser's step count
    again = BatchRecorder()
    fit(model, _batches(x, y), epochs=1, callbacks=[again], progress=False)
    assert [c[3] for c in again.calls if c[0] == "end"] == [7, 8, 9]


def test_batch_logs_fetch_device_values_once_and_only_when_read() -> None:
    class Scalar:  # stands for a device scalar: not a host number
        def __init__(self, value):
            self.value = value

    class Namespace:
        transfers = 0

        def stack(self, values):
            return [v.value for v in values]

        def to_numpy(self, stacked):
            Namespace.transfers += 1
            return np.asarray(stacked)

    logs = BatchLogs(Namespace(), ["loss", "accuracy"], [Scalar(0.5), Scalar(0.75)], 8, 2, 3, 9)
    assert Namespace.transfers == 0 and logs.raw["loss"].value == 0.5 and len(logs) == 2
    assert logs["accuracy"] == 0.75 and logs["loss"] == 0.5 and dict(logs)["loss"] == 0.5
    assert Namespace.transfers == 1
    with pytest.raises(KeyError, match="no metric 'mae'"):
        logs["mae"]
    assert "epoch 2 step 3" in repr(logs)


def test_no_batch_hooks_no_wrapped_step(monkeypatch) -> None:
    class EpochsOnly(Callback):
        def on_epoch_end(self, epoch, logs) -> None:
            pass

    def refuse(*args, **kwargs):
        raise AssertionError("the step was wrapped although no callback has batch hooks")

    monkeypatch.setattr(CallbackList, "batch_step", refuse)
    x, y = _data()
    fit(_classifier(), _batches(x, y), epochs=1, callbacks=[EpochsOnly()], progress=False)
    assert not overrides(EpochsOnly(), "on_train_batch_end")
    assert overrides(BatchRecorder(), "on_train_batch_begin")
    instance = EpochsOnly()
    instance.on_train_batch_end = lambda step, logs: None  # type: ignore[method-assign]
    assert overrides(instance, "on_train_batch_end")


def test_stop_from_a_batch_hook_stops_after_the_epoch() -> None:
    class StopAtStep2(Callback):
        def on_train_batch_end(self, step, logs) -> None:
            if step == 2:
                self.state.stop = True

    x, y = _data()
    history = fit(
        _classifier(), _batches(x, y), epochs=5, callbacks=[StopAtStep2()], progress=False
    )
    assert len(history) == 1


# -- CSVLogger ------------------------------------------------------------------------------------
def _read_csv(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    return [{k: float(v) if v else math.nan for k, v in row.items()} for row in rows]


def _same(a, b):
    return a == b or (math.isnan(a) and math.isnan(b))


def test_csv_rows_equal_the_history(tmp_path) -> None:
    x, y = _data()
    path = tmp_path / "log.csv"
    logger = CSVLogger(path)
    history = fit(
        _classifier(), _batches(x, y), epochs=3, validation=(x, y), callbacks=[logger],
        progress=False,
    )  # fmt: skip
    with open(path, newline="") as f:
        header = next(csv.reader(f))
    assert header == ["epoch", *history.keys()] == logger.columns
    rows = _read_csv(path)
    assert len(rows) == 3
    for row, record in zip(rows, history):
        assert row.keys() == record.keys()
        assert all(_same(row[k], float(v)) for k, v in record.items())
    assert repr(logger) == f"CSVLogger({str(path)!r}, append=False)"


def test_csv_new_metric_widens_the_header(tmp_path) -> None:
    class LogRateFrom2(Callback):
        def on_epoch_begin(self, epoch) -> None:
            if epoch == 2:
                self.state.log_lr = True  # "lr" enters the records from epoch 2

    x, y = _data()
    path = tmp_path / "log.csv"
    history = fit(
        _classifier(), _batches(x, y), epochs=3, callbacks=[LogRateFrom2(), CSVLogger(path)],
        progress=False,
    )  # fmt: skip
    rows = _read_csv(path)
    assert list(rows[0])[-1] == "lr" and math.isnan(rows[0]["lr"])
    assert [r["lr"] for r in rows[1:]] == [0.5, 0.5] == history["lr"][1:]
    assert [r["loss"] for r in rows] == history["loss"]


def test_csv_append_resumes_the_file(tmp_path) -> None:
    x, y = _data()
    path, ckpt = tmp_path / "log.csv", tmp_path / "run.safetensors"
    model = _classifier()
    fit(
        model, _batches(x, y), epochs=3, callbacks=[Checkpoint(ckpt, every=2), CSVLogger(path)],
        progress=False,
    )  # fmt: skip
    # the run "crashed" after epoch 3's row but its checkpoint is epoch 2's; a half row too
    with open(path, "a") as f:
        f.write("4,0.12")
    resumed = _classifier(seed=5)
    history = fit(
        resumed, _batches(x, y), epochs=5,
        callbacks=[Checkpoint(ckpt, resume=True), CSVLogger(path, append=True)], progress=False,
    )  # fmt: skip
    rows = _read_csv(path)
    assert [r["epoch"] for r in rows] == [1, 2, 3, 4, 5]
    assert [r["loss"] for r in rows] == history["loss"]  # epoch 3 is the resumed run's
    # a file that ends cleanly with the same header is appended to, not rewritten
    inode = path.stat().st_ino
    more = fit(
        resumed, _batches(x, y), epochs=1, callbacks=[CSVLogger(path, append=True)],
        progress=False,
    )  # fmt: skip
    assert path.stat().st_ino == inode
    assert [r["loss"] for r in _read_csv(path)] == more["loss"]
    # append=False starts afresh
    fit(resumed, _batches(x, y), epochs=1, callbacks=[CSVLogger(path)], progress=False)
    assert [r["epoch"] for r in _read_csv(path)] == [7]


def test_csv_refuses_to_append_to_another_file(tmp_path) -> None:
    path = tmp_path / "other.csv"
    path.write_text("a,b\n1,2\n")
    x, y = _data()
    with pytest.raises(ValueError, match="no 'epoch' column"):
        fit(
            _classifier(), _batches(x, y), epochs=1, callbacks=[CSVLogger(path, append=True)],
            progress=False,
        )  # fmt: skip
    with pytest.raises(FileNotFoundError, match="missing"):
        fit(
            _classifier(), _batches(x, y), epochs=1,
            callbacks=[CSVLogger(tmp_path / "missing" / "log.csv")], progress=False,
        )  # fmt: skip


# -- ReduceLROnPlateau ----------------------------------------------------------------------------
def test_reduce_lr_on_plateau_lowers_the_rate_that_training_uses() -> None:
    x, y = _data()
    model = _classifier(SGD(0.5))
    # min_delta=10: no epoch after the first counts as an improvement
    reduce = ReduceLROnPlateau("loss", factor=0.1, patience=2, min_delta=10.0)
    history = fit(model, _batches(x, y), epochs=6, callbacks=[reduce], progress=False)
    assert history["lr"] == pytest.approx([0.5, 0.5, 0.5, 0.05, 0.05, 0.005])
    assert reduce.reduced == [3, 5] and model.optimizer.lr == pytest.approx(0.005)
    # the same training with the rate set by hand gives the same parameters
    manual = _classifier(SGD(0.5))
    for epochs, lr in ((3, 0.5), (5, 0.05), (6, 0.005)):
        manual.optimizer.lr = lr
        fit(manual, _batches(x, y), until_epoch=epochs, progress=False)
    for a, b in zip(_values(model), _values(manual)):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_reduce_lr_cooldown_min_lr_and_mode() -> None:
    x, y = _data()
    model = _classifier(SGD(0.5))
    reduce = ReduceLROnPlateau(
        "loss", factor=0.1, patience=1, cooldown=2, min_lr=0.02, min_delta=10
    )
    history = fit(model, _batches(x, y), epochs=7, callbacks=[reduce], progress=False)
    # reduced after 2, cooling down at 3 (and 4, where counting starts again as in Keras),
    # reduced after 4 to min_lr, then nothing lower
    assert history["lr"] == pytest.approx([0.5, 0.5, 0.05, 0.05, 0.02, 0.02, 0.02])
    assert reduce.reduced == [2, 4]
    assert ReduceLROnPlateau("val_accuracy").mode == "max"
    for bad in ({"factor": 1.0}, {"patience": -1}, {"min_lr": -1.0}, {"cooldown": 0.5}):
        with pytest.raises(ValueError):
            ReduceLROnPlateau(**bad)  # type: ignore[arg-type]
    with pytest.raises(KeyError, match="pass validation="):
        fit(model, _batches(x, y), epochs=8, callbacks=[ReduceLROnPlateau()], progress=False)


def test_reduce_lr_scales_a_schedule() -> None:
    x, y = _data()
    schedule = StepDecay(0.5, step_size=8, gamma=0.5)  # 4 steps per epoch: halves every 2
    model = _classifier(SGD(schedule))
    reduce = ReduceLROnPlateau("loss", factor=0.1, patience=1, min_delta=10)
    history = fit(model, _batches(x, y), epochs=3, callbacks=[reduce], progress=False)
    lr = model.optimizer.lr
    assert isinstance(lr, Scaled) and lr.schedule is schedule and lr.factor == pytest.approx(0.01)
    assert history["lr"] == pytest.approx([0.5, 0.5, 0.25 * 0.1])  # reduced after 2 and 3
    assert reduce.reduced == [2, 3]
    assert model.optimizer.learning_rate == pytest.approx(schedule(12) * 0.01)


def test_reduce_lr_resumes_as_if_never_stopped(tmp_path) -> None:
    x, y = _data()
    settings = {"factor": 0.5, "patience": 2, "min_delta": 10.0}
    straight = _classifier(SGD(0.5))
    fit(
        straight, _batches(x, y), epochs=8, callbacks=[ReduceLROnPlateau("loss", **settings)],
        progress=False,
    )  # fmt: skip
    path = tmp_path / "run.safetensors"
    first = _classifier(SGD(0.5))
    fit(
        first, _batches(x, y), epochs=4,
        callbacks=[Checkpoint(path), ReduceLROnPlateau("loss", **settings)], progress=False,
    )  # fmt: skip
    resumed = _classifier(SGD(0.5), seed=3)
    reduce = ReduceLROnPlateau("loss", **settings)
    history = fit(
        resumed, _batches(x, y), epochs=8, callbacks=[Checkpoint(path, resume=True), reduce],
        progress=False,
    )  # fmt: skip
    assert history["lr"] == pytest.approx(straight.history["lr"])
    assert reduce.reduced == [3, 5, 7]
    for a, b in zip(_values(straight), _values(resumed)):
        np.testing.assert_allclose(a, b, rtol=1e-6)


# -- LearningRateScheduler ------------------------------------------------------------------------
def test_learning_rate_scheduler_sets_each_epoch() -> None:
    x, y = _data()
    calls = []

    def schedule(epoch, lr):
        calls.append((epoch, lr))
        return 0.4 * 0.5 ** (epoch - 1)

    model = _classifier(SGD(0.5))
    history = fit(
        model, _batches(x, y), epochs=3, callbacks=[LearningRateScheduler(schedule)],
        progress=False,
    )  # fmt: skip
    assert calls == [(1, 0.5), (2, 0.4), (3, 0.2)]
    assert history["lr"] == [0.4, 0.2, 0.1] and model.optimizer.lr == 0.1
    # the rates were used: the same as setting them by hand
    manual = _classifier(SGD(0.5))
    for epoch, lr in ((1, 0.4), (2, 0.2), (3, 0.1)):
        manual.optimizer.lr = lr
        fit(manual, _batches(x, y), until_epoch=epoch, progress=False)
    for a, b in zip(_values(model), _values(manual)):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_learning_rate_scheduler_continues_a_resumed_run(tmp_path) -> None:
    x, y = _data()
    path = tmp_path / "run.safetensors"
    halve = LearningRateScheduler(lambda epoch, lr: lr * 0.5)
    fit(_classifier(SGD(0.8)), _batches(x, y), epochs=2, callbacks=[Checkpoint(path), halve],
        progress=False)  # fmt: skip
    resumed = _classifier(SGD(0.8))
    history = fit(
        resumed, _batches(x, y), epochs=4,
        callbacks=[Checkpoint(path, resume=True), LearningRateScheduler(lambda e, lr: lr * 0.5)],
        progress=False,
    )  # fmt: skip
    assert history["lr"] == [0.4, 0.2, 0.1, 0.05]


def test_learning_rate_scheduler_errors() -> None:
    x, y = _data()
    with pytest.raises(TypeError, match="already sets the rate"):
        fit(
            _classifier(SGD(StepDecay(0.5, 10))), _batches(x, y), epochs=1,
            callbacks=[LearningRateScheduler(lambda e, lr: lr)], progress=False,
        )  # fmt: skip
    with pytest.raises(ValueError, match=r"schedule\(1, 0.5\) returned nan"):
        fit(
            _classifier(), _batches(x, y), epochs=1,
            callbacks=[LearningRateScheduler(lambda e, lr: math.nan)], progress=False,
        )  # fmt: skip
    with pytest.raises(TypeError, match="must be a function"):
        LearningRateScheduler(0.1)  # type: ignore[arg-type]


# -- TerminateOnNaN -------------------------------------------------------------------------------
def _nan_data():
    x = np.ones((32, 2), np.float32)
    x[20] = np.nan
    return [(x[:16], np.zeros((16, 1), np.float32)), (x[16:], np.zeros((16, 1), np.float32))]


def test_terminate_on_nan_keeps_the_check_on() -> None:
    def model():
        return Regressor(Affine(1, seed=0), (2,), optimizer=SGD(0.1))

    with pytest.raises(NonFiniteError, match="epoch 1, step 2"):
        fit(model(), _nan_data(), epochs=3, progress=False)  # the default
    with pytest.raises(NonFiniteError, match="epoch 1, step 2"):
        fit(
            model(), _nan_data(), epochs=3, callbacks=[TerminateOnNaN()], progress=False,
            stop_on_nonfinite=False,
        )  # fmt: skip
    history = fit(model(), _nan_data(), epochs=2, progress=False, stop_on_nonfinite=False)
    assert len(history) == 2 and math.isnan(history["loss"][-1])
    assert not overrides(TerminateOnNaN(), "on_train_batch_end")  # no check of its own


# -- ModelCheckpoint ------------------------------------------------------------------------------
def test_model_checkpoint_resume_restores_optimizer_state_and_epoch(tmp_path) -> None:
    x, y = _data()
    path = tmp_path / "run.safetensors"
    model = _classifier(Adam(0.05))
    fit(model, _batches(x, y), epochs=3, callbacks=[ModelCheckpoint(path, resume=True)],
        progress=False)  # fmt: skip
    resumed = _classifier(Adam(0.05), seed=7)
    checkpoint = ModelCheckpoint(path, resume=True)
    with pytest.warns(UserWarning, match="nothing to train: the model is at epoch 3"):
        fit(resumed, _batches(x, y), epochs=3, callbacks=[checkpoint], progress=False)
    assert checkpoint.resumed_from == 3 and resumed.epoch == 3 and checkpoint.saved == []
    assert resumed.optimizer.step_count == model.optimizer.step_count == 12
    mine, theirs = model.optimizer.state_dict(), resumed.optimizer.state_dict()
    assert mine["arrays"].keys() == theirs["arrays"].keys()
    for key, value in mine["arrays"].items():
        np.testing.assert_array_equal(
            model.xp.to_numpy(value), model.xp.to_numpy(theirs["arrays"][key])
        )
    for a, b in zip(_values(model), _values(resumed)):
        np.testing.assert_array_equal(a, b)
    assert isinstance(checkpoint, Checkpoint)
    with pytest.raises(ValueError, match="file-name template"):
        ModelCheckpoint(tmp_path / "model-{epoch:02d}.safetensors")


def _rising_after_3(epoch, lr):
    return 0.05 if epoch <= 3 else 3.0  # learns, then diverges: the loss gets worse


def test_best_only_checkpoint_is_not_replaced_by_a_worse_resumed_run(tmp_path) -> None:
    x = np.random.default_rng(0).normal(size=(32, 2)).astype(np.float32)
    y = x @ np.array([[1.0], [2.0]], np.float32)
    batches = [(x[:16], y[:16]), (x[16:], y[16:])]

    def model():
        return Regressor(Affine(1, seed=0), (2,), optimizer=SGD(0.05))

    best, last = tmp_path / "best.safetensors", tmp_path / "last.safetensors"
    first = model()
    history = fit(
        first, batches, epochs=5,
        callbacks=[
            LearningRateScheduler(_rising_after_3), Checkpoint(last),
            ModelCheckpoint(best, monitor="loss", save_best_only=True),
        ],
        progress=False,
    )  # fmt: skip
    best_epoch, best_loss = history.best("loss")
    assert best_epoch == 3
    meta = read_metadata(best)
    assert meta["epoch"] == 3 and meta["checkpoint.monitor"] == "loss"
    assert meta["checkpoint.best"] == best_loss and meta["checkpoint.mode"] == "min"
    stamp = best.stat().st_mtime_ns

    # a resumed run (from the last checkpoint) whose epochs are all worse leaves it alone
    keeper = ModelCheckpoint(best, monitor="loss", save_best_only=True)
    fit(
        model(), batches, epochs=7,
        callbacks=[
            LearningRateScheduler(_rising_after_3), Checkpoint(last, resume=True), keeper,
        ],
        progress=False,
    )  # fmt: skip
    assert keeper.saved == [] and keeper.best == best_loss and best.stat().st_mtime_ns == stamp

    # resuming from the best-only file itself: its epoch, its optimiser state, its best value
    again = model()
    resume = ModelCheckpoint(best, monitor="loss", save_best_only=True, resume=True)
    fit(again, batches, epochs=4, callbacks=[LearningRateScheduler(_rising_after_3), resume],
        progress=False)  # fmt: skip
    assert resume.resumed_from == 3 and again.optimizer.step_count == 6 + 2
    assert resume.saved == [] and resume.best == best_loss  # epoch 4 was worse than the file

    # a new run (from epoch 1) overwrites the file as before
    fresh = ModelCheckpoint(best, monitor="loss", save_best_only=True)
    fit(model(), batches, epochs=1, callbacks=[fresh], progress=False)
    assert fresh.saved == [1] and read_metadata(best)["epoch"] == 1


# -- TensorBoard ----------------------------------------------------------------------------------
def _read_events(folder):
    """(tag, step, value) of every scalar in the event files of ``folder``, checking each
    record's framing and CRCs as TensorBoard does."""
    from tensorboardX.proto import event_pb2
    from tensorboardX.record_writer import masked_crc32c

    found = []
    for file in sorted(folder.glob("events.out.tfevents.*")):
        data, position = file.read_bytes(), 0
        while position < len(data):
            header = data[position : position + 8]
            (length,) = struct.unpack("<Q", header)
            (crc,) = struct.unpack("<I", data[position + 8 : position + 12])
            assert crc == masked_crc32c(header)
            body = data[position + 12 : position + 12 + length]
            (crc,) = struct.unpack("<I", data[position + 12 + length : position + 16 + length])
            assert crc == masked_crc32c(body)
            position += 16 + length
            event = event_pb2.Event.FromString(body)
            found += [(v.tag, event.step, v.simple_value) for v in event.summary.value]
    return found


def test_tensorboard_writes_readable_event_files(tmp_path) -> None:
    pytest.importorskip("tensorboardX")
    x, y = _data()
    board = TensorBoard(tmp_path / "logs", update_freq=3)
    history = fit(
        _classifier(), _batches(x, y), epochs=2, validation=(x, y),
        callbacks=[board, ReduceLROnPlateau("val_loss")], progress=False,
    )  # fmt: skip
    train = _read_events(tmp_path / "logs" / "train")
    validation = _read_events(tmp_path / "logs" / "validation")
    for name in ("loss", "accuracy", "lr", "time"):
        got = [(step, value) for tag, step, value in train if tag == f"epoch_{name}"]
        assert got == [(e, pytest.approx(v, rel=1e-6)) for e, v in zip((1, 2), history[name])]
    for name in ("loss", "accuracy"):
        got = [(step, value) for tag, step, value in validation if tag == f"epoch_{name}"]
        want = history[f"val_{name}"]
        assert got == [(e, pytest.approx(v, rel=1e-6)) for e, v in zip((1, 2), want)]
    batch_steps = sorted({step for tag, step, _ in train if tag == "batch_loss"})
    assert batch_steps == [3, 6]  # every 3rd of 8 global steps
    assert repr(board) == f"TensorBoard({str(tmp_path / 'logs')!r}, update_freq=3)"
    assert not overrides(TensorBoard(tmp_path / "quiet"), "on_train_batch_end")
    with pytest.raises(ValueError, match="update_freq"):
        TensorBoard(tmp_path, update_freq=0)


def test_tensorboard_without_tensorboardx_names_the_extra(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "tensorboardX", None)
    with pytest.raises(ImportError, match=r'pip install "nnlayers\[tensorboard\]"'):
        TensorBoard("logs")


# -- Keras habits ---------------------------------------------------------------------------------
def test_fit_with_arrays_says_to_use_a_feed() -> None:
    x, y = _data()
    model = _classifier()
    with pytest.raises(TypeError, match=r"fit\(model, x, y\).*nnlayers\.Feed\(x, y, batch_size="):
        fit(model, x, y)
    with pytest.raises(TypeError, match=r"a tuple of 2 arrays.*nnlayers\.Feed"):
        fit(model, (x, y), epochs=2)
    with pytest.raises(TypeError, match=r"fit\(model, x\) with an array of shape \(64, 2\)"):
        fit(model, x, epochs=2)
    with pytest.raises(TypeError, match="epochs must be an int"):
        fit(model, _batches(x, y), epochs=2.5)  # type: ignore[arg-type]
    history = fit(model, nnlayers.Feed(x, y, batch_size=16), epochs=1, progress=False)
    assert len(history) == 1 and model.epoch == 1
