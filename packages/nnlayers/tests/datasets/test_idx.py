"""The IDX reader: every type code, gzip or raw, and clear errors for broken files."""

from __future__ import annotations

import gzip
import struct

import numpy as np
import pytest

from nnlayers.datasets import DatasetError, read_idx, write_idx

ARRAYS = {
    "uint8": np.arange(24, dtype=np.uint8).reshape(2, 3, 4),
    "int8": np.array([-128, 0, 127], dtype=np.int8),
    "int16": np.array([[-30000, 2], [3, 30000]], dtype=np.int16),
    "int32": np.array([-(2**31), 7, 2**31 - 1], dtype=np.int32),
    "float32": np.array([[1.5, -2.25]], dtype=np.float32),
    "float64": np.array([np.pi, -np.e, 1e300]),
}


@pytest.mark.parametrize("name", sorted(ARRAYS))
@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_round_trip_every_type(tmp_path, name, suffix):
    path = tmp_path / f"{name}-idx{suffix}"
    write_idx(path, ARRAYS[name])
    got = read_idx(path)
    assert got.dtype == ARRAYS[name].dtype and got.dtype.isnative
    np.testing.assert_array_equal(got, ARRAYS[name])
    assert (path.read_bytes()[:2] == b"\x1f\x8b") == bool(suffix)


def test_reads_the_documented_byte_layout(tmp_path):
    raw = bytes([0, 0, 0x08, 2, 0, 0, 0, 2, 0, 0, 0, 3, 1, 2, 3, 4, 5, 6])
    path = tmp_path / "hand-idx2-ubyte"
    path.write_bytes(raw)
    assert read_idx(path).tolist() == [[1, 2, 3], [4, 5, 6]]
    # big-endian values
    path.write_bytes(bytes([0, 0, 0x0B, 1, 0, 0, 0, 1, 0x01, 0x02]))
    assert read_idx(path).tolist() == [258]
    # gzip is detected from the content, whatever the name says
    path.write_bytes(gzip.compress(raw))
    assert read_idx(path).shape == (2, 3)


def _header(code, *dims):
    return struct.pack(">HBB", 0, code, len(dims)) + struct.pack(f">{len(dims)}I", *dims)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", r"truncated: 0 bytes"),
        (b"\x00\x00\x08", r"truncated: 3 bytes"),
        (b"\x01\x02\x08\x01\x00\x00\x00\x01\x05", r"bad magic number 0x01020801"),
        (b"\x00\x00\x0a\x01\x00\x00\x00\x01\x05", r"unknown data type code 0x0A"),
        (b"\x00\x00\x08\x00", r"the header declares 0 dimensions"),
        (b"\x00\x00\x08\x02\x00\x00\x00\x05", r"truncated header: 2 dimensions need 12 bytes"),
        (_header(0x08, 2, 3) + bytes(5), r"truncated: shape \(2, 3\) of uint8 needs 6 bytes"),
        (_header(0x0D, 2) + bytes(12), r"4 unexpected bytes after the data"),
    ],
)
def test_broken_files_name_the_file_and_the_problem(tmp_path, content, message):
    path = tmp_path / "broken-idx"
    for data, name in ((content, "broken-idx"), (gzip.compress(content), "broken-idx.gz")):
        path = tmp_path / name
        path.write_bytes(data)
        with pytest.raises(DatasetError, match=rf"IDX file .*{name}: {message}"):
            read_idx(path)


def test_truncated_gzip(tmp_path):
    path = tmp_path / "labels.gz"
    write_idx(path, np.arange(1000, dtype=np.int32))
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(DatasetError, match=r"labels\.gz: corrupt or truncated gzip"):
        read_idx(path)


def test_missing_file_and_bad_writes(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file"):
        read_idx(tmp_path / "absent")
    with pytest.raises(TypeError, match="cannot store dtype int64"):
        write_idx(tmp_path / "x", np.zeros(2, dtype=np.int64))
    with pytest.raises(ValueError, match="1 to 255 dimensions"):
        write_idx(tmp_path / "x", np.uint8(3))


def test_a_folder_is_named_as_a_folder(tmp_path):
    folder = tmp_path / "mnist"
    folder.mkdir()
    with pytest.raises(IsADirectoryError, match=r"IDX file .*mnist: is a folder, not a file"):
        read_idx(folder)
    with pytest.raises(IsADirectoryError, match=r"IDX file .*mnist: is a folder"):
        write_idx(folder, np.zeros(2, dtype=np.uint8))
    with pytest.raises(
        FileNotFoundError, match=r"IDX file .*x-idx: folder .*absent does not exist"
    ):
        write_idx(tmp_path / "absent" / "x-idx", np.zeros(2, dtype=np.uint8))
    assert list(folder.iterdir()) == []


def test_write_idx_replaces_a_file_atomically(tmp_path):
    path = tmp_path / "labels-idx1-ubyte"
    write_idx(path, np.array([1, 2], dtype=np.uint8))
    write_idx(path, np.array([3], dtype=np.uint8))
    assert read_idx(path).tolist() == [3]
    assert [p.name for p in tmp_path.iterdir()] == ["labels-idx1-ubyte"]
