"""Checkpoints: safetensors files written atomically, read back exactly, corruption detected."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import struct

import numpy as np
import pytest

import nnlayers.checkpoint as checkpoint
from nnlayers.checkpoint import (
    CheckpointError,
    load_checkpoint,
    load_into,
    restore_into,
    save_checkpoint,
)

HOST = {
    "layer/W": np.arange(12, dtype=np.float32).reshape(3, 4) / 7,
    "layer/b": np.array([1.5, -2.0], dtype=np.float64),
    "steps": np.array(7, dtype=np.int64),
    "mask": np.array([True, False, True]),
    "codes": np.array([1, 2, 255], dtype=np.uint8),
    "half": np.array([0.5, 2.0], dtype=np.float16),
    "empty": np.zeros((0, 3), dtype=np.int32),
}
META = {"epoch": 4, "loss": 0.125, "name": "run-1", "resumed": True, "digits": "42"}


@pytest.fixture
def host(xp):
    """``host(array)``: a NumPy copy of a backend array."""
    return lambda x: np.asarray(xp.to_numpy(x))


@pytest.fixture
def saved(tmp_path):
    path = tmp_path / "ckpt.safetensors"
    save_checkpoint(path, HOST, META)
    return path


def test_round_trip_keeps_values_dtypes_and_metadata_types(saved):
    tensors, meta = load_checkpoint(saved)
    assert sorted(tensors) == sorted(HOST)
    for name, array in HOST.items():
        assert tensors[name].dtype == array.dtype and tensors[name].shape == array.shape
        np.testing.assert_array_equal(tensors[name], array)
    assert meta == META
    assert type(meta["digits"]) is str and type(meta["epoch"]) is int


def test_backend_arrays_are_copied_to_the_host(xp, tmp_path):
    path = tmp_path / "device.safetensors"
    save_checkpoint(path, {"w": xp.asarray(np.array([[1.0, 2.0]], dtype=np.float32))})
    tensors, meta = load_checkpoint(path)
    assert isinstance(tensors["w"], np.ndarray) and tensors["w"].tolist() == [[1.0, 2.0]]
    assert meta == {}


def test_files_are_standard_safetensors(saved, tmp_path):
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    theirs = safetensors_numpy.load_file(str(saved))
    for name, array in HOST.items():
        np.testing.assert_array_equal(theirs[name], array)
    # ... and files that the safetensors library writes load here (metadata stays str)
    other = tmp_path / "other.safetensors"
    safetensors_numpy.save_file({"a": np.ones((2, 2), np.float32)}, str(other), {"k": "v"})
    tensors, meta = load_checkpoint(other)
    assert tensors["a"].tolist() == [[1.0, 1.0], [1.0, 1.0]] and meta == {"k": "v"}


def test_data_is_aligned(saved):
    data = saved.read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    assert (8 + length) % 8 == 0
    tensors, _ = load_checkpoint(saved)
    assert all(a.flags.aligned and a.flags.writeable for a in tensors.values())


def test_write_is_atomic_and_leaves_no_temporary_files(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.safetensors"
    save_checkpoint(path, {"a": np.zeros(3)}, {"v": 1})
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd)))

    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(path, {"a": np.ones(3)}, {"v": 2})
    assert synced, "the temporary file is flushed to disk before the rename"
    # the old checkpoint is intact and no temporary file is left behind
    tensors, meta = load_checkpoint(path)
    assert tensors["a"].tolist() == [0.0, 0.0, 0.0] and meta == {"v": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt.safetensors"]
    monkeypatch.undo()
    save_checkpoint(path, {"a": np.ones(3)}, {"v": 2})
    assert load_checkpoint(path)[1] == {"v": 2}
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt.safetensors"]


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"nope\.safetensors: no such file"):
        load_checkpoint(tmp_path / "nope.safetensors")
    with pytest.raises(IsADirectoryError, match="is a folder"):
        load_checkpoint(tmp_path)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        save_checkpoint(tmp_path / "no" / "such" / "x.safetensors", {})


def test_saving_to_a_folder_an_empty_path_or_a_missing_folder_names_the_path(tmp_path):
    folder = tmp_path / "runs"
    folder.mkdir()
    (folder / "keep.txt").write_text("x")
    big = {"w": np.zeros(10)}
    with pytest.raises(
        IsADirectoryError, match=rf"checkpoint {re.escape(str(folder))}: is a folder"
    ):
        save_checkpoint(folder, big)
    with pytest.raises(IsADirectoryError, match=r"checkpoint .*new/: is a folder"):
        save_checkpoint(str(tmp_path / "new") + "/", big)
    with pytest.raises(ValueError, match=r"checkpoint path '' is empty"):
        save_checkpoint("", big)
    missing = tmp_path / "absent" / "x.safetensors"
    with pytest.raises(
        FileNotFoundError, match=rf"{re.escape(str(missing))}: folder .*absent does"
    ):
        save_checkpoint(missing, big)
    with pytest.raises(NotADirectoryError, match=r"keep\.txt is a file, not a folder"):
        save_checkpoint(folder / "keep.txt" / "x.safetensors", big)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs"]
    assert [p.name for p in folder.iterdir()] == ["keep.txt"]


# -- compatibility -----------------------------------------------------------------------
# Written by nnlayers' own safetensors writer before the safetensors library wrote checkpoints
# (the tensors of OLD_TENSORS, the metadata of OLD_METADATA).
OLD_FILE = base64.b64decode(
    "GAQAAAAAAAB7Il9fbWV0YWRhdGFfXyI6eyJubmxheWVycy5mb3JtYXQiOiIxIiwiZXBvY2giOiI0IiwibG9zcyI6"
    "IjAuMTI1IiwibmFtZSI6IlwicnVuLTFcIiIsInJlc3VtZWQiOiJ0cnVlIiwiZGlnaXRzIjoiXCI0MlwiIiwibm5s"
    "YXllcnMuc2hhMjU2IjoiNjE5ZTg4ZWQ4NzRhYTg5YTFkODFkOTU4NzM3MWUyN2IyOTdlZDNmYzEyNmZmZDE4NGIw"
    "YTE5YmU0ZmQxOTdiOSJ9LCJ3L2Y2NCI6eyJkdHlwZSI6IkY2NCIsInNoYXBlIjpbMiwyXSwiZGF0YV9vZmZzZXRz"
    "IjpbMCwzMl19LCJ3L2k2NCI6eyJkdHlwZSI6Ikk2NCIsInNoYXBlIjpbMl0sImRhdGFfb2Zmc2V0cyI6WzMyLDQ4"
    "XX0sIncvdTY0Ijp7ImR0eXBlIjoiVTY0Iiwic2hhcGUiOlsxXSwiZGF0YV9vZmZzZXRzIjpbNDgsNTZdfSwiZW1w"
    "dHkiOnsiZHR5cGUiOiJGMzIiLCJzaGFwZSI6WzAsM10sImRhdGFfb2Zmc2V0cyI6WzU2LDU2XX0sInNjYWxhciI6"
    "eyJkdHlwZSI6IkYzMiIsInNoYXBlIjpbXSwiZGF0YV9vZmZzZXRzIjpbNTYsNjBdfSwidy9mMzIiOnsiZHR5cGUi"
    "OiJGMzIiLCJzaGFwZSI6WzIsM10sImRhdGFfb2Zmc2V0cyI6WzYwLDg0XX0sIncvaTMyIjp7ImR0eXBlIjoiSTMy"
    "Iiwic2hhcGUiOlsyXSwiZGF0YV9vZmZzZXRzIjpbODQsOTJdfSwidy91MzIiOnsiZHR5cGUiOiJVMzIiLCJzaGFw"
    "ZSI6WzFdLCJkYXRhX29mZnNldHMiOls5Miw5Nl19LCJ3L2YxNiI6eyJkdHlwZSI6IkYxNiIsInNoYXBlIjpbM10s"
    "ImRhdGFfb2Zmc2V0cyI6Wzk2LDEwMl19LCJ3L2kxNiI6eyJkdHlwZSI6IkkxNiIsInNoYXBlIjpbMl0sImRhdGFf"
    "b2Zmc2V0cyI6WzEwMiwxMDZdfSwidy91MTYiOnsiZHR5cGUiOiJVMTYiLCJzaGFwZSI6WzFdLCJkYXRhX29mZnNl"
    "dHMiOlsxMDYsMTA4XX0sIncvYm9vbCI6eyJkdHlwZSI6IkJPT0wiLCJzaGFwZSI6WzNdLCJkYXRhX29mZnNldHMi"
    "OlsxMDgsMTExXX0sIncvaTgiOnsiZHR5cGUiOiJJOCIsInNoYXBlIjpbMl0sImRhdGFfb2Zmc2V0cyI6WzExMSwx"
    "MTNdfSwidy91OCI6eyJkdHlwZSI6IlU4Iiwic2hhcGUiOlszXSwiZGF0YV9vZmZzZXRzIjpbMTEzLDExNl19fSAg"
    "AAAAAAAA+D8AAAAAAAACwAAAAAAAAAhAWfP4wh9upQEAAAAAAAAAwAcAAAAAAAAABQAAAAAAAIAAAFBAAAAAACVJ"
    "Ej4lSZI+t23bPiVJEj9u2zY/+////////3//////ADgAwP97AIADAP//AQABgH8A/wk="
)
OLD_TENSORS = {
    "w/f64": np.array([[1.5, -2.25], [3.0, 1e-300]], dtype=np.float64),
    "w/i64": np.array([-(2**62), 7], dtype=np.int64),
    "w/u64": np.array([2**63 + 5], dtype=np.uint64),
    "w/f32": np.arange(6, dtype=np.float32).reshape(2, 3) / 7,
    "w/i32": np.array([-5, 2**31 - 1], dtype=np.int32),
    "w/u32": np.array([2**32 - 1], dtype=np.uint32),
    "w/f16": np.array([0.5, -2.0, 65504.0], dtype=np.float16),
    "w/i16": np.array([-32768, 3], dtype=np.int16),
    "w/u16": np.array([65535], dtype=np.uint16),
    "w/i8": np.array([-128, 127], dtype=np.int8),
    "w/u8": np.array([0, 255, 9], dtype=np.uint8),
    "w/bool": np.array([True, False, True]),
    "scalar": np.array(3.25, dtype=np.float32),
    "empty": np.zeros((0, 3), dtype=np.float32),
}
OLD_METADATA = {"epoch": 4, "loss": 0.125, "name": "run-1", "resumed": True, "digits": "42"}


def test_files_written_before_read_back_identically(tmp_path):
    assert hashlib.sha256(OLD_FILE).hexdigest().startswith("ba017ce9f53e6a1c")
    path = tmp_path / "old.safetensors"
    path.write_bytes(OLD_FILE)
    tensors, meta = load_checkpoint(path)
    assert list(meta.items()) == list(OLD_METADATA.items())
    assert sorted(tensors) == sorted(OLD_TENSORS)
    for name, array in OLD_TENSORS.items():
        assert tensors[name].dtype == array.dtype and tensors[name].shape == array.shape, name
        assert tensors[name].tobytes() == array.tobytes(), name
    # Saving what was read gives a file that loads to the same, and every tensor's bytes are
    # those of the old file.
    again = save_checkpoint(tmp_path / "again.safetensors", tensors, meta)
    tensors2, meta2 = load_checkpoint(again)
    assert meta2 == meta and all(tensors2[n].tobytes() == tensors[n].tobytes() for n in tensors)


def _header(data):
    (length,) = struct.unpack("<Q", data[:8])
    return length, json.loads(data[8 : 8 + length], object_pairs_hook=list)


@pytest.mark.parametrize("tensors", [HOST, OLD_TENSORS, {}], ids=["mixed", "all-dtypes", "none"])
def test_files_are_those_the_safetensors_library_writes(tmp_path, tensors):
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    ours = save_checkpoint(tmp_path / "ours.safetensors", tensors, META).read_bytes()
    length, header = _header(ours)
    metadata = dict(header[0][1])
    theirs = safetensors_numpy.save(tensors, metadata)
    assert len(theirs) == len(ours)
    # safetensors writes the metadata keys in hash order (it differs between processes), so
    # only that order may differ; the header's length and everything else is the same bytes.
    their_length, their_header = _header(theirs)
    assert their_length == length and ours[8 + length :] == theirs[8 + length :]
    assert their_header[1:] == header[1:] and dict(their_header[0][1]) == metadata
    path = tmp_path / "theirs.safetensors"
    safetensors_numpy.save_file(tensors, str(path), metadata)
    assert path.read_bytes()[8 + length :] == ours[8 + length :]
    # ours keeps the order the metadata was given in, so saving twice gives the same bytes
    assert [k for k, _ in header[0][1]] == ["nnlayers.format", *META, "nnlayers.sha256"]
    assert save_checkpoint(tmp_path / "twice.safetensors", tensors, META).read_bytes() == ours


def test_the_checksum_is_the_documented_one(saved):
    """What nnlayers versions before this one check: SHA-256 of a prefix, the sorted JSON of
    the tensor entries and the other metadata, then the data section."""
    data = saved.read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + length])
    meta = header.pop("__metadata__")
    recorded = meta.pop("nnlayers.sha256")
    h = hashlib.sha256(b"nnlayers-checkpoint-v1\0")
    h.update(json.dumps({"tensors": header, "metadata": meta}, sort_keys=True).encode())
    h.update(data[8 + length :])
    assert h.hexdigest() == recorded


# -- malformed files ---------------------------------------------------------------------
def _raw_file(path, header, data=b""):
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data)
    return path


@pytest.mark.parametrize(
    ("header", "message"),
    [
        (b"[" * 100_000, r"corrupt header \(not valid JSON: .*recursion"),
        (b'{"a": ' + b"1" * 5000 + b"}", r"corrupt header \(not valid JSON: .*digits"),
        ({"__metadata__": {"nnlayers.format": "1", "n": "7" * 5000}}, r"corrupt metadata 'n'"),
        ({"__metadata__": {"nnlayers.format": "1", "n": "[" * 100_000}}, "corrupt metadata 'n'"),
        ({"__metadata__": {"nnlayers.format": "1", "n": "{}"}}, "is a JSON object, not a"),
        ({"__metadata__": {"nnlayers.format": "1", "n": "nope"}}, "metadata 'n': not valid JSON"),
        ({"__metadata__": {"nnlayers.format": "2"}}, r"'nnlayers\.format' is '2': .* format 1"),
        ({"__metadata__": {"k": 1}}, r"__metadata__ must map str to str"),
        ({"a": {"shape": [1], "data_offsets": [0, 1]}}, r"entry 'a': no 'dtype'"),
        ({"a": {"dtype": "U8"}}, r"entry 'a': no 'shape', 'data_offsets'"),
        ({"a": {"dtype": "U8", "shape": "1", "data_offsets": [0, 1]}}, "bad shape '1'"),
        ({"a": {"dtype": "U8", "shape": [1], "data_offsets": [0]}}, r"bad data_offsets \[0\]"),
        ({"a": {"dtype": 8, "shape": [1], "data_offsets": [0, 1]}}, "unknown dtype 8"),
    ],
)
def test_malformed_headers_and_metadata_are_checkpoint_errors(tmp_path, header, message):
    data = b"" if isinstance(header, bytes) or "a" not in header else b"x"
    path = _raw_file(tmp_path / "bad.safetensors", header, data)
    with pytest.raises(CheckpointError, match=rf"checkpoint .*bad\.safetensors: .*{message}"):
        load_checkpoint(path)


@pytest.mark.parametrize("keep", [0, 5, 8, 20, -1, -17])
def test_truncated_files_are_errors_naming_the_file(saved, keep):
    data = saved.read_bytes()
    saved.write_bytes(data[:keep])
    with pytest.raises(CheckpointError, match=rf"{saved.name}: (truncated|corrupt)"):
        load_checkpoint(saved)


def test_every_flipped_header_byte_is_detected(saved):
    data = saved.read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    for position in range(8 + length):
        for mask in (0x01, 0x80):
            broken = bytearray(data)
            broken[position] ^= mask
            saved.write_bytes(bytes(broken))
            with pytest.raises(CheckpointError, match=saved.name):
                load_checkpoint(saved)


def test_flipped_data_bytes_are_detected(saved):
    data = bytearray(saved.read_bytes())
    data[-3] ^= 0x10
    saved.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="do not match the SHA-256"):
        load_checkpoint(saved)


def test_structural_errors_are_explained(tmp_path):
    def write(header, data=b""):
        raw = json.dumps(header).encode()
        path = tmp_path / "bad.safetensors"
        path.write_bytes(struct.pack("<Q", len(raw)) + raw + data)
        return path

    cases = [
        ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, b"", "truncated"),
        ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}}, b"1234", "needs 8"),
        ({"a": {"dtype": "Q7", "shape": [1], "data_offsets": [0, 4]}}, b"1234", "unknown dtype"),
        ({"a": {"dtype": "BF16", "shape": [1], "data_offsets": [0, 2]}}, b"12", "NumPy cannot"),
        ({"a": {"dtype": "U8", "shape": [-1], "data_offsets": [0, 1]}}, b"1", "bad shape"),
        ({"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}}, b"12", "unexpected bytes"),
        ({"a": {"dtype": "U8", "shape": [1], "data_offsets": [1, 2]}}, b"12", "starts at byte 1"),
        ([1, 2], b"", "not a JSON object"),
    ]
    for header, data, message in cases:
        with pytest.raises(CheckpointError, match=message):
            load_checkpoint(write(header, data))


def test_bad_arguments_to_save(tmp_path):
    path = tmp_path / "x.safetensors"
    with pytest.raises(TypeError, match="'a' is a list"):
        save_checkpoint(path, {"a": [1, 2]})
    with pytest.raises(ValueError, match="invalid tensor name"):
        save_checkpoint(path, {"": np.zeros(1)})
    with pytest.raises(TypeError, match="metadata 'x' is a dict"):
        save_checkpoint(path, {}, {"x": {}})
    with pytest.raises(ValueError, match="invalid metadata key"):
        save_checkpoint(path, {}, {"nnlayers.sha256": "x"})
    with pytest.raises(TypeError, match="cannot store"):
        save_checkpoint(path, {"c": np.zeros(2, dtype=np.complex64)})
    assert not path.exists()


def test_restore_into_validates_everything_first(xp, host, tmp_path):
    path = tmp_path / "model.safetensors"
    save_checkpoint(path, {"W": np.ones((3, 2)), "b": np.full(2, 2.0)})
    W = xp.zeros((3, 2), dtype=xp.float64)
    b = xp.zeros(2, dtype=xp.float64)
    metadata = load_into(path, {"W": W, "b": b})
    assert metadata == {}
    assert host(W).tolist() == [[1.0, 1.0]] * 3 and host(b).tolist() == [2.0, 2.0]

    save_checkpoint(path, {"W": np.full((3, 2), 5.0), "b": np.zeros(3)})
    W2 = xp.zeros((3, 2), dtype=xp.float64)
    b2 = xp.zeros(2, dtype=xp.float64)
    with pytest.raises(
        CheckpointError,
        match=r"model\.safetensors does not fit \(nothing was changed\): 'b' is float64\[3\] "
        r"in the file but float64\[2\] in the model",
    ):
        load_into(path, {"W": W2, "b": b2})
    assert host(W2).tolist() == [[0.0, 0.0]] * 3  # W fits, but was not written


def test_restore_into_reports_missing_unexpected_and_dtype(xp):
    loaded = {"W": np.ones(2, dtype=np.float32), "extra": np.ones(1)}
    targets = {"W": xp.zeros(2, dtype=xp.float64), "gone": xp.zeros(1)}
    with pytest.raises(CheckpointError) as info:
        restore_into(targets, loaded, "f.safetensors")
    message = str(info.value)
    assert "checkpoint f.safetensors" in message
    assert "'gone' is missing" in message
    assert "'W' is float32[2] in the file but float64[2] in the model" in message
    assert "unexpected entries 'extra'" in message
    targets = {"W": xp.zeros(2, dtype=xp.float32)}
    restore_into(targets, loaded, strict=False)
    assert np.asarray(xp.to_numpy(targets["W"])).tolist() == [1.0, 1.0]


def test_docstring_example_runs():
    import doctest

    assert doctest.testmod(checkpoint).failed == 0


@pytest.mark.skipif(not hasattr(os, "fchmod"), reason="no POSIX file modes on this platform")
def test_new_files_follow_the_umask_and_replaced_ones_keep_their_mode(tmp_path):
    old = os.umask(0o027)
    try:
        path = save_checkpoint(tmp_path / "new.safetensors", {"a": np.zeros(2)})
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o640
    path.chmod(0o604)
    save_checkpoint(path, {"a": np.ones(2)})
    assert path.stat().st_mode & 0o777 == 0o604
