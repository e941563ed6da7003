"""Atomic file writes: new content goes to a temporary in the target's folder, then a rename.

A crash or an error part-way leaves the old file (or none), never half of a new one.
Checkpoints, training-curve PNGs, IDX files and downloaded datasets all go through
:func:`atomic_path` or :func:`atomic_write`.

The temporary is a private folder next to the target, named
``.<name>.<pid>@<host>.<random>.tmp`` (``pid`` the writing process, ``host`` the first 8 hex
digits of the SHA-256 of its host name), holding the new file under the target's name. It is
removed when the write ends, whether it succeeded or not. A process killed part-way (``kill -9``,
a lost node) cannot remove it, so every atomic write first removes the temporaries of earlier
writes into the same folder that no live process owns: only names of exactly this pattern,
made on this host, whose process no longer exists (``os.kill(pid, 0)`` finds no such process)
and whose folder no process holds locked (the writer holds an ``flock`` on it while it
writes, which the kernel releases when the writer dies; this protects writers in other PID
namespaces and reused PIDs). Temporaries of other programs, of other hosts sharing the folder,
and of older nnlayers versions (``.<name>.<random>.tmp``, with no owner recorded) are left alone.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import shutil
import socket
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from .errors import FileFaultError

try:
    import fcntl
except ImportError:  # Windows: no flock; temporaries are not cleaned up there (see below)
    fcntl = None  # type: ignore[assignment]

#: The first 8 hex digits of the SHA-256 of this host's name: temporaries record their host,
#: so that a folder shared between machines (NFS) never loses a live write of another one.
HOST_TAG = hashlib.sha256(socket.gethostname().encode("utf-8", "replace")).hexdigest()[:8]
_TEMPORARY = re.compile(
    r"\.(?P<name>.+)\.(?P<pid>[0-9]{1,10})@(?P<host>[0-9a-f]{8})\.[a-z0-9_]{8}\.tmp"
)
_MAX_NAME = 160  # bytes of the target's name kept in a temporary's name (NAME_MAX is 255)


def check_target(path: str | os.PathLike[str], label: str = "file") -> Path:
    """``path`` as a ``Path`` if a file can be written there, else an error naming it.

    An empty path raises ``ValueError``; an existing folder (or a path ending in a separator)
    ``IsADirectoryError``; a parent folder that does not exist ``FileNotFoundError``, one that
    is a file ``NotADirectoryError``, and one that cannot be looked up (a symbolic-link loop, no
    permission) the OS's error. Each is a :class:`~nnlayers.errors.FileFaultError` with the
    ``errno`` and ``filename`` ``path``. ``label`` starts the message (``"checkpoint"``).
    """
    text = os.fspath(path)
    if isinstance(text, bytes):
        text = os.fsdecode(text)
    if not text.strip():
        raise ValueError(f"{label} path {text!r} is empty: name the file to write")
    target = Path(text)
    if text.endswith(("/", os.sep)) or _is_dir(target):
        raise fault(
            errno.EISDIR, target, f"{label} {text}: is a folder, not a file; name a file inside it"
        )
    folder = target.parent
    try:
        st = folder.stat()
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            raise fault(exc, target, f"{label} {target}: folder {folder} does not exist") from None
        if exc.errno == errno.ENOTDIR:
            raise fault(
                exc, target, f"{label} {target}: a part of {folder} is a file, not a folder"
            ) from None
        raise fault(
            exc,
            target,
            f"{label} {target}: cannot write into the folder {folder}: {reason(exc, folder)}",
        ) from None
    if not stat.S_ISDIR(st.st_mode):
        raise fault(errno.ENOTDIR, target, f"{label} {target}: {folder} is a file, not a folder")
    return target


def fault(
    cause: OSError | int,
    path: str | os.PathLike[str],
    message: str,
    *,
    error: type[FileFaultError] = FileFaultError,
) -> FileFaultError:
    """A :class:`~nnlayers.errors.FileFaultError` (or ``error``, a subclass) saying ``message``
    about the user's ``path``, with the ``errno`` and ``strerror`` of ``cause`` (an OS error,
    or an ``errno`` code); also the ``OSError`` subclass Python has for that code."""
    code = cause if isinstance(cause, int) else cause.errno
    strerror = None if isinstance(cause, int) else cause.strerror
    if code is not None and not strerror:
        strerror = os.strerror(code)
    return error.of(code)(code, strerror, os.fspath(path), message)


def reason(cause: OSError | int, folder: str | os.PathLike[str] | None = None) -> str:
    """The OS's reason for ``cause`` and its ``errno`` name (``Read-only file system (EROFS)``);
    for a full device, whether it ran out of inodes rather than bytes (looked up on the file
    system of ``folder``)."""
    code = cause if isinstance(cause, int) else cause.errno
    if code is None:
        return str(cause)
    text = (None if isinstance(cause, int) else cause.strerror) or os.strerror(code)
    name = errno.errorcode.get(code, f"errno {code}")
    if code == errno.ENOSPC and folder is not None and _no_free_inodes(folder):
        return f"{text} ({name}: the file system has no free inodes left)"
    return f"{text} ({name})"


def _no_free_inodes(folder: str | os.PathLike[str]) -> bool:
    if not hasattr(os, "statvfs"):
        return False
    try:
        vfs = os.statvfs(folder)
    except OSError:
        return False
    return vfs.f_files > 0 and vfs.f_favail == 0


def _is_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(path.stat().st_mode)
    except OSError:
        return False  # not there (a new file), or a link that leads nowhere: written over


#: Codes of a file system refusing a write: an OS error of one of these from the code that
#: writes the temporary (``out.write``, a library's writer) is about the target's file system.
_STORAGE_FAULTS = frozenset(
    getattr(errno, name)
    for name in (
        "EROFS",
        "ENOSPC",
        "EDQUOT",
        "EFBIG",
        "EIO",
        "EACCES",
        "EPERM",
        "EMLINK",
        "ENAMETOOLONG",
        "ELOOP",
        "ENOENT",
        "ENOTDIR",
        "EISDIR",
        "EEXIST",
        "EXDEV",
        "ESTALE",
        "EOVERFLOW",
    )
    if hasattr(errno, name)
)


@contextlib.contextmanager
def atomic_path(
    target: str | os.PathLike[str],
    *,
    durable: bool = True,
    label: str = "file",
    action: str = "write",
    error: type[FileFaultError] = FileFaultError,
) -> Iterator[Path]:
    """Yield a path to write the new content of ``target`` to; it replaces ``target`` when the
    ``with`` block ends without error, and is deleted otherwise.

    The path lies in a private temporary folder next to ``target`` (so a writer that makes
    temporaries of its own, as the ``safetensors`` library does, makes them there too). The new
    file gets the mode of the file it replaces, or the usual ``0o666`` less the umask. With
    ``durable`` the data and the rename are synced to disk before returning. Stale temporaries
    of killed writes into the same folder are removed first (see the module's docstring).

    A fault of the file system (read-only, full, no free inodes, a file-size limit, an I/O
    error), whether in this function or in the ``with`` block's writes to the temporary, raises
    ``error`` (a :class:`~nnlayers.errors.FileFaultError`) naming ``target``, never the
    temporary: ``"<label> <target>: cannot <action>: <the OS's reason>; nothing was
    replaced"``. Other errors of the ``with`` block (a lost connection, a bad value) pass
    through unchanged.
    """
    destination = check_target(target, label)
    folder = destination.parent
    previous = os.path.lexists(destination)

    def failed(exc: OSError) -> FileFaultError:
        kept = "the previous file is unchanged" if previous else "nothing was written"
        return fault(
            exc,
            destination,
            f"{label} {destination}: cannot {action}: {reason(exc, folder)}; {kept}",
            error=error,
        )

    remove_stale_temporaries(folder)
    try:
        staging = Path(tempfile.mkdtemp(dir=folder, prefix=_prefix(destination), suffix=".tmp"))
        lock = _hold_lock(staging)
    except OSError as exc:
        raise failed(exc) from exc
    try:
        temp = staging / destination.name
        try:
            yield temp
        except FileFaultError:
            raise
        except OSError as exc:
            if exc.errno not in _STORAGE_FAULTS or not _within(exc.filename, staging):
                raise
            raise failed(exc) from exc
        if not temp.is_file():
            raise fault(errno.ENOENT, destination, f"{label} {destination}: nothing was written")
        try:
            _finish(temp, destination, durable)
        except OSError as exc:
            raise failed(exc) from exc
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        if lock is not None:
            os.close(lock)
    if durable:
        _fsync_folder(folder)


def _within(filename: object, folder: Path) -> bool:
    """Whether an OS error's ``filename`` is none (a write to an open file) or lies in
    ``folder`` (the temporary, or a writer's own temporary beside it)."""
    if filename is None:
        return True
    if not isinstance(filename, str | bytes | os.PathLike):
        return False
    name, inside = os.path.abspath(os.fsdecode(filename)), os.path.abspath(folder)
    return name == inside or name.startswith(inside + os.sep)


@contextlib.contextmanager
def atomic_write(
    target: str | os.PathLike[str],
    *,
    durable: bool = True,
    label: str = "file",
    action: str = "write",
    error: type[FileFaultError] = FileFaultError,
) -> Iterator[BinaryIO]:
    """Yield a binary file that replaces ``target`` when the ``with`` block ends without error
    (:func:`atomic_path` with the file opened for writing)."""
    with (
        atomic_path(target, durable=durable, label=label, action=action, error=error) as temp,
        temp.open("xb") as out,
    ):
        yield out


def remove_stale_temporaries(folder: str | os.PathLike[str]) -> list[Path]:
    """Remove the temporaries of killed atomic writes in ``folder``; returns what was removed.

    Only names of this module's pattern made on this host, whose process is gone and that no
    process holds locked, are removed (see the module's docstring). Does nothing on platforms
    without POSIX signals and ``flock`` (Windows, where ``os.kill(pid, 0)`` would end the
    process rather than probe it).
    """
    if os.name != "posix" or fcntl is None:
        return []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return []
    removed = []
    for entry in entries:
        match = _TEMPORARY.fullmatch(entry.name)
        if match is None or match["host"] != HOST_TAG:
            continue
        pid = int(match["pid"])
        if pid == os.getpid() or _alive(pid):
            continue
        with contextlib.suppress(OSError):  # gone already (another cleaner), or not ours to remove
            if entry.is_dir(follow_symlinks=False) and _remove_unlocked(Path(entry.path)):
                removed.append(Path(entry.path))
    return removed


def _prefix(target: Path) -> str:
    name = target.name
    while len(os.fsencode(name)) > _MAX_NAME:
        name = name[:-1]
    return f".{name}.{os.getpid()}@{HOST_TAG}."


def _alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (as far as this process can tell: when unsure, yes)."""
    if pid <= 0:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OSError, OverflowError, ValueError):
        return True  # PermissionError: it exists but belongs to another user
    return True


def _hold_lock(staging: Path) -> int | None:
    """An open descriptor of ``staging`` with an exclusive ``flock`` on it (POSIX only)."""
    if fcntl is None:
        return None
    fd = os.open(staging, os.O_RDONLY)
    with contextlib.suppress(OSError):  # a file system without flock: the PID check guards
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


def _remove_unlocked(path: Path) -> bool:
    """Remove the folder ``path`` unless another process holds an ``flock`` on it."""
    assert fcntl is not None
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False  # its writer is alive (in another PID namespace, or a reused PID)
        except OSError:
            pass  # no flock on this file system
        shutil.rmtree(path)
        return True
    finally:
        os.close(fd)


def _finish(temp: Path, target: Path, durable: bool) -> None:
    """Give ``temp`` the mode ``target`` should have, sync it, and rename it over ``target``."""
    fd = os.open(temp, os.O_RDWR)
    try:
        _set_mode(fd, target)
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temp, target)


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
