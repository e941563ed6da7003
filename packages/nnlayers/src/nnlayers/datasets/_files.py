"""Where data sets live, and downloads that are verified before they are kept.

Downloads go to ``$NNLAYERS_DATA`` if set, else ``~/.cache/nnlayers``. Each file is streamed to
a temporary in the destination folder while its SHA-256 is computed, and renamed into place
only when size and checksum match the published ones: an interrupted or corrupted download never
leaves a file that looks complete, and the temporary of a killed download is removed by the
next write into that folder (:mod:`nnlayers._atomic`).

Every mirror gets an overall deadline and a stall limit: one that sends nothing for
``stall`` seconds, or has not delivered the whole file when its deadline passes, is left for
the next mirror. A progress bar (tqdm, on standard error) shows each download where standard
error is a terminal.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from .._atomic import atomic_write, check_target
from ..errors import FileFaultError

ENV_DATA = "NNLAYERS_DATA"
ENV_DEADLINE = "NNLAYERS_DOWNLOAD_DEADLINE"
STALL_SECONDS = 30.0
"""How long a mirror may send nothing before the download moves on to the next one."""
_MIN_DEADLINE = 120.0  # seconds per mirror, at least ...
_MIN_RATE = 200e3  # ... or the time the file takes at 200 kB/s
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


def download_deadline(size: int | None) -> float:
    """Seconds a mirror gets for a file of ``size`` bytes: ``$NNLAYERS_DOWNLOAD_DEADLINE`` if
    set, else 120 s or the time the file takes at 200 kB/s, whichever is longer."""
    configured = os.environ.get(ENV_DEADLINE, "").strip()
    if configured:
        try:
            seconds = float(configured)
        except ValueError:
            seconds = -1.0
        if not seconds > 0:
            raise ValueError(f"{ENV_DEADLINE}={configured!r}: expected a number of seconds > 0")
        return seconds
    return max(_MIN_DEADLINE, (size or 0) / _MIN_RATE)


def download(
    name: str,
    mirrors: Sequence[str],
    sha256: str,
    size: int | None,
    folder: Path,
    *,
    deadline: float | None = None,
    stall: float = STALL_SECONDS,
    progress: bool | None = None,
) -> Path:
    """Download ``name`` from the first mirror that serves it intact into ``folder``.

    Each mirror gets ``deadline`` seconds in all (default: :func:`download_deadline`) and may
    send nothing for at most ``stall`` seconds; a mirror that fails, stalls or is too slow is
    left for the next. ``progress`` shows a bar on standard error (default: when standard
    error is a terminal). Returns the path; raises :class:`DatasetError` listing what each
    mirror did when none worked, and at once the :class:`~nnlayers.errors.FileFaultError` of
    a local file system that refuses the file (full, read-only), naming its path.
    """
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError as exc:
        raise NotADirectoryError(f"download of {name}: {folder} is a file, not a folder") from exc
    target = check_target(folder / name, "download")
    limit = download_deadline(size) if deadline is None else float(deadline)
    wait = min(float(stall), limit)
    show = sys.stderr.isatty() if progress is None else progress
    failures = []
    for mirror in mirrors:
        url = mirror if mirror.endswith(name) else mirror.rstrip("/") + "/" + name
        try:
            _fetch(url, target, sha256, size, limit, wait, show)
            return target
        except FileFaultError:
            raise  # the local disk refused the file (full, read-only): no mirror can help
        except (OSError, http.client.HTTPException, DatasetError, ValueError) as exc:
            failures.append(f"{url}: {_reason(exc, wait)}")
            if show:
                print(f"{name}: {failures[-1]}; trying the next mirror", file=sys.stderr)
    tried = "\n  ".join(failures)
    raise DatasetError(
        f"could not download {name} (no network, or every mirror failed):\n  {tried}\n"
        f"Put the file into {folder} by hand, or pass root= a folder that holds it."
    )


def _reason(exc: BaseException, stall: float) -> str:
    if isinstance(exc, urllib.error.URLError) and not isinstance(exc, urllib.error.HTTPError):
        exc = exc.reason if isinstance(exc.reason, BaseException) else exc
    if isinstance(exc, TimeoutError):
        return f"stalled: no data for {stall:g} s"
    return str(exc) or type(exc).__name__


def _fetch(
    url: str, target: Path, sha256: str, size: int | None, deadline: float, stall: float, show: bool
) -> None:
    digest = hashlib.sha256()
    count = 0
    end = time.monotonic() + deadline
    with (
        atomic_write(target, label="download") as out,
        urllib.request.urlopen(url, timeout=stall) as response,
        _bar(url, target.name, size or _length(response), show) as bar,
    ):
        read = getattr(response, "read1", response.read)
        while chunk := read(_CHUNK):
            digest.update(chunk)
            out.write(chunk)
            count += len(chunk)
            bar.update(len(chunk))
            if size is not None and count > size:
                raise DatasetError(f"larger than the expected {size} bytes")
            if time.monotonic() > end:
                of = f" of {size}" if size is not None else ""
                raise DatasetError(
                    f"too slow: {count}{of} bytes when its deadline of {deadline:g} s passed"
                )
        if size is not None and count != size:
            raise DatasetError(f"got {count} bytes, expected {size}")
        if digest.hexdigest() != sha256.lower():
            raise DatasetError(
                f"SHA-256 mismatch: got {digest.hexdigest()}, expected {sha256.lower()}"
            )


def _length(response: Any) -> int | None:
    text = response.headers.get("Content-Length") if response.headers is not None else None
    return int(text) if text is not None and str(text).isdigit() else None


def _bar(url: str, name: str, total: int | None, show: bool) -> Any:
    from tqdm.auto import tqdm

    host = urllib.parse.urlsplit(url).hostname or url.split(":", 1)[0]
    return tqdm(
        total=total,
        desc=f"{name} from {host}",
        unit="B",
        unit_scale=True,
        unit_divisor=1024,
        file=sys.stderr,
        disable=not show,
        leave=True,
        mininterval=0.5,
    )


def check_split(owner: str, split: str, allowed: Sequence[str] = ("train", "test")) -> str:
    """``split`` if it is one of ``allowed``, else a ``ValueError`` naming them."""
    if split not in allowed:
        raise ValueError(
            f"{owner}: split must be {' or '.join(repr(s) for s in allowed)}, got {split!r}"
        )
    return split
