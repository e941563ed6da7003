"""Feeds: in-memory batches with reproducible shuffling, and streamed batches from a thread."""

from __future__ import annotations

import doctest
import threading
import time

import numpy as np
import pytest

import arraycore
import nnlayers.feeds as feeds
from nnlayers.feeds import Feed, StreamFeed

X = np.arange(20, dtype=np.float32).reshape(10, 2)
Y = np.arange(10, dtype=np.int64)


@pytest.fixture
def host(xp):
    return lambda a: np.asarray(xp.to_numpy(a))


def collect(feed, host):
    return [tuple(host(a) for a in batch) for batch in feed]


# -- Feed ---------------------------------------------------------------------------------------
def test_batches_in_order_are_backend_arrays(xp, host):
    feed = Feed(X, Y, batch_size=4, shuffle=False)
    batches = list(feed)
    assert len(feed) == 3 and len(batches) == 3
    assert all(type(a) is type(xp.zeros(1)) for batch in batches for a in batch)
    got = [tuple(host(a) for a in batch) for batch in batches]
    assert [b[1].tolist() for b in got] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    np.testing.assert_array_equal(np.concatenate([b[0] for b in got]), X)
    assert got[0][0].dtype == np.float32 and got[0][1].dtype == np.int64


def test_shuffling_is_reproducible_and_differs_per_epoch(host):
    a = Feed(X, Y, batch_size=3, seed=7)
    b = Feed(X, Y, batch_size=3, seed=7)
    epoch1 = [t.tolist() for _, t in collect(a, host)]
    epoch2 = [t.tolist() for _, t in collect(a, host)]
    assert epoch1 == [t.tolist() for _, t in collect(b, host)]
    assert epoch1 != epoch2
    for epoch in (epoch1, epoch2):
        assert sorted(np.concatenate(epoch).tolist()) == list(range(10))
    assert Feed(X, Y, batch_size=3, seed=8).order(1).tolist() != np.concatenate(epoch1).tolist()
    # inputs and targets stay paired
    for x, y in collect(Feed(X, Y, batch_size=3, seed=1), host):
        np.testing.assert_array_equal(x, X[y])


def test_epoch_counter_restores_the_order(host):
    run = Feed(X, Y, batch_size=4, seed=3)
    orders = [[t.tolist() for _, t in collect(run, host)] for _ in range(3)]
    assert run.epoch == 4
    resumed = Feed(X, Y, batch_size=4, seed=3)
    resumed.set_epoch(3)
    assert [t.tolist() for _, t in collect(resumed, host)] == orders[2]
    with pytest.raises(ValueError, match="epoch must be an int >= 1"):
        resumed.set_epoch(0)


@pytest.mark.parametrize(
    ("last_batch", "sizes", "examples"),
    [("keep", [4, 4, 2], 10), ("drop", [4, 4], 8), ("pad", [4, 4, 4], 12)],
)
def test_last_batch(host, last_batch, sizes, examples):
    feed = Feed(X, Y, batch_size=4, last_batch=last_batch, seed=2)
    batches = collect(feed, host)
    assert [len(y) for _, y in batches] == sizes == [4] * (len(feed) - 1) + [sizes[-1]]
    assert feed.examples_per_epoch == examples and feed.num_examples == 10
    if last_batch == "pad":
        order = feed.order(1)
        assert batches[-1][1].tolist() == [*order[8:].tolist(), *order[:2].tolist()]


def test_pad_smaller_than_one_batch(host):
    (batch,) = collect(Feed(X[:3], Y[:3], batch_size=8, shuffle=False, last_batch="pad"), host)
    assert batch[1].tolist() == [0, 1, 2, 0, 1, 2, 0, 1]


def test_several_inputs_and_no_targets(host):
    feed = Feed((X, X * 2), batch_size=5, shuffle=False)
    (a, b), _ = collect(feed, host)
    np.testing.assert_array_equal(b, 2 * a)
    (only,), _ = collect(Feed(X, batch_size=5, shuffle=False), host)
    np.testing.assert_array_equal(only, X[:5])


def test_data_already_on_the_device(xp, host):
    feed = Feed(xp.asarray(X), xp.asarray(Y), batch_size=4, seed=5)
    for x, y in collect(feed, host):
        np.testing.assert_array_equal(x, X[y])


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Feed(X, Y[:9]), "targets has 9 examples but inputs has 10"),
        (lambda: Feed((X, X[:3]), Y), r"inputs\[1\] has 3 examples"),
        (lambda: Feed(X, Y, batch_size=0), "batch_size must be an int >= 1"),
        (lambda: Feed(X, Y, batch_size=2.5), "batch_size"),
        (lambda: Feed(X, Y, last_batch="wrap"), "last_batch must be"),
        (lambda: Feed(X, Y, seed=-1), "seed"),
        (lambda: Feed(X[:0], Y[:0]), "empty"),
        (lambda: Feed(np.float32(3.0)), "scalar"),
        (lambda: Feed(X, Y, batch_size=11, last_batch="drop"), "would yield no batch"),
    ],
)
def test_errors(make, message):
    with pytest.raises(ValueError, match=message):
        make()


# -- StreamFeed -----------------------------------------------------------------------------------
@pytest.fixture
def files(tmp_path):
    """Five .npz files of 3, 1, 4, 2, 5 examples (15 in all)."""
    paths, start = [], 0
    for i, n in enumerate([3, 1, 4, 2, 5]):
        path = tmp_path / f"part-{i}.npz"
        np.savez(path, x=X.repeat(2, axis=0)[start : start + n] + 0, y=np.arange(start, start + n))
        paths.append(path)
        start += n
    return paths


def load_npz(path):
    with np.load(path) as data:
        return data["x"], data["y"]


@pytest.mark.parametrize(
    ("last_batch", "sizes"), [("keep", [4, 4, 4, 3]), ("drop", [4, 4, 4]), ("pad", [4, 4, 4, 4])]
)
def test_stream_from_files_rebatches_across_files(files, host, last_batch, sizes):
    feed = StreamFeed(files, batch_size=4, loader=load_npz, last_batch=last_batch)
    batches = collect(feed, host)
    assert [len(y) for _, y in batches] == sizes
    labels = np.concatenate([y for _, y in batches]).tolist()
    expected = list(range(15))
    if last_batch == "drop":
        expected = expected[:12]
    if last_batch == "pad":
        expected = [*expected, 0]
    assert labels == expected
    assert feed.epoch == 2


def test_stream_shuffles_per_epoch_reproducibly(files, host):
    def labels(feed):
        return np.concatenate([y for _, y in collect(feed, host)]).tolist()

    a = StreamFeed(files, batch_size=4, loader=load_npz, shuffle=True, seed=1)
    b = StreamFeed(files, batch_size=4, loader=load_npz, shuffle=True, seed=1)
    first, second = labels(a), labels(a)
    assert first == labels(b) and first != second
    assert sorted(first) == sorted(second) == list(range(15))
    b.set_epoch(2)
    assert labels(b) == second


def test_stream_from_a_generator_factory(host):
    calls = []

    def source():
        calls.append(1)
        for start in range(0, 10, 3):
            yield X[start : start + 3], Y[start : start + 3]

    feed = StreamFeed(source, batch_size=4)
    for _ in range(2):
        batches = collect(feed, host)
        np.testing.assert_array_equal(np.concatenate([x for x, _ in batches]), X)
    assert len(calls) == 2
    single = StreamFeed(lambda: iter([X[:6], X[6:]]), batch_size=5)
    assert [len(b[0]) for b in collect(single, host)] == [5, 5]


def test_stream_loads_in_a_background_thread_ahead_of_the_consumer():
    loaded = []
    main = threading.get_ident()

    def loader(i):
        loaded.append((i, threading.get_ident()))
        return np.full((2, 1), float(i))

    feed = StreamFeed(list(range(10)), batch_size=2, loader=loader, prefetch=3)
    iterator = iter(feed)
    next(iterator)
    deadline = time.monotonic() + 5
    while len(loaded) < 5 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.05)
    # one batch consumed, three ready in the queue, one more loaded and waiting to be put
    assert len(loaded) == 5
    assert all(ident != main for _, ident in loaded)
    assert [float(arraycore.to_numpy(b[0])[0, 0]) for b in iterator] == list(range(1, 10))


def _stream_threads():
    return [t for t in threading.enumerate() if t.name.startswith("nnlayers-StreamFeed")]


def test_stopping_early_shuts_the_thread_down():
    closed = []

    def source():
        try:
            for i in range(1000):
                yield np.full((1, 1), float(i))
        finally:
            closed.append(True)

    feed = StreamFeed(source, batch_size=1, prefetch=2)
    for i, _ in enumerate(feed):
        if i == 3:
            break
    assert _stream_threads() == []
    assert closed == [True]
    # close() stops an iteration that is never finished
    iterator = iter(feed)
    next(iterator)
    assert len(_stream_threads()) == 1
    with feed:
        pass
    deadline = time.monotonic() + 5
    while _stream_threads() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _stream_threads() == []
    del iterator


def test_loader_errors_are_raised_in_the_consumer_with_context(files):
    def loader(path):
        if path.name == "part-2.npz":
            raise OSError(f"cannot read {path.name}")
        return load_npz(path)

    feed = StreamFeed(files, batch_size=2, loader=loader)
    seen = []
    with pytest.raises(OSError, match=r"cannot read part-2\.npz") as info:
        for batch in feed:
            seen.append(batch)
    assert len(seen) == 2  # the 4 examples of the first two files came through
    (note,) = info.value.__notes__
    assert "item 2" in note and "part-2.npz" in note and "epoch 1" in note
    assert any(entry.name == "loader" for entry in info.traceback)  # the thread's frames
    assert _stream_threads() == []


def test_source_errors_name_the_chunk():
    def source():
        yield X[:2]
        raise RuntimeError("broken source")

    with pytest.raises(RuntimeError, match="broken source") as info:
        list(StreamFeed(source, batch_size=1))
    assert "chunk 1 from the source of epoch 1" in info.value.__notes__[0]


def test_bad_chunks_are_errors():
    with pytest.raises(ValueError, match="different lengths") as info:
        list(StreamFeed(lambda: iter([(X[:3], Y[:2])]), batch_size=2))
    assert "chunk 0" in info.value.__notes__[0]
    with pytest.raises(ValueError, match="earlier chunks had 2"):
        list(StreamFeed(lambda: iter([(X[:3], Y[:3]), X[:3]]), batch_size=2))


@pytest.mark.parametrize(
    ("make", "error", "message"),
    [
        (lambda: StreamFeed([1, 2]), ValueError, "needs loader="),
        (lambda: StreamFeed([], loader=print), ValueError, "empty"),
        (lambda: StreamFeed(42), TypeError, "source must be"),
        (lambda: StreamFeed(list, prefetch=0), ValueError, "prefetch"),
        (lambda: StreamFeed(list, batch_size=-2), ValueError, "batch_size"),
    ],
)
def test_stream_argument_errors(make, error, message):
    with pytest.raises(error, match=message):
        make()


def test_docstring_example_runs():
    assert doctest.testmod(feeds).failed == 0


# -- the user's arrays are never handed to writers ----------------------------------------------
def _add_in_place(batch, rng):
    """An augmentation that edits its batch in place (as NumPy habits write it)."""
    batch += 0.1
    return batch


@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("last_batch", ["keep", "pad"])
def test_an_augmentation_editing_its_batch_leaves_the_users_data_alone(shuffle, last_batch):
    x = np.arange(40, dtype=np.float32).reshape(20, 2)
    y = np.arange(20, dtype=np.int64)
    before_x, before_y = x.copy(), y.copy()
    feed = Feed(x, y, batch_size=6, shuffle=shuffle, last_batch=last_batch, augment=_add_in_place)
    for _ in range(3):
        for inputs, labels in feed:
            labels += 1  # a loop editing its labels in place
            del inputs
    np.testing.assert_array_equal(x, before_x)
    np.testing.assert_array_equal(y, before_y)


def test_batches_of_a_feed_are_their_own_memory(xp, host):
    x = np.arange(40, dtype=np.float32).reshape(20, 2)
    feed = Feed(x, batch_size=5, shuffle=False)
    first = next(iter(feed))[0]
    if isinstance(first, np.ndarray):
        assert not np.shares_memory(first, x)
    np.testing.assert_array_equal(host(first), x[:5])


def test_a_stream_of_the_users_arrays_never_hands_them_out():
    x = np.arange(40, dtype=np.float32).reshape(20, 2)
    before = x.copy()
    feed = StreamFeed(lambda: [(x,)], batch_size=5, xp=arraycore.namespace("numpy"))
    for _ in range(2):
        for (batch,) in feed:
            assert not np.shares_memory(batch, x)
            batch *= -1
    np.testing.assert_array_equal(x, before)


def test_training_and_inference_leave_the_users_arrays_alone(xp):
    """fit, evaluate and predict over the user's arrays: bit for bit what they were."""
    import nnlayers
    from nnlayers.layers import Affine, Sequential

    rng = np.random.default_rng(0)
    x = rng.normal(size=(24, 3)).astype(np.float32)
    y = rng.integers(0, 2, 24)
    before_x, before_y = x.copy(), y.copy()
    model = nnlayers.Classifier(Sequential([Affine(8, seed=0), "relu", Affine(2, seed=1)]), (3,))
    nnlayers.fit(
        model,
        Feed(x, y, batch_size=8, shuffle=False, augment=_add_in_place),
        epochs=2,
        optimizer=nnlayers.optim.SGD(0.1),
        progress=False,
    )
    model.evaluate(x, y, batch_size=8)
    model.predict(x, batch_size=8)
    np.testing.assert_array_equal(x, before_x)
    np.testing.assert_array_equal(y, before_y)
