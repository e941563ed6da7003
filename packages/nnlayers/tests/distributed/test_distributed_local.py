"""nnlayers.distributed within one process (no MPI needed, any backend): sharded feeds, the
bucket layout and the model comparison, launcher detection, the gradient average of
``DataParallel.reduce`` against a stand-in for a second rank, and a world of one that trains
exactly as a plain model."""

from __future__ import annotations

import doctest
import importlib
import pkgutil
import re
from pathlib import Path

import numpy as np
import pytest

import arraycore
import nnlayers
import nnlayers.distributed as package
from nnlayers.distributed import Context, DataParallel, data_parallel, detect_launcher
from nnlayers.distributed.buckets import compare, describe, layout
from nnlayers.errors import DistributedError
from nnlayers.layers import Affine, Sequential
from nnlayers.models import Classifier
from nnlayers.optim import SGD

MODULES = [package.__name__] + [
    f"{package.__name__}.{m.name}" for m in pkgutil.iter_modules(package.__path__)
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0


# -- sharded feeds ----------------------------------------------------------------------------
def _labels(feed: nnlayers.Feed) -> list[list[int]]:
    return [arraycore.to_numpy(batch[-1]).tolist() for batch in feed]


@pytest.mark.parametrize("last_batch", ["keep", "drop", "pad"])
@pytest.mark.parametrize("world", [1, 2, 3])
@pytest.mark.parametrize("n", [11, 12, 4])
@pytest.mark.parametrize("shuffle", [True, False])
def test_ranks_batches_join_into_the_single_process_batches(last_batch, world, n, shuffle) -> None:
    x = np.arange(n, dtype=np.float32)[:, None]
    y = np.arange(n)
    if last_batch == "drop" and n < 2 * world:
        with pytest.raises(ValueError, match="would yield no batch"):
            nnlayers.Feed(x, y, batch_size=2, last_batch="drop", shard=(0, world))
        return
    kw = {"shuffle": shuffle, "seed": 3, "last_batch": last_batch}
    feeds = [nnlayers.Feed(x, y, batch_size=2, shard=(r, world), **kw) for r in range(world)]
    per_rank = [_labels(feed) for feed in feeds]
    assert {len(batches) for batches in per_rank} == {len(feeds[0])}  # same steps everywhere
    for feed, batches in zip(feeds, per_rank):
        assert sum(map(len, batches)) == feed.examples_per_epoch
        assert all(batches)  # no rank ever gets an empty batch
    single = _labels(nnlayers.Feed(x, y, batch_size=2 * world, **kw))
    joined = [[i for batches in per_rank for i in batches[k]] for k in range(len(per_rank[0]))]
    tail = n % (2 * world)
    if last_batch == "keep" and 0 < tail < world:  # padded to one example per rank
        assert joined[:-1] == single[:-1] and joined[-1][:tail] == single[-1]
    else:
        assert joined == single
    if last_batch != "pad" and not (last_batch == "keep" and 0 < tail < world):
        seen = [i for batches in per_rank for batch in batches for i in batch]
        assert len(seen) == len(set(seen))  # the ranks' parts are disjoint


def test_a_sharded_feed_reshuffles_every_epoch_alike_on_every_rank() -> None:
    x, y = np.zeros((40, 1), np.float32), np.arange(40)
    feeds = [nnlayers.Feed(x, y, batch_size=5, seed=1, shard=(r, 2)) for r in range(2)]
    first = [[i for batch in _labels(f) for i in batch] for f in feeds]
    second = [[i for batch in _labels(f) for i in batch] for f in feeds]
    assert sorted(first[0] + first[1]) == list(range(40)) == sorted(second[0] + second[1])
    assert first[0] != second[0]


@pytest.mark.parametrize("shard", [(2, 2), (-1, 2), (0, 0), (0,), "0/2", (0.0, 2), (True, 2)])
def test_a_bad_shard_is_refused(shard) -> None:
    with pytest.raises(ValueError, match="shard must be"):
        nnlayers.Feed(np.zeros((4, 1)), shard=shard)


def test_the_repr_names_the_shard() -> None:
    assert "shard=(1, 2)" in repr(nnlayers.Feed(np.zeros((4, 1)), shard=(1, 2)))


# -- buckets and the model comparison ------------------------------------------------------------
def _model(hidden: int = 8, seed: int = 0) -> Classifier:
    net = Sequential([Affine(hidden, activation="tanh"), Affine(3)], seed=seed)
    return Classifier(net, (5,), optimizer=SGD(0.5))


def test_buckets_group_by_dtype_and_size() -> None:
    model = _model()
    buckets = layout(model.params, bucket_bytes=5 * 8 * 4)  # the first weight fills one
    assert [[p.name for p in b.params] for b in buckets] == [
        ["affine/weight"],
        ["affine/bias", "affine_1/weight", "affine_1/bias"],
    ]
    assert buckets[1].offsets == (0, 8, 32) and buckets[1].size == 35


def test_the_comparison_names_the_first_parameter_that_differs() -> None:
    same = describe(_model().params)
    compare([same, same])
    with pytest.raises(DistributedError, match=r"'affine/weight' is \(5, 8\) float32 on rank 0"):
        compare([same, describe(_model(hidden=9).params)])
    with pytest.raises(DistributedError, match="rank 0 has parameter 'affine_1/bias'"):
        compare([same, same, same[:-1]])


def test_launchers_are_recognised_by_their_environment() -> None:
    assert detect_launcher({"OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_RANK": "3"}).rank == 3
    launch = detect_launcher({"PMI_SIZE": "2", "PMI_RANK": "0"})
    assert (launch.world_size, launch.rank) == (2, 0) and "Hydra" in str(launch.launcher)
    assert detect_launcher({"PMIX_RANK": "1"}).world_size is None
    assert detect_launcher({"HOME": "/root"}).launcher is None


# -- a world of one, and a stand-in for a second rank -----------------------------------------
def _batch(n: int = 16, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 5)).astype(np.float32)
    return x, rng.integers(0, 3, n).astype(np.int64)


def test_a_world_of_one_trains_exactly_as_a_plain_model() -> None:
    plain, wrapped = _model(), data_parallel(_model())
    assert wrapped.data_parallel.world_size == 1
    x, y = _batch(64)
    for model in (plain, wrapped):
        nnlayers.fit(model, nnlayers.Feed(x, y, batch_size=16, seed=2), epochs=2, progress=False)
    for a, b in zip(plain.params, wrapped.params):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert wrapped.data_parallel.reductions == 0  # nothing sent


class _Mirror(Context):
    """A context of two ranks whose other rank has the same gradients, scaled by ``other``
    (the examples of its batch over this rank's, as a weighted sum would see them)."""

    def __init__(self, other: float) -> None:
        super().__init__(rank=0, world_size=2)
        self.other = other

    def allreduce_sum(self, buffer: np.ndarray, what: str = "") -> np.ndarray:
        buffer *= 1.0 + self.other
        return buffer


@pytest.mark.parametrize("other", [1.0, 0.5])
def test_reduce_averages_in_flat_buckets_on_the_active_backend(other) -> None:
    """The other rank holds the same gradients: their weighted mean is this rank's own, moved
    through the host buffers and the buckets (three, at this size) and back into ``grad``."""
    model = _model()
    sync = DataParallel(model, _Mirror(other), engine="mpi", bucket_mb=30 * 4 / 2**20)
    model.gradients(*_batch())
    before = [np.asarray(arraycore.to_numpy(p.grad)).copy() for p in model.params]
    sync.reduce(model.params, 16)
    assert len(sync._layouts[tuple(id(p) for p in model.params)]) == 3
    for p, grad in zip(model.params, before):
        assert tuple(p.grad.shape) == grad.shape
        np.testing.assert_allclose(arraycore.to_numpy(p.grad), grad, rtol=1e-6, atol=1e-7)
    assert sync.reductions == 1 and sync.reduce_seconds > 0


def _nccl_or_skip():
    from nnlayers.distributed.engines import NCCLEngine, nccl_available

    xp = arraycore.namespace()
    if xp.name != "cuda":
        pytest.skip(
            f"NCCL sums CUDA buffers; this run's backend is {xp.name!r} (set ARRAYCORE_BACKEND=cuda)"
        )
    if not nccl_available():
        pytest.skip("CuPy's NCCL binding (cupy.cuda.nccl) is not available on this node")
    return NCCLEngine


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_nccl_engine_all_reduces_a_device_buffer_with_one_rank(dtype) -> None:
    """One rank's NCCL communicator (the single-GPU case): the sum is the buffer, in place on
    the device, for every float dtype the engine maps."""
    NCCLEngine = _nccl_or_skip()
    xp = arraycore.namespace()
    engine = NCCLEngine(Context(rank=0, world_size=1))
    host = np.arange(1000, dtype=dtype) / 7
    flat = xp.asarray(host)
    summed, on_host = engine.allreduce(xp, flat)
    assert on_host is None
    np.testing.assert_array_equal(xp.to_numpy(summed), host)


def test_nccl_reduce_leaves_one_ranks_training_unchanged() -> None:
    """The gradient buckets go through NCCL (one rank, so the mean is this rank's own): the
    trained parameters equal a plain model's."""
    NCCLEngine = _nccl_or_skip()
    plain, wrapped = _model(), _model()
    sync = DataParallel(wrapped, Context(rank=0, world_size=1), engine="nccl", bucket_mb=1e-4)
    sync.engine = NCCLEngine(sync.context)  # a world of one sends nothing unless told to
    x, y = _batch(64)
    for model in (plain, wrapped):
        optimizer = SGD(0.1, momentum=0.9, params=model.params)
        for step in range(4):
            model.gradients(x[16 * step : 16 * step + 16], y[16 * step : 16 * step + 16])
            if model is wrapped:
                sync.reduce(model.params, 16)
            optimizer.step()
    assert sync.reductions == 4 and len(sync._layouts) == 1
    for a, b in zip(plain.params, wrapped.params):
        np.testing.assert_allclose(
            arraycore.to_numpy(a.value), arraycore.to_numpy(b.value), rtol=1e-6, atol=1e-7
        )


def test_data_parallel_refuses_bad_arguments() -> None:
    with pytest.raises(ValueError, match="bucket_mb must be > 0"):
        data_parallel(_model(), bucket_mb=0)
    with pytest.raises(ValueError, match="engine must be"):
        DataParallel(_model(), _Mirror(1.0), engine="gloo")


TRAINING = Path(__file__).parents[2] / "docs" / "training.md"


def guide_snippets() -> list[str]:
    """The Python blocks of the guide's section "Data-parallel training", in order."""
    text = TRAINING.read_text(encoding="utf-8")
    section = text.split("\n## Data-parallel training\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^```python\n(.*?)^```", section, re.S | re.M)


def test_the_guide_runs_in_one_process(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    for block in guide_snippets():
        exec(compile(block, str(TRAINING), "exec"), namespace)
    assert capsys.readouterr().out.splitlines()[-1] == "rank 0: True"
    assert (tmp_path / "data_parallel_run.safetensors").is_file()
    assert namespace["optimizer"].learning_rate == 0.0  # the warm-up starts from zero
