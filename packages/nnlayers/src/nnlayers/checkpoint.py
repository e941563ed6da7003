"""Checkpoints: named arrays plus metadata in a safetensors file, never pickle.

Files follow the safetensors layout (an 8-byte little-endian header length, a JSON header, then
the raw little-endian data), so the ``safetensors`` library and other tools read them, and
:func:`load_checkpoint` reads files those tools write. Arrays are copied to the host when saved
and come back as host NumPy arrays, so a checkpoint saved on one backend loads on any other.

Writes are atomic: the file is written to a temporary file in the same folder, flushed to disk
and then renamed over ``path``, so a crash leaves the old checkpoint or the new one, never half
of one. nnlayers also records a SHA-256 of the header and data in the metadata, so a corrupt or
truncated file is an error rather than silently wrong weights.

>>> import numpy as np, tempfile, os
>>> path = os.path.join(tempfile.mkdtemp(), "model.safetensors")
>>> _ = save_checkpoint(path, {"W": np.eye(2, dtype="float32")}, {"epoch": 3, "note": "best"})
>>> tensors, meta = load_checkpoint(path)
>>> tensors["W"].tolist(), meta
([[1.0, 0.0], [0.0, 1.0]], {'epoch': 3, 'note': 'best'})
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

import arraycore

from ._atomic import atomic_write

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
_DIGEST_KEY = "nnlayers.sha256"
_MAX_HEADER = 100 * 1024 * 1024


class CheckpointError(ValueError):
    """A checkpoint that cannot be read or does not fit: the message names the file."""


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
    """
    target = Path(path)
    host = {name: _to_host(name, value, target) for name, value in _check_names(tensors, target)}
    meta = _encode_metadata(metadata or {}, target)
    folder = target.parent if str(target.parent) else Path(".")
    if not folder.is_dir():
        raise FileNotFoundError(f"checkpoint {target}: folder {folder} does not exist")

    # Widest items first, so that every tensor is aligned once the data starts on 8 bytes.
    order = sorted(host, key=lambda n: (-host[n].dtype.itemsize, n))
    index: dict[str, Any] = {}
    offset = 0
    for name in order:
        a = host[name]
        index[name] = {
            "dtype": _CODES[a.dtype],
            "shape": list(a.shape),
            "data_offsets": [offset, offset + a.nbytes],
        }
        offset += a.nbytes
    digest = _digest(index, meta, (_raw(host[n]) for n in order))
    header = json.dumps(
        {"__metadata__": {**meta, _DIGEST_KEY: digest}, **index}, separators=(",", ":")
    ).encode()
    header += b" " * (-(len(header) + 8) % 8)

    with atomic_write(target) as out:
        out.write(struct.pack("<Q", len(header)))
        out.write(header)
        for name in order:
            out.write(_raw(host[name]).data)
    return target


def _raw(array: np.ndarray) -> np.ndarray:
    """The bytes of a C-contiguous array as a flat uint8 array (empty and 0-d arrays too)."""
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
    return np.asarray(host, dtype=dtype.newbyteorder("<"), order="C")


def _encode_metadata(metadata: Mapping[str, Any], path: Path) -> dict[str, str]:
    if not isinstance(metadata, Mapping):
        raise TypeError(f"checkpoint {path}: metadata must be a dict of str -> str/int/float")
    out = {_FORMAT_KEY: "1"}
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


def _digest(index: Mapping[str, Any], meta: Mapping[str, str], chunks: Any) -> str:
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

    A missing file raises ``FileNotFoundError``; a truncated or corrupt one raises
    :class:`CheckpointError` saying what is wrong. Files written by other safetensors tools load
    too (their metadata values stay strings).
    """
    source = Path(path)
    if not source.is_file():
        what = "is a folder, not a file" if source.is_dir() else "no such file"
        raise FileNotFoundError(f"checkpoint {source}: {what}")
    with source.open("rb") as f:
        buffer = bytearray(os.fstat(f.fileno()).st_size)
        f.readinto(buffer)

    def fail(reason: str) -> CheckpointError:
        return CheckpointError(f"checkpoint {source}: {reason}")

    size = len(buffer)
    if size < 8:
        raise fail(f"truncated: {size} bytes, too short for the 8-byte header length")
    (length,) = struct.unpack_from("<Q", buffer)
    if length > min(size - 8, _MAX_HEADER):
        raise fail(
            f"truncated or corrupt: the header claims {length} bytes but the file has only "
            f"{size - 8} after the length"
        )
    try:
        header = json.loads(bytes(buffer[8 : 8 + length]).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise fail(f"corrupt header (not valid JSON: {exc})") from exc
    if not isinstance(header, dict):
        raise fail("corrupt header (not a JSON object)")
    raw_meta = header.pop("__metadata__", None) or {}
    if not isinstance(raw_meta, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in raw_meta.items()
    ):
        raise fail("corrupt header (__metadata__ must map str to str)")
    data = memoryview(buffer)[8 + length :]
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
    if position != len(data):
        if position > len(data):
            raise fail(
                f"truncated: the header describes {position} bytes of data, the file holds "
                f"{len(data)}"
            )
        raise fail(f"corrupt: {len(data) - position} unexpected bytes after the data")
    digest = raw_meta.pop(_DIGEST_KEY, None)
    if digest is not None:
        found = _digest(header, raw_meta, [data])
        if found != digest:
            raise fail("corrupt: its contents do not match the SHA-256 recorded when it was saved")
    tensors: dict[str, np.ndarray] = {}
    for start, _stop, name, dtype, shape in spans:
        array = np.frombuffer(
            buffer, dtype=dtype, count=math.prod(shape), offset=8 + length + start
        )
        tensors[name] = array.reshape(shape).astype(dtype.newbyteorder("="), copy=False)
    return tensors, _decode_metadata(raw_meta, fail)


def _parse_entry(name: str, entry: Any, fail: Any) -> tuple[np.dtype, tuple[int, ...], int, int]:
    if not isinstance(entry, dict):
        raise fail(f"corrupt entry {name!r}: not a JSON object")
    code, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
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


def _decode_metadata(raw: dict[str, str], fail: Any) -> dict[str, MetadataValue]:
    if raw.pop(_FORMAT_KEY, None) is None:
        return dict(raw)
    out: dict[str, MetadataValue] = {}
    for key, text in raw.items():
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise fail(f"corrupt metadata {key!r}: {exc}") from exc
        if not isinstance(value, str | int | float | bool):
            raise fail(f"corrupt metadata {key!r}: {text!r}")
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
    "MetadataValue",
    "load_checkpoint",
    "load_into",
    "restore_into",
    "save_checkpoint",
]
