"""The IDX format of MNIST and Fashion-MNIST: a magic number, big-endian dimensions, raw data.

Layout: two zero bytes, a type code (``0x08`` uint8, ``0x09`` int8, ``0x0B`` int16, ``0x0C``
int32, ``0x0D`` float32, ``0x0E`` float64), the number of dimensions, each dimension as a
big-endian uint32, then the values in C order, big-endian. Files may be gzip-compressed.

>>> import numpy as np, tempfile, os
>>> path = os.path.join(tempfile.mkdtemp(), "labels-idx1-ubyte.gz")
>>> write_idx(path, np.array([3, 1, 4], dtype=np.uint8))
>>> read_idx(path).tolist()
[3, 1, 4]
"""

from __future__ import annotations

import errno
import gzip
import math
import os
import stat
import struct
import zlib
from pathlib import Path

import numpy as np

from .._atomic import atomic_write, check_target, fault, reason
from ._files import DatasetError

IDX_TYPES: dict[int, np.dtype] = {
    0x08: np.dtype(">u1"),
    0x09: np.dtype(">i1"),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}
"""IDX type codes and the (big-endian) dtypes they hold."""

_GZIP_MAGIC = b"\x1f\x8b"


def _read_bytes(path: Path) -> bytes:
    with path.open("rb") as f:
        raw = f.read()
    if not raw.startswith(_GZIP_MAGIC):
        return raw
    try:
        return gzip.decompress(raw)
    except (EOFError, OSError, zlib.error) as exc:
        raise DatasetError(f"IDX file {path}: corrupt or truncated gzip data ({exc})") from exc


def read_idx(path: str | os.PathLike[str]) -> np.ndarray:
    """The array stored in an IDX file, gzip-compressed or raw (detected from the content).

    Returns a native-endian NumPy array of the file's type and shape. A file that is not IDX,
    or is truncated or has bytes left over, raises :class:`DatasetError` naming the file and
    what is wrong; a missing one ``FileNotFoundError``, a folder ``IsADirectoryError`` and
    other faults of the OS (a symbolic-link loop) its error, each a
    :class:`~nnlayers.errors.FileFaultError` naming ``path``.
    """
    source = Path(path)
    try:
        mode = source.stat().st_mode
    except OSError as exc:
        why = "no such file" if exc.errno == errno.ENOENT else f"cannot read: {reason(exc)}"
        raise fault(exc, source, f"IDX file {source}: {why}") from None
    if stat.S_ISDIR(mode):
        raise fault(errno.EISDIR, source, f"IDX file {source}: is a folder, not a file")
    if not stat.S_ISREG(mode):
        raise DatasetError(f"IDX file {source}: not a regular file")
    data = _read_bytes(source)

    def fail(reason: str) -> DatasetError:
        return DatasetError(f"IDX file {source}: {reason}")

    if len(data) < 4:
        raise fail(f"truncated: {len(data)} bytes, too short for the 4-byte magic number")
    zero, code, ndim = struct.unpack(">HBB", data[:4])
    if zero != 0:
        raise fail(
            f"bad magic number 0x{data[:4].hex()}: not an IDX file (it must start with 00 00)"
        )
    if code not in IDX_TYPES:
        known = ", ".join(f"0x{c:02X}" for c in IDX_TYPES)
        raise fail(f"unknown data type code 0x{code:02X} (known: {known})")
    if ndim == 0:
        raise fail("the header declares 0 dimensions")
    header = 4 + 4 * ndim
    if len(data) < header:
        raise fail(
            f"truncated header: {ndim} dimensions need {header} bytes, the file has {len(data)}"
        )
    shape = struct.unpack(f">{ndim}I", data[4:header])
    dtype = IDX_TYPES[code]
    expected = math.prod(shape) * dtype.itemsize
    found = len(data) - header
    if found < expected:
        raise fail(
            f"truncated: shape {shape} of {dtype.name} needs {expected} bytes of data, "
            f"found {found}"
        )
    if found > expected:
        raise fail(
            f"{found - expected} unexpected bytes after the data of shape {shape} "
            f"(dimensions or length are wrong)"
        )
    array = np.frombuffer(data, dtype=dtype, offset=header).reshape(shape)
    return array.astype(dtype.newbyteorder("="))


def write_idx(path: str | os.PathLike[str], array: np.ndarray) -> None:
    """Write ``array`` as an IDX file (gzip-compressed when ``path`` ends in ``.gz``), atomically
    (see :mod:`nnlayers._atomic`); a folder or a missing folder raises, naming the path."""
    a = np.asarray(array)
    codes = {dt.newbyteorder("=") if dt.itemsize > 1 else dt: c for c, dt in IDX_TYPES.items()}
    native = a.dtype.newbyteorder("=") if a.dtype.itemsize > 1 else a.dtype
    if native not in codes:
        raise TypeError(f"write_idx: IDX cannot store dtype {a.dtype}")
    if a.ndim == 0 or a.ndim > 255:
        raise ValueError(f"write_idx: IDX needs 1 to 255 dimensions, got {a.ndim}")
    code = codes[native]
    payload = (
        struct.pack(">HBB", 0, code, a.ndim)
        + struct.pack(f">{a.ndim}I", *a.shape)
        + np.asarray(a, dtype=IDX_TYPES[code], order="C").tobytes()
    )
    target = check_target(path, "IDX file")
    if target.name.endswith(".gz"):
        payload = gzip.compress(payload, mtime=0)
    with atomic_write(target, label="IDX file") as out:
        out.write(payload)
