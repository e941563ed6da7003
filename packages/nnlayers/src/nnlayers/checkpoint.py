"""Checkpoints: named arrays plus metadata in a safetensors file, never pickle.

Files are written and read by the ``safetensors`` library (an 8-byte little-endian header
length, a JSON header, then the raw little-endian data), so other safetensors tools read them,
and :func:`load_checkpoint` reads files those tools write. Arrays are copied to the host when
saved and come back as host NumPy arrays, so a checkpoint saved on one backend loads on any
other. The layout is the one nnlayers wrote itself before (files of earlier versions load
unchanged, and they read the files of this one), except that tensors of the same item size
are ordered by dtype as safetensors does, then by name.

Writes are atomic: the file is written into a temporary folder next to ``path``, flushed to disk
and then renamed over ``path``, so a crash leaves the old checkpoint or the new one, never half
of one; temporaries that killed saves leave behind are removed by the next save into the folder
(:mod:`nnlayers._atomic`). nnlayers also records a SHA-256 of the header and data in the
metadata, so a corrupt or truncated file is an error rather than silently wrong weights.

>>> import numpy as np, tempfile, os
>>> path = os.path.join(tempfile.mkdtemp(), "model.safetensors")
>>> _ = save_checkpoint(path, {"W": np.eye(2, dtype="float32")}, {"epoch": 3, "note": "best"})
>>> tensors, meta = load_checkpoint(path)
>>> tensors["W"].tolist(), meta
([[1.0, 0.0], [0.0, 1.0]], {'epoch': 3, 'note': 'best'})
"""

from __future__ import annotations

import errno
import hashlib
import json
import math
import os
import re
import stat
import struct
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import safetensors
import safetensors.numpy

import arraycore

from ._atomic import atomic_path, check_target, fault, reason
from .errors import FileFaultError, NNLayersError

MetadataValue = str | int | float | bool

_DTYPES: dict[str, np.dtype] = {
    "BOOL": np.dtype("bool"),
    "U8": np.dtype("<u1"),
    "I8": np.dtype("<i1"),
    "U16": np.dtype("<u2"),
    "I16": np.dtype("<i2"),
    "U32": np.dtype("<u4"),
    "I32": np.dtype("<i4"),
    "U64": np.dtype("<u8"),
    "I64": np.dtype("<i8"),
    "F16": np.dtype("<f2"),
    "F32": np.dtype("<f4"),
    "F64": np.dtype("<f8"),
}
_CODES = {dt.newbyteorder("=") if dt.itemsize > 1 else dt: code for code, dt in _DTYPES.items()}
_FORMAT_KEY = "nnlayers.format"
_FORMAT = "1"
_DIGEST_KEY = "nnlayers.sha256"
_MAX_HEADER = 100 * 1024 * 1024
_ATTEMPTS = 3  # reads of a file that another process replaces while it is being read

_Fail = Callable[[str], "CheckpointError"]


class CheckpointError(NNLayersError, ValueError):
    """A checkpoint that cannot be read or does not fit: the message names the file."""


class CheckpointIOError(CheckpointError, FileFaultError):
    """The operating system refused to save or load a checkpoint: a read-only or full file
    system, no free inodes, a file-size limit, no permission, an I/O error.

    Both a :class:`CheckpointError` and a :class:`~nnlayers.errors.FileFaultError` (an
    ``OSError`` with the OS's ``errno`` and ``strerror``, ``filename`` the checkpoint's path),
    so ``except CheckpointError`` and ``except OSError`` both catch it. A path that names
    nothing (``FileNotFoundError``), a folder (``IsADirectoryError``), passes through a file
    (``NotADirectoryError``) or loops (``ELOOP``) is a ``FileFaultError`` but not a
    ``CheckpointError``, as a missing file has always been.
    """


#: Codes of a path that names no file, as opposed to a file system that refuses to work
_PATH_FAULTS = frozenset(
    getattr(errno, name)
    for name in ("ENOENT", "ENOTDIR", "EISDIR", "ELOOP", "ENAMETOOLONG")
    if hasattr(errno, name)
)
_OS_ERROR_CODE = re.compile(r"\(os error (\d+)\)")


# -- saving ----------------------------------------------------------------------------------
def save_checkpoint(
    path: str | os.PathLike[str],
    tensors: Mapping[str, Any],
    metadata: Mapping[str, MetadataValue] | None = None,
) -> Path:
    """Write ``tensors`` (name -> array of any backend) and ``metadata`` to ``path`` atomically.

    Arrays are copied to the host (``to_numpy`` of their backend). Metadata values may be
    ``str``, ``int``, ``float`` or ``bool`` and come back with their type from
    :func:`load_checkpoint`. Returns the path written.

    An empty ``path`` raises ``ValueError``, a folder ``IsADirectoryError`` and a path whose
    folder does not exist ``FileNotFoundError``, each naming the path, before anything is
    copied or written. A file system that refuses the write (read-only, full, out of inodes,
    a file-size limit) raises :class:`CheckpointIOError` naming ``path``; the file there before
    is left as it was and no temporary remains.
    """
    target = check_target(path, "checkpoint")
    host = {name: _to_host(name, value, target) for name, value in _check_names(tensors, target)}
    meta = _encode_metadata(metadata or {}, target)
    index = _layout(host)
    digest = _digest(index, meta, (_little_endian(host[n]) for n in index))
    meta[_DIGEST_KEY] = digest
    with atomic_path(target, label="checkpoint", action="save", error=CheckpointIOError) as temp:
        try:
            safetensors.numpy.save_file(host, temp, metadata=meta)
        except safetensors.SafetensorError as exc:
            code = _os_error_code(exc)
            if code is not None:  # the OS refused the library's write: atomic_path names it
                raise OSError(code, os.strerror(code), str(temp)) from exc
            raise CheckpointError(
                f"checkpoint {target}: the safetensors library could not write it ({exc}); "
                f"nothing was replaced"
            ) from exc
        _check_written(temp, {"__metadata__": meta, **index}, target)
    return target


def _os_error_code(exc: BaseException) -> int | None:
    """The OS's ``errno`` in an error of the safetensors library (``... (os error 28)``)."""
    found = _OS_ERROR_CODE.search(str(exc))
    return int(found[1]) if found else None


def _layout(host: Mapping[str, np.ndarray]) -> dict[str, dict[str, Any]]:
    """The header entries safetensors will write for ``host``, in its order (by dtype, then
    name): asked of the library itself with one-element stand-ins, then given real offsets."""
    probe = safetensors.numpy.save({name: np.zeros(1, a.dtype) for name, a in host.items()})
    (length,) = struct.unpack_from("<Q", probe)
    entries = json.loads(probe[8 : 8 + length])
    entries.pop("__metadata__", None)
    order = sorted(entries, key=lambda n: entries[n]["data_offsets"][0])
    index: dict[str, dict[str, Any]] = {}
    offset = 0
    for name in order:
        a = host[name]
        index[name] = {
            "dtype": _CODES[a.dtype],
            "shape": list(a.shape),
            "data_offsets": [offset, offset + a.nbytes],
        }
        offset += a.nbytes
    return index


def _check_written(temp: Path, expected: dict[str, Any], target: Path) -> None:
    """Check that the header the library wrote is the one the checksum covers, and put its
    metadata keys in the order they were given.

    safetensors writes metadata keys in hash order, which differs from one process to the
    next; the same keys in the given order (the same bytes, since nothing else changes) make
    the file the same every time the same checkpoint is saved.
    """
    with temp.open("r+b") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        raw = f.read(min(length, _MAX_HEADER))
        try:
            written = json.loads(raw)
        except ValueError:  # safetensors < 0.4.4 writes invalid JSON for metadata alone
            written = None
        if written != expected:
            raise CheckpointError(
                f"checkpoint {target}: the safetensors library wrote another layout than the "
                f"one nnlayers checksummed (a safetensors version nnlayers does not know?); "
                f"nothing was replaced"
            )
        ordered = json.dumps(expected, separators=(",", ":"), ensure_ascii=False).encode()
        if len(ordered) == len(raw.rstrip(b" ")) and ordered != raw[: len(ordered)]:
            f.seek(8)
            f.write(ordered)


def _little_endian(array: np.ndarray) -> np.ndarray:
    """The bytes of a C-contiguous native array as the file stores them (little-endian)."""
    if array.dtype.itemsize > 1 and not np.little_endian:
        array = array.astype(array.dtype.newbyteorder("<"))
    return array.reshape(-1).view(np.uint8)


def _check_names(tensors: Mapping[str, Any], path: Path) -> list[tuple[str, Any]]:
    if not isinstance(tensors, Mapping):
        raise TypeError(f"checkpoint {path}: tensors must be a dict of name -> array")
    items = list(tensors.items())
    for name, _ in items:
        if not isinstance(name, str) or not name or name == "__metadata__":
            raise ValueError(f"checkpoint {path}: invalid tensor name {name!r}")
    return items


def _to_host(name: str, value: Any, path: Path) -> np.ndarray:
    if isinstance(value, np.ndarray):
        host = value
    elif hasattr(value, "shape") and hasattr(value, "dtype"):
        host = np.asarray(arraycore.namespace_of(value).to_numpy(value))
    else:
        raise TypeError(
            f"checkpoint {path}: tensor {name!r} is a {type(value).__name__}, not an array"
        )
    dtype = host.dtype.newbyteorder("=") if host.dtype.itemsize > 1 else host.dtype
    if dtype not in _CODES:
        raise TypeError(
            f"checkpoint {path}: tensor {name!r} has dtype {host.dtype}, which "
            f"safetensors cannot store"
        )
    return np.asarray(host, dtype=dtype, order="C")


def _encode_metadata(metadata: Mapping[str, Any], path: Path) -> dict[str, str]:
    if not isinstance(metadata, Mapping):
        raise TypeError(f"checkpoint {path}: metadata must be a dict of str -> str/int/float")
    out = {_FORMAT_KEY: _FORMAT}
    for key, value in metadata.items():
        if not isinstance(key, str) or key.startswith("nnlayers."):
            raise ValueError(
                f"checkpoint {path}: invalid metadata key {key!r} (a str not starting with "
                f"'nnlayers.')"
            )
        if not isinstance(value, str | int | float | bool | np.integer | np.floating):
            raise TypeError(
                f"checkpoint {path}: metadata {key!r} is a {type(value).__name__}; values must "
                f"be str, int, float or bool"
            )
        if isinstance(value, np.generic):
            value = value.item()
        out[key] = json.dumps(value)
    return out


def _digest(index: Mapping[str, Any], meta: Mapping[str, str], chunks: Iterable[Any]) -> str:
    h = hashlib.sha256(b"nnlayers-checkpoint-v1\0")
    h.update(json.dumps({"tensors": index, "metadata": meta}, sort_keys=True).encode())
    for chunk in chunks:
        h.update(chunk)
    return h.hexdigest()


# -- loading ---------------------------------------------------------------------------------
def load_checkpoint(
    path: str | os.PathLike[str],
) -> tuple[dict[str, np.ndarray], dict[str, MetadataValue]]:
    """Read a checkpoint: ``(name -> host NumPy array, metadata)``.

    A missing file raises ``FileNotFoundError`` and a folder ``IsADirectoryError``; a
    truncated or corrupt one, or one with malformed metadata, raises :class:`CheckpointError`
    naming the file and saying what is wrong; one the OS does not let nnlayers read (no
    permission, an I/O error) :class:`CheckpointIOError`. Files written by other safetensors
    tools load too (their metadata values stay strings).
    """
    source = Path(path)
    _check_source(source)
    for _ in range(_ATTEMPTS):
        before = _identity(source)
        try:
            result = _load(source)
        except (CheckpointError, OSError):
            if _identity(source) != before:
                continue  # replaced while being read (an atomic save): read the new one
            raise
        if _identity(source) == before:
            return result
    raise CheckpointError(
        f"checkpoint {source}: the file was replaced {_ATTEMPTS} times while it was being read"
    )


def _check_source(source: Path) -> None:
    """Raise the error for a checkpoint ``source`` that is not a file that can be read."""
    try:
        st = source.stat()
    except OSError as exc:
        raise _load_fault(exc, source) from None
    if stat.S_ISDIR(st.st_mode):
        raise fault(errno.EISDIR, source, f"checkpoint {source}: is a folder, not a file")
    if not stat.S_ISREG(st.st_mode):
        raise CheckpointError(f"checkpoint {source}: not a regular file")


def _load_fault(exc: OSError, source: Path) -> FileFaultError:
    """The error for an OS error ``exc`` that loading the checkpoint ``source`` met."""
    if exc.errno == errno.ENOENT:
        message = f"checkpoint {source}: no such file"
    else:
        message = f"checkpoint {source}: cannot load: {reason(exc)}"
    error = FileFaultError if exc.errno in _PATH_FAULTS else CheckpointIOError
    return fault(exc, source, message, error=error)


def _identity(path: Path) -> tuple[int, ...] | None:
    try:
        s = path.stat()
    except OSError:
        return None
    return (s.st_dev, s.st_ino, s.st_size, s.st_mtime_ns)


def _load(source: Path) -> tuple[dict[str, np.ndarray], dict[str, MetadataValue]]:
    def fail(reason: str) -> CheckpointError:
        return CheckpointError(f"checkpoint {source}: {reason}")

    header, size = _read_header(source, fail)
    raw_meta = header.pop("__metadata__", None) or {}
    if not isinstance(raw_meta, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in raw_meta.items()
    ):
        raise fail("corrupt header (__metadata__ must map str to str)")
    spans = []
    for name, entry in header.items():
        dtype, shape, start, stop = _parse_entry(name, entry, fail)
        expected = math.prod(shape) * dtype.itemsize
        if stop - start != expected:
            raise fail(
                f"corrupt entry {name!r}: {stop - start} bytes of data for {dtype.name}"
                f"{list(shape)}, which needs {expected}"
            )
        spans.append((start, stop, name, dtype, shape))
    spans.sort()
    position = 0
    for start, stop, name, _, _ in spans:
        if start != position:
            raise fail(f"corrupt entry {name!r}: data starts at byte {start}, expected {position}")
        position = stop
    if position != size:
        if position > size:
            raise fail(
                f"truncated: the header describes {position} bytes of data, the file holds {size}"
            )
        raise fail(f"corrupt: {size - position} unexpected bytes after the data")
    tensors = _read_tensors(source, [s[2] for s in spans], fail)
    for _, _, name, dtype, shape in spans:
        got = tensors[name]
        if got.shape != shape or got.dtype != dtype.newbyteorder("="):
            raise fail(
                f"corrupt entry {name!r}: the safetensors library reads {got.dtype.name}"
                f"{list(got.shape)}, the header says {dtype.name}{list(shape)}"
            )
    digest = raw_meta.pop(_DIGEST_KEY, None)
    if digest is not None:
        found = _digest(header, raw_meta, (_little_endian(tensors[s[2]]) for s in spans))
        if found != digest:
            raise fail("corrupt: its contents do not match the SHA-256 recorded when it was saved")
    return tensors, _decode_metadata(raw_meta, fail)


def _read_header(source: Path, fail: _Fail) -> tuple[dict[str, Any], int]:
    """The parsed JSON header and the number of data bytes after it."""
    try:
        with source.open("rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size < 8:
                raise fail(f"truncated: {size} bytes, too short for the 8-byte header length")
            (length,) = struct.unpack("<Q", f.read(8))
            if length > min(size - 8, _MAX_HEADER):
                raise fail(
                    f"truncated or corrupt: the header claims {length} bytes but the file has "
                    f"only {size - 8} after the length"
                )
            raw = f.read(length)
    except FileFaultError:
        raise
    except OSError as exc:
        raise _load_fault(exc, source) from exc
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        # ValueError: JSONDecodeError, and integers of more digits than Python converts
        raise fail(f"corrupt header (not valid JSON: {_short(exc)})") from exc
    if not isinstance(header, dict):
        raise fail("corrupt header (not a JSON object)")
    return header, size - 8 - length


def _read_tensors(source: Path, names: list[str], fail: _Fail) -> dict[str, np.ndarray]:
    """The tensors, read by the safetensors library (writable host arrays)."""
    try:
        with _open(source) as f:
            found = set(f.keys())
            if found != set(names):
                raise fail(
                    f"corrupt header: the safetensors library reads the entries "
                    f"{sorted(found)}, the header holds {sorted(names)}"
                )
            tensors: dict[str, np.ndarray] = {}
            for name in names:
                array = np.asarray(f.get_tensor(name))
                if not array.flags.writeable:
                    array = array.copy()
                tensors[name] = array
            return tensors
    except safetensors.SafetensorError as exc:
        code = _os_error_code(exc)
        if code is not None:
            raise _load_fault(OSError(code, os.strerror(code)), source) from exc
        raise fail(f"the safetensors library cannot read it ({exc})") from exc
    except FileFaultError:
        raise
    except OSError as exc:
        raise _load_fault(exc, source) from exc


_JSON_TYPES = {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}


def _json_type(value: Any) -> str:
    """What JSON calls the type of a parsed value (``object``, ``array``, ``number``, ...)."""
    return _JSON_TYPES.get(type(value), "number")


def _open(source: Path) -> Any:
    """``safe_open`` reading with ``pread`` where the library can (0.8 and newer): mapping the
    file instead would count it in the process's memory once more beside the arrays."""
    try:
        return safetensors.safe_open(str(source), framework="np", backend="pread")
    except TypeError:  # no backend= before safetensors 0.8
        return safetensors.safe_open(str(source), framework="np")


def _short(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text if len(text) <= 200 else text[:200] + "..."


def _parse_entry(name: str, entry: Any, fail: _Fail) -> tuple[np.dtype, tuple[int, ...], int, int]:
    if not isinstance(entry, dict):
        raise fail(f"corrupt entry {name!r}: not a JSON object")
    missing = [k for k in ("dtype", "shape", "data_offsets") if k not in entry]
    if missing:
        raise fail(f"corrupt entry {name!r}: no {', '.join(repr(k) for k in missing)}")
    code, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
    if code not in _DTYPES:
        if isinstance(code, str) and code in ("BF16", "F8_E4M3", "F8_E5M2", "C64"):
            raise fail(f"tensor {name!r} has dtype {code}, which NumPy cannot hold")
        raise fail(f"corrupt entry {name!r}: unknown dtype {code!r}")
    if not isinstance(shape, list) or not all(
        isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape
    ):
        raise fail(f"corrupt entry {name!r}: bad shape {shape!r}")
    if (
        not isinstance(offsets, list)
        or len(offsets) != 2
        or not all(isinstance(o, int) and not isinstance(o, bool) and o >= 0 for o in offsets)
        or offsets[0] > offsets[1]
    ):
        raise fail(f"corrupt entry {name!r}: bad data_offsets {offsets!r}")
    return _DTYPES[code], tuple(shape), offsets[0], offsets[1]


def _decode_metadata(raw: dict[str, str], fail: _Fail) -> dict[str, MetadataValue]:
    version = raw.pop(_FORMAT_KEY, None)
    if version is None:
        return dict(raw)
    if version != _FORMAT:
        raise fail(
            f"metadata {_FORMAT_KEY!r} is {version!r}: this version of nnlayers reads format "
            f"{_FORMAT} (a newer nnlayers wrote it?)"
        )
    out: dict[str, MetadataValue] = {}
    for key, text in raw.items():
        try:
            value = json.loads(text)
        except (ValueError, RecursionError) as exc:
            raise fail(f"corrupt metadata {key!r}: not valid JSON ({_short(exc)})") from exc
        if not isinstance(value, str | int | float | bool):
            raise fail(
                f"corrupt metadata {key!r}: {text[:60]!r} is a JSON {_json_type(value)}, "
                f"not a string, number or boolean"
            )
        out[key] = value
    return out


# -- restoring -------------------------------------------------------------------------------
def restore_into(
    targets: Mapping[str, Any],
    loaded: Mapping[str, Any],
    path: str | os.PathLike[str] | None = None,
    *,
    strict: bool = True,
) -> None:
    """Copy ``loaded`` arrays into the arrays of ``targets`` (same names), in place.

    Every entry is checked first: each target must have an entry of the same shape and dtype,
    and with ``strict=True`` (the default) ``loaded`` may hold no other names. Only when all of
    them fit is anything written (``xp.inplace.copy`` on each target's backend), so a
    mismatched checkpoint leaves the model unchanged. ``path`` names the file in errors.
    """
    where = f"checkpoint {path}" if path is not None else "checkpoint"
    problems = []
    for name, target in targets.items():
        if name not in loaded:
            problems.append(f"{name!r} is missing")
            continue
        source = loaded[name]
        got = (tuple(source.shape), np.dtype(source.dtype))
        want = (tuple(target.shape), np.dtype(target.dtype))
        if got != want:
            problems.append(
                f"{name!r} is {got[1].name}{list(got[0])} in the file but "
                f"{want[1].name}{list(want[0])} in the model"
            )
    if strict:
        extra = sorted(set(loaded) - set(targets))
        if extra:
            problems.append("unexpected entries " + ", ".join(repr(n) for n in extra))
    if problems:
        raise CheckpointError(f"{where} does not fit (nothing was changed): " + "; ".join(problems))
    for name, target in targets.items():
        xp = arraycore.namespace_of(target)
        source = loaded[name]
        if isinstance(source, np.ndarray):
            source = xp.asarray(source)
        xp.inplace.copy(source, out=target)


def load_into(
    path: str | os.PathLike[str], targets: Mapping[str, Any], *, strict: bool = True
) -> dict[str, MetadataValue]:
    """:func:`load_checkpoint` then :func:`restore_into`; returns the metadata."""
    tensors, metadata = load_checkpoint(path)
    restore_into(targets, tensors, path, strict=strict)
    return metadata


__all__ = [
    "CheckpointError",
    "CheckpointIOError",
    "MetadataValue",
    "load_checkpoint",
    "load_into",
    "restore_into",
    "save_checkpoint",
]
