"""CIFAR-10 from small files in the official binary layout: folder, archive and download."""

from __future__ import annotations

import io
import pickle
import tarfile

import numpy as np
import pytest

import nnlayers.datasets.cifar as cifar
from nnlayers.datasets import CIFAR10, DatasetError, RemoteFiles, load_cifar10, sha256_file

BATCHES = [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"]


def make_batches(seed=0, records=3):
    """name -> (bytes, images uint8 (n,3,32,32), labels) for the six binary batches."""
    rng = np.random.default_rng(seed)
    out = {}
    for i, name in enumerate(BATCHES):
        n = records + i % 2
        images = rng.integers(0, 256, size=(n, 3, 32, 32), dtype=np.uint8)
        labels = rng.integers(0, 10, size=n, dtype=np.uint8)
        blob = np.concatenate([labels[:, None], images.reshape(n, -1)], axis=1).tobytes()
        out[name] = (blob, images, labels)
    return out


def write_folder(folder, batches):
    folder.mkdir(parents=True, exist_ok=True)
    for name, (blob, _, _) in batches.items():
        (folder / name).write_bytes(blob)
    (folder / "batches.meta.txt").write_text("\n".join(cifar.CIFAR10_CLASSES) + "\n")


def write_archive(path, batches, extra=None):
    with tarfile.open(path, "w:gz") as tar:
        files = {f"cifar-10-batches-bin/{n}": b for n, (b, _, _) in batches.items()}
        files["cifar-10-batches-bin/batches.meta.txt"] = b"airplane\n"
        files.update(extra or {})
        for name, blob in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob))


def expected(batches, split):
    names = BATCHES[:5] if split == "train" else BATCHES[5:]
    images = np.concatenate([batches[n][1] for n in names])
    labels = np.concatenate([batches[n][2] for n in names]).astype(np.int64)
    return images, labels


@pytest.mark.parametrize("layout", ["batch folder", "parent folder", "archive"])
@pytest.mark.parametrize("split", ["train", "test"])
def test_load_binary_version(tmp_path, layout, split):
    batches = make_batches()
    if layout == "archive":
        write_archive(tmp_path / "cifar-10-binary.tar.gz", batches)
        root = tmp_path
    else:
        write_folder(tmp_path / "cifar-10-batches-bin", batches)
        root = tmp_path / "cifar-10-batches-bin" if layout == "batch folder" else tmp_path
    x, y = load_cifar10(root, split=split, download=False)
    images, labels = expected(batches, split)
    assert x.dtype == np.float32 and x.shape == images.shape and x.shape[1:] == (3, 32, 32)
    assert y.dtype == np.int64 and y.tolist() == labels.tolist()
    np.testing.assert_allclose(x * 255, images, atol=1e-4)
    raw, _ = load_cifar10(root, split=split, download=False, normalize=False)
    np.testing.assert_array_equal(raw, images)
    # channel planes: the first 1024 bytes of a record are red, row by row
    blob = batches[BATCHES[0 if split == "train" else 5]][0]
    assert raw[0, 0, 0, :4].tolist() == list(blob[1:5]) and raw[0, 1, 0, 0] == blob[1 + 1024]


def test_corrupt_batches(tmp_path):
    batches = make_batches()
    folder = tmp_path / "cifar-10-batches-bin"
    write_folder(folder, batches)
    (folder / "test_batch.bin").write_bytes(batches["test_batch.bin"][0][:-100])
    with pytest.raises(DatasetError, match=r"test_batch\.bin has \d+ bytes, not a whole number"):
        load_cifar10(folder, split="test", download=False)
    blob = bytearray(batches["test_batch.bin"][0])
    blob[3073] = 42  # label of record 1
    (folder / "test_batch.bin").write_bytes(bytes(blob))
    with pytest.raises(DatasetError, match="record 1 has label 42"):
        load_cifar10(folder, split="test", download=False)


def test_truncated_archive(tmp_path):
    write_archive(tmp_path / "cifar-10-binary.tar.gz", make_batches())
    data = (tmp_path / "cifar-10-binary.tar.gz").read_bytes()
    (tmp_path / "cifar-10-binary.tar.gz").write_bytes(data[: len(data) // 2])
    with pytest.raises(DatasetError, match="corrupt or truncated"):
        load_cifar10(tmp_path, download=False)


def test_the_python_version_is_refused_without_unpickling(tmp_path, monkeypatch):
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    (folder / "data_batch_1").write_bytes(pickle.dumps({"labels": [1]}))

    def no_unpickling(*args, **kwargs):
        raise AssertionError("unpickled a data file")

    monkeypatch.setattr(pickle, "load", no_unpickling)
    monkeypatch.setattr(pickle, "loads", no_unpickling)
    with pytest.raises(DatasetError, match=r"Python version of CIFAR-10.*pickles.*binary version"):
        load_cifar10(tmp_path)


def test_missing_data_without_download(tmp_path):
    with pytest.raises(FileNotFoundError, match="download=False"):
        load_cifar10(tmp_path, download=False)
    with pytest.raises(ValueError, match="split must be"):
        load_cifar10(tmp_path, split="all")


def test_download_verifies_and_extracts_only_the_batches(
    tmp_path, server, mirror, data_cache, monkeypatch
):
    batches = make_batches()
    archive = mirror / "cifar-10-binary.tar.gz"
    # an archive member with a path outside the folder must not be written anywhere
    write_archive(
        archive, batches, extra={"../../evil.txt": b"x", "cifar-10-batches-bin/../../e2": b"y"}
    )
    remote = RemoteFiles(
        "cifar-10",
        (server.url("files"),),
        {"cifar-10-binary.tar.gz": (sha256_file(archive), archive.stat().st_size)},
    )
    monkeypatch.setattr(cifar, "CIFAR10", remote)
    _, y = load_cifar10(split="test")
    assert y.tolist() == expected(batches, "test")[1].tolist()
    folder = data_cache / "cifar-10"
    assert sorted(p.name for p in folder.iterdir()) == ["cifar-10-batches-bin"]
    assert sorted(p.name for p in (folder / "cifar-10-batches-bin").iterdir()) == sorted(
        [*BATCHES, "batches.meta.txt"]
    )
    assert not list(tmp_path.rglob("evil.txt")) and not list(tmp_path.rglob("e2"))
    archive.unlink()
    assert load_cifar10(split="train").targets.tolist() == expected(batches, "train")[1].tolist()


def test_download_with_a_bad_checksum(server, mirror, data_cache, monkeypatch):
    write_archive(mirror / "cifar-10-binary.tar.gz", make_batches())
    remote = RemoteFiles(
        "cifar-10", (server.url("files"),), {"cifar-10-binary.tar.gz": ("f" * 64, None)}
    )
    monkeypatch.setattr(cifar, "CIFAR10", remote)
    with pytest.raises(DatasetError, match="SHA-256 mismatch"):
        load_cifar10()
    assert list((data_cache / "cifar-10").iterdir()) == []


def test_official_archive_is_recorded():
    sha256, size = CIFAR10.files["cifar-10-binary.tar.gz"]
    assert sha256 == "c4a38c50a1bc5f3a1c5537f2155ab9d68f9f25eb1ed8d9ddda3db29a59bca1dd"
    assert size == 170052171
