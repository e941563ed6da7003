"""Where data sets live, and downloads that are verified before they are kept.

Downloads go to ``$NNLAYERS_DATA`` if set, else ``~/.cache/nnlayers``. Each file is streamed to
a temporary file in the destination folder while its SHA-256 is computed, and renamed into place
only when size and checksum match the published ones: an interrupted or corrupted download never
leaves a file that looks complete.
"""

from __future__ import annotations

import hashlib
import os
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np

from .._atomic import atomic_write

ENV_DATA = "NNLAYERS_DATA"
_CHUNK = 1 << 20


class DatasetError(ValueError):
    """A data file that is corrupt, truncated, of the wrong kind, or fails its checksum."""


class Dataset(NamedTuple):
    """Host arrays of a data set: ``inputs`` and integer ``targets`` (unpacks as a pair)."""

    inputs: np.ndarray
    targets: np.ndarray


@dataclass(frozen=True)
class RemoteFiles:
    """Files published at a set of mirrors, with their SHA-256 and size in bytes."""

    folder: str
    mirrors: tuple[str, ...]
    files: dict[str, tuple[str, int | None]] = field(default_factory=dict)


def cache_dir() -> Path:
    """The folder downloads go to: ``$NNLAYERS_DATA``, else ``~/.cache/nnlayers``."""
    configured = os.environ.get(ENV_DATA, "").strip()
    if configured:
        return Path(configured).expanduser()
    return Path.home() / ".cache" / "nnlayers"


def sha256_file(path: str | os.PathLike[str]) -> str:
    """The SHA-256 of a file, hex encoded."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def download(
    name: str, mirrors: Sequence[str], sha256: str, size: int | None, folder: Path
) -> Path:
    """Download ``name`` from the first mirror that serves it intact into ``folder``.

    Returns the path; raises :class:`DatasetError` listing what each mirror did when none
    worked.
    """
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / name
    failures = []
    for mirror in mirrors:
        url = mirror if mirror.endswith(name) else mirror.rstrip("/") + "/" + name
        try:
            _fetch(url, target, sha256, size)
            return target
        except (OSError, urllib.error.URLError, DatasetError, ValueError) as exc:
            failures.append(f"{url}: {exc}")
    tried = "\n  ".join(failures)
    raise DatasetError(
        f"could not download {name} (no network, or every mirror failed):\n  {tried}\n"
        f"Put the file into {folder} by hand, or pass root= a folder that holds it."
    )


def _fetch(url: str, target: Path, sha256: str, size: int | None) -> None:
    digest = hashlib.sha256()
    count = 0
    with atomic_write(target) as out, urllib.request.urlopen(url, timeout=60) as response:
        while chunk := response.read(_CHUNK):
            digest.update(chunk)
            out.write(chunk)
            count += len(chunk)
            if size is not None and count > size:
                raise DatasetError(f"larger than the expected {size} bytes")
        if size is not None and count != size:
            raise DatasetError(f"got {count} bytes, expected {size}")
        if digest.hexdigest() != sha256.lower():
            raise DatasetError(
                f"SHA-256 mismatch: got {digest.hexdigest()}, expected {sha256.lower()}"
            )


def check_split(owner: str, split: str, allowed: Sequence[str] = ("train", "test")) -> str:
    """``split`` if it is one of ``allowed``, else a ``ValueError`` naming them."""
    if split not in allowed:
        raise ValueError(
            f"{owner}: split must be {' or '.join(repr(s) for s in allowed)}, got {split!r}"
        )
    return split
