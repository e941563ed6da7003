"""Atomic file writes: a temporary file in the target's folder, flushed, then renamed over it.

A crash or an error part-way leaves the old file (or none), never half of a new one, and no
temporary file behind. Checkpoints, training-curve PNGs and downloaded datasets all go through
:func:`atomic_write`.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO


@contextlib.contextmanager
def atomic_write(target: Path, *, durable: bool = True) -> Iterator[BinaryIO]:
    """Yield a binary file that replaces ``target`` when the ``with`` block ends without error.

    The new file gets the mode of the file it replaces, or the usual ``0o666`` less the umask
    (``mkstemp`` alone would leave it readable by its owner only). With ``durable`` the data
    and the rename are synced to disk before returning.
    """
    folder = target.parent if str(target.parent) else Path(".")
    fd, temp = tempfile.mkstemp(dir=folder, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            _set_mode(out.fileno(), target)
            yield out
            out.flush()
            if durable:
                os.fsync(out.fileno())
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    if durable:
        _fsync_folder(folder)


def _set_mode(fd: int, target: Path) -> None:
    if not hasattr(os, "fchmod"):  # Windows: files have no POSIX mode to set
        return
    try:
        mode = target.stat().st_mode & 0o7777
    except OSError:
        mode = 0o666 & ~_umask()
    os.fchmod(fd, mode)


def _umask() -> int:
    # Linux shows the umask without changing it; elsewhere set-and-restore is the only way.
    with contextlib.suppress(OSError, ValueError), open("/proc/self/status") as status:
        for line in status:
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _fsync_folder(folder: Path) -> None:
    # Makes the rename itself durable; not possible on every platform (Windows).
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
