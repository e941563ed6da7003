"""CIFAR-10: 32x32 colour images of 10 classes, read from the pickle-free binary version.

The binary version (``cifar-10-binary.tar.gz``) stores fixed-size records: one label byte and
3,072 pixel bytes (1,024 red, then green, then blue, each row by row). It is read without
unpickling anything; the Python version of the data set is a set of pickles, which nnlayers
refuses to load (unpickling runs code from the file).
"""

from __future__ import annotations

import os
import tarfile
from pathlib import Path

import numpy as np

from .._atomic import atomic_write
from ._files import Dataset, DatasetError, RemoteFiles, cache_dir, check_split, download

CIFAR10 = RemoteFiles(
    folder="cifar-10",
    mirrors=("https://www.cs.toronto.edu/~kriz/",),
    files={
        "cifar-10-binary.tar.gz": (
            "c4a38c50a1bc5f3a1c5537f2155ab9d68f9f25eb1ed8d9ddda3db29a59bca1dd",
            170052171,
        ),
    },
)
"""The official CIFAR-10 binary archive (Krizhevsky), its SHA-256 and size, and mirror."""

CIFAR10_CLASSES = (
    "airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck",
)  # fmt: skip
"""CIFAR-10's class names, by label."""

ARCHIVE = "cifar-10-binary.tar.gz"
BATCH_FOLDER = "cifar-10-batches-bin"
TRAIN_BATCHES = tuple(f"data_batch_{i}.bin" for i in range(1, 6))
TEST_BATCHES = ("test_batch.bin",)
RECORD = 1 + 3 * 32 * 32


def load_cifar10(
    root: str | os.PathLike[str] | None = None,
    split: str = "train",
    *,
    download: bool = True,
    normalize: bool = True,
) -> Dataset:
    """CIFAR-10's ``"train"`` (50,000, five batches) or ``"test"`` (10,000) split.

    ``root`` may be the ``cifar-10-batches-bin`` folder, a folder that contains it, or a folder
    holding ``cifar-10-binary.tar.gz`` (read in place, nothing extracted). Without ``root`` the
    cache folder ``<cache>/cifar-10`` is used; when the data are missing and ``download`` is
    true, the archive is downloaded there, checked against its SHA-256, and its batch files are
    extracted (only those, by name).

    Returns ``Dataset(inputs, targets)``: float32 ``(N, 3, 32, 32)`` in ``[0, 1]``
    (``normalize=False``: uint8), labels int64 ``(N,)``. Class names: :data:`CIFAR10_CLASSES`.
    """
    check_split("load_cifar10", split)
    names = TRAIN_BATCHES if split == "train" else TEST_BATCHES
    folder = Path(root) if root is not None else cache_dir() / CIFAR10.folder
    blobs = _find(folder, names, download, root is None)
    parts = [_decode(blob, label) for label, blob in blobs]
    images = np.concatenate([p[0] for p in parts])
    labels = np.concatenate([p[1] for p in parts])
    if not normalize:
        return Dataset(images, labels)
    return Dataset(images.astype(np.float32) / np.float32(255.0), labels)


def _find(
    folder: Path, names: tuple[str, ...], fetch: bool, in_cache: bool
) -> list[tuple[str, bytes]]:
    for candidate in (folder, folder / BATCH_FOLDER):
        if all((candidate / n).is_file() for n in names):
            return [(str(candidate / n), (candidate / n).read_bytes()) for n in names]
    if (folder / ARCHIVE).is_file():
        return _from_archive(folder / ARCHIVE, names)
    if (folder / "cifar-10-batches-py").is_dir() or (folder / "data_batch_1").is_file():
        raise DatasetError(
            f"load_cifar10: {folder} holds the Python version of CIFAR-10, which is stored as "
            f"pickles; nnlayers does not unpickle data files (that can run code). Use the "
            f"binary version, {ARCHIVE} (download=True fetches it)."
        )
    if not fetch:
        raise FileNotFoundError(
            f"load_cifar10: no {BATCH_FOLDER}/ batch files or {ARCHIVE} in {folder}, and "
            f"download=False"
        )
    sha256, size = CIFAR10.files[ARCHIVE]
    archive = download(ARCHIVE, CIFAR10.mirrors, sha256, size, folder)
    _extract(archive, folder / BATCH_FOLDER)
    archive.unlink()
    return [
        (str(folder / BATCH_FOLDER / n), (folder / BATCH_FOLDER / n).read_bytes()) for n in names
    ]


def _members(archive: Path, tar: tarfile.TarFile) -> dict[str, tarfile.TarInfo]:
    found = {}
    for member in tar.getmembers():
        name = member.name.removeprefix("./")
        if member.isfile() and name.startswith(BATCH_FOLDER + "/"):
            found[name.split("/", 1)[1]] = member
    return found


def _from_archive(archive: Path, names: tuple[str, ...]) -> list[tuple[str, bytes]]:
    try:
        with tarfile.open(archive, "r:gz") as tar:
            members = _members(archive, tar)
            missing = [n for n in names if n not in members]
            if missing:
                raise DatasetError(
                    f"load_cifar10: {archive} lacks {', '.join(missing)}; is it the binary "
                    f"version ({ARCHIVE})?"
                )
            out = []
            for n in names:
                handle = tar.extractfile(members[n])
                assert handle is not None
                out.append((f"{archive}:{BATCH_FOLDER}/{n}", handle.read()))
            return out
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise DatasetError(f"load_cifar10: {archive} is corrupt or truncated ({exc})") from exc


def _extract(archive: Path, destination: Path) -> None:
    """Write the batch files of the archive into ``destination`` (regular files, by name only,
    never paths taken from the archive), each atomically."""
    destination.mkdir(parents=True, exist_ok=True)
    wanted = (*TRAIN_BATCHES, *TEST_BATCHES, "batches.meta.txt")
    for label, blob in _from_archive(archive, wanted):
        name = label.rsplit("/", 1)[1]
        with atomic_write(destination / name) as out:
            out.write(blob)


def _decode(blob: bytes, label: str) -> tuple[np.ndarray, np.ndarray]:
    if len(blob) == 0 or len(blob) % RECORD:
        raise DatasetError(
            f"load_cifar10: {label} has {len(blob)} bytes, not a whole number of "
            f"{RECORD}-byte records (truncated or not a CIFAR-10 binary batch)"
        )
    records = np.frombuffer(blob, dtype=np.uint8).reshape(-1, RECORD)
    labels = records[:, 0].astype(np.int64)
    bad = np.flatnonzero(labels > 9)
    if bad.size:
        raise DatasetError(
            f"load_cifar10: {label} record {int(bad[0])} has label {int(labels[bad[0]])}, "
            f"expected 0 to 9 (corrupt file)"
        )
    images = records[:, 1:].reshape(-1, 3, 32, 32).copy()
    return images, labels
