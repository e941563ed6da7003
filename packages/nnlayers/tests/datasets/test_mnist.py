"""MNIST and Fashion-MNIST loaders on small files in the official IDX layout and names."""

from __future__ import annotations

import numpy as np
import pytest

import nnlayers.datasets.mnist as mnist
from nnlayers.datasets import (
    FASHION_MNIST,
    MNIST,
    DatasetError,
    RemoteFiles,
    cache_dir,
    load_fashion_mnist,
    load_mnist,
    sha256_file,
    write_idx,
)

NAMES = {
    "train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
    "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"),
}


def make_files(folder, n_train=5, n_test=3, gz=True, seed=0):
    """The four MNIST files with random content; returns {split: (images, labels)}."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    made = {}
    for split, n in (("train", n_train), ("test", n_test)):
        images = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
        labels = rng.integers(0, 10, size=n, dtype=np.uint8)
        for name, array in zip(NAMES[split], (images, labels)):
            write_idx(folder / (name if gz else name.removesuffix(".gz")), array)
        made[split] = (images, labels)
    return made


@pytest.mark.parametrize("gz", [True, False])
@pytest.mark.parametrize("split", ["train", "test"])
def test_load_from_a_local_folder(tmp_path, gz, split):
    made = make_files(tmp_path / "data", gz=gz)
    x, y = load_mnist(tmp_path / "data", split=split, download=False)
    images, labels = made[split]
    assert x.dtype == np.float32 and x.shape == (len(labels), 1, 28, 28)
    assert y.dtype == np.int64 and y.tolist() == labels.tolist()
    np.testing.assert_allclose(x[:, 0] * 255, images, atol=1e-4)
    assert x.min() >= 0.0 and x.max() <= 1.0
    raw = load_mnist(tmp_path / "data", split=split, download=False, normalize=False)
    np.testing.assert_array_equal(raw.inputs, images)


def test_fashion_mnist_uses_the_same_layout(tmp_path):
    make_files(tmp_path / "f")
    data = load_fashion_mnist(tmp_path / "f", split="test", download=False)
    assert data.inputs.shape == (3, 1, 28, 28) and data.targets.shape == (3,)


def test_files_that_do_not_fit_are_errors(tmp_path):
    folder = tmp_path / "data"
    make_files(folder)
    write_idx(folder / NAMES["train"][1], np.zeros(4, dtype=np.uint8))
    with pytest.raises(DatasetError, match=r"5 images in train-images.* but 4 labels"):
        load_mnist(folder, download=False)
    write_idx(folder / NAMES["train"][0], np.zeros((4, 8, 8), dtype=np.uint8))
    with pytest.raises(DatasetError, match=r"expected uint8 images of shape \(N, 28, 28\)"):
        load_mnist(folder, download=False)
    write_idx(folder / NAMES["train"][0], np.zeros((4, 28, 28), dtype=np.uint8))
    write_idx(folder / NAMES["train"][1], np.full(4, 12, dtype=np.uint8))
    with pytest.raises(DatasetError, match="label 12"):
        load_mnist(folder, download=False)


def test_missing_files_without_download(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"train-images-idx3-ubyte\.gz .* download=False"):
        load_mnist(tmp_path, download=False)
    with pytest.raises(ValueError, match="split must be 'train' or 'test'"):
        load_mnist(tmp_path, split="validation")


def _local_remote(server, made_in, first="missing"):
    files = {
        name: (sha256_file(made_in / name), (made_in / name).stat().st_size)
        for names in NAMES.values()
        for name in names
    }
    for name in files:
        (server.folder / name).write_bytes((made_in / name).read_bytes())
    return RemoteFiles("mnist", (server.url(first), server.url("files")), files)


def test_download_into_the_cache_with_checksums(tmp_path, server, mirror, data_cache, monkeypatch):
    made = make_files(tmp_path / "source")
    remote = _local_remote(server, tmp_path / "source")
    monkeypatch.setattr(mnist, "MNIST", remote)
    _, y = load_mnist(split="train")
    assert cache_dir() == data_cache
    assert sorted(p.name for p in (data_cache / "mnist").iterdir()) == sorted(NAMES["train"])
    assert y.tolist() == made["train"][1].tolist()
    # a second load reads the cache: the mirror is no longer needed
    for p in mirror.iterdir():
        p.unlink()
    assert load_mnist(split="train").targets.tolist() == y.tolist()


def test_a_bad_checksum_keeps_nothing(tmp_path, server, data_cache, monkeypatch):
    make_files(tmp_path / "source")
    remote = _local_remote(server, tmp_path / "source")
    name = NAMES["test"][0]
    tampered = dict(remote.files)
    tampered[name] = ("0" * 64, remote.files[name][1])
    monkeypatch.setattr(mnist, "MNIST", RemoteFiles("mnist", remote.mirrors, tampered))
    with pytest.raises(DatasetError) as info:
        load_mnist(split="test")
    message = str(info.value)
    assert f"could not download {name}" in message and "SHA-256 mismatch" in message
    assert "/missing/" in message and "404" in message  # every mirror tried is reported
    assert not (data_cache / "mnist" / name).exists()
    assert [p.name for p in (data_cache / "mnist").iterdir()] == []  # no partial files


def test_a_wrong_size_is_rejected(tmp_path, server, monkeypatch):
    make_files(tmp_path / "source")
    remote = _local_remote(server, tmp_path / "source")
    name = NAMES["test"][1]
    files = dict(remote.files)
    files[name] = (files[name][0], files[name][1] - 1)
    monkeypatch.setattr(mnist, "MNIST", RemoteFiles("mnist", remote.mirrors[1:], files))
    with pytest.raises(DatasetError, match="expected"):
        load_mnist(split="test")


def test_official_files_are_recorded():
    for remote in (MNIST, FASHION_MNIST):
        assert sorted(remote.files) == sorted(n for names in NAMES.values() for n in names)
        for sha256, size in remote.files.values():
            assert len(sha256) == 64 and int(sha256, 16) >= 0 and size > 0
    assert MNIST.files["train-images-idx3-ubyte.gz"][1] == 9912422


def test_cache_dir_default(monkeypatch, tmp_path):
    monkeypatch.delenv("NNLAYERS_DATA")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert cache_dir() == tmp_path / ".cache" / "nnlayers"
