"""File-system faults: real read-only and full file systems, no free inodes, a file-size limit
and symbolic-link loops. Every error names the user's path (never a temporary), carries the
OS's ``errno``, is an ``OSError`` and a :class:`nnlayers.errors.FileFaultError`, and leaves the
previous file as it was with no temporary behind.

The tmpfs tests mount a small tmpfs below ``tmp_path`` (root, and a container that allows
``mount``); elsewhere they are skipped with the reason.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import pickle
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from nnlayers._atomic import atomic_write
from nnlayers.checkpoint import (
    CheckpointError,
    CheckpointIOError,
    load_checkpoint,
    save_checkpoint,
)
from nnlayers.datasets._files import download
from nnlayers.datasets.idx import read_idx, write_idx
from nnlayers.errors import FileFaultError, NNLayersError
from nnlayers.train.checkpoints import read_metadata

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX file-system faults")


def _mount(folder, *args):
    done = subprocess.run(["mount", *args, str(folder)], capture_output=True, text=True)
    if done.returncode != 0:
        return done.stderr.strip() or f"mount exited with {done.returncode}"
    return None


@pytest.fixture
def tmpfs(tmp_path):
    """``tmpfs(size=..., nr_inodes=...)``: a fresh tmpfs mounted below ``tmp_path``, with a
    ``readonly()`` function to remount it read-only; unmounted at the end of the test."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root and the mount command (running as uid "
                    f"{os.geteuid()}, mount at {shutil.which('mount')})")  # fmt: skip
    mounted = []

    def make(size="1m", nr_inodes=64):
        folder = tmp_path / f"fs{len(mounted)}"
        folder.mkdir()
        why = _mount(folder, "-t", "tmpfs", "-o", f"size={size},nr_inodes={nr_inodes}", "tmpfs")
        if why is not None:
            print(f"cannot mount a tmpfs here ({why}): skipped")
            pytest.skip(f"cannot mount a tmpfs in this container: {why}")
        mounted.append(folder)
        return folder

    yield make
    for folder in reversed(mounted):
        if subprocess.run(["umount", str(folder)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(folder)], capture_output=True)


def _readonly(folder):
    why = _mount(folder, "-o", "remount,ro")
    if why is not None:
        pytest.skip(f"cannot remount a tmpfs read-only in this container: {why}")


def _check_fault(info, path, code, action="save"):
    """The error names ``path`` (not a temporary), says what failed and why, has ``code``."""
    exc = info.value
    assert isinstance(exc, OSError) and isinstance(exc, FileFaultError)
    assert isinstance(exc, NNLayersError)
    assert exc.errno == code, exc.errno
    assert exc.filename == str(path)
    assert exc.strerror == os.strerror(code)
    text = str(exc)
    assert str(path) in text and f"cannot {action}" in text
    assert os.strerror(code) in text and errno.errorcode[code] in text
    assert ".tmp" not in text, text  # the temporary is not what the user named
    return exc


def _only(folder, *names):
    assert sorted(p.name for p in folder.iterdir()) == sorted(names)


def test_saving_onto_a_read_only_file_system(tmpfs):
    fs = tmpfs()
    path = fs / "run.safetensors"
    save_checkpoint(path, {"w": np.zeros(4)}, {"v": 1})
    _readonly(fs)
    with pytest.raises(OSError) as info:
        save_checkpoint(path, {"w": np.ones(4)}, {"v": 2})
    exc = _check_fault(info, path, errno.EROFS)
    assert isinstance(exc, CheckpointIOError) and isinstance(exc, CheckpointError)
    assert "the previous file is unchanged" in str(exc)
    assert load_checkpoint(path)[1] == {"v": 1}
    _only(fs, "run.safetensors")


def test_a_full_file_system_is_both_a_checkpoint_error_and_an_os_error(tmpfs):
    fs = tmpfs(size="1m")
    path = fs / "run.safetensors"
    save_checkpoint(path, {"w": np.zeros(4)}, {"v": 1})
    with pytest.raises(CheckpointError) as info:  # as before: a full disk is a CheckpointError
        save_checkpoint(path, {"w": np.ones(400_000)}, {"v": 2})
    _check_fault(info, path, errno.ENOSPC)
    assert "no free inodes" not in str(info.value)
    assert load_checkpoint(path)[1] == {"v": 1}
    _only(fs, "run.safetensors")


@pytest.mark.parametrize("spare", [0, 1], ids=["no-inode", "one-inode"])
def test_no_free_inodes(tmpfs, spare):
    """``spare=1``: the temporary folder gets the last inode, the file in it finds none."""
    fs = tmpfs(nr_inodes=32)
    path = fs / "run.safetensors"
    save_checkpoint(path, {"w": np.zeros(4)}, {"v": 1})
    fillers = []
    with pytest.raises(OSError):  # the tmpfs runs out of inodes
        while True:
            (fs / f"f{len(fillers)}").touch()
            fillers.append(f"f{len(fillers)}")
    for name in fillers[len(fillers) - spare :]:
        (fs / name).unlink()
        fillers.remove(name)
    with pytest.raises(OSError) as info:
        save_checkpoint(path, {"w": np.ones(4)}, {"v": 2})
    exc = _check_fault(info, path, errno.ENOSPC)
    assert isinstance(exc, CheckpointError)
    assert "no free inodes" in str(exc)
    assert load_checkpoint(path)[1] == {"v": 1}
    _only(fs, "run.safetensors", *fillers)


def test_other_atomic_writes_name_their_file_on_a_full_or_read_only_file_system(tmpfs):
    fs = tmpfs(size="1m")
    idx = fs / "images-idx3-ubyte"
    write_idx(idx, np.zeros((2, 2, 2), np.uint8))
    with pytest.raises(FileFaultError) as info:  # out.write fails, then the temporary's close
        write_idx(idx, np.ones((300, 64, 64), np.uint8))
    _check_fault(info, idx, errno.ENOSPC, action="write")
    assert str(info.value).startswith(f"IDX file {idx}: ")
    assert not isinstance(info.value, CheckpointError)
    _readonly(fs)
    with pytest.raises(FileFaultError) as info:
        write_idx(idx, np.ones((2, 2, 2), np.uint8))
    _check_fault(info, idx, errno.EROFS, action="write")
    _only(fs, idx.name)


def test_a_download_onto_a_full_disk_names_the_file_and_tries_no_other_mirror(tmpfs, tmp_path):
    source = tmp_path / "data.bin"
    payload = os.urandom(2_000_000)
    source.write_bytes(payload)
    digest = hashlib.sha256(payload).hexdigest()
    fs = tmpfs(size="1m")
    mirrors = [source.as_uri(), (tmp_path / "never" / "data.bin").as_uri()]
    with pytest.raises(FileFaultError) as info:
        download("data.bin", mirrors, digest, len(payload), fs, progress=False)
    _check_fault(info, fs / "data.bin", errno.ENOSPC, action="write")
    assert str(info.value).startswith(f"download {fs / 'data.bin'}: ")
    assert "never" not in str(info.value)  # raised at once, not after the other mirrors
    _only(fs)


FILE_SIZE_LIMIT = textwrap.dedent(
    """
    import json, resource, signal, sys
    import numpy as np
    from nnlayers.checkpoint import CheckpointError, save_checkpoint
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of the signal's death
    path = sys.argv[1]
    save_checkpoint(path, {"w": np.zeros(4)}, {"v": 1})
    resource.setrlimit(resource.RLIMIT_FSIZE, (65536, resource.RLIM_INFINITY))
    try:
        save_checkpoint(path, {"w": np.ones(100_000)}, {"v": 2})
    except OSError as exc:
        print(json.dumps([type(exc).__name__, exc.errno, exc.filename, str(exc),
                          isinstance(exc, CheckpointError)]))
    """
)


def test_a_file_size_limit_is_efbig_naming_the_checkpoint(tmp_path):
    path = tmp_path / "big.safetensors"
    done = subprocess.run([sys.executable, "-c", FILE_SIZE_LIMIT, str(path)],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip(), "the save under the file-size limit raised no OSError"
    kind, code, filename, text, is_checkpoint_error = json.loads(done.stdout)
    assert (kind, code, filename, is_checkpoint_error) == (
        "CheckpointIOError",
        errno.EFBIG,
        str(path),
        True,
    )
    assert f"checkpoint {path}: cannot save: File too large (EFBIG)" in text
    assert load_checkpoint(path)[1] == {"v": 1}
    _only(tmp_path, path.name)


def _loop(folder):
    a, b = folder / "a.safetensors", folder / "b.safetensors"
    os.symlink(b, a)
    os.symlink(a, b)
    return a


def test_a_symlink_loop_is_reported_as_a_loop_not_a_missing_file(tmp_path):
    loop = _loop(tmp_path)
    for load in (load_checkpoint, read_metadata):
        with pytest.raises(OSError) as info:
            load(loop)
        exc = _check_fault(info, loop, errno.ELOOP, action="load")
        assert not isinstance(exc, FileNotFoundError)
        assert "no such file" not in str(exc)
        assert not isinstance(exc, CheckpointError)  # a path problem, as a missing file is


def test_reading_an_idx_file_through_a_symlink_loop(tmp_path):
    loop = _loop(tmp_path)
    with pytest.raises(FileFaultError) as info:
        read_idx(loop)
    _check_fault(info, loop, errno.ELOOP, action="read")
    assert not isinstance(info.value, FileNotFoundError)
    with pytest.raises(FileNotFoundError) as info:
        read_idx(tmp_path / "nope-idx")
    assert info.value.errno == errno.ENOENT and str(info.value).endswith(": no such file")


def test_saving_into_a_folder_that_is_a_symlink_loop(tmp_path):
    loop = _loop(tmp_path)
    path = loop / "run.safetensors"
    with pytest.raises(OSError) as info:
        save_checkpoint(path, {"w": np.zeros(2)})
    assert info.value.errno == errno.ELOOP and info.value.filename == str(path)
    assert f"checkpoint {path}: cannot write into the folder {loop}" in str(info.value)
    assert "Too many levels of symbolic links" in str(info.value)
    assert "is a file" not in str(info.value)


def test_path_errors_keep_their_classes_and_gain_errno_and_filename(tmp_path):
    missing = tmp_path / "nope.safetensors"
    with pytest.raises(FileNotFoundError) as info:
        load_checkpoint(missing)
    assert isinstance(info.value, FileFaultError) and not isinstance(info.value, CheckpointError)
    assert (info.value.errno, info.value.filename) == (errno.ENOENT, str(missing))
    assert str(info.value) == f"checkpoint {missing}: no such file"
    with pytest.raises(IsADirectoryError) as info:
        load_checkpoint(tmp_path)
    assert (info.value.errno, info.value.filename) == (errno.EISDIR, str(tmp_path))
    absent = tmp_path / "absent" / "x.safetensors"
    with pytest.raises(FileNotFoundError) as info:
        save_checkpoint(absent, {})
    assert (info.value.errno, info.value.filename) == (errno.ENOENT, str(absent))
    (tmp_path / "f").write_text("x")
    with pytest.raises(NotADirectoryError) as info:
        save_checkpoint(tmp_path / "f" / "x.safetensors", {})
    assert info.value.errno == errno.ENOTDIR and isinstance(info.value, FileFaultError)


def test_fault_errors_pickle_with_their_classes_and_messages(tmp_path):
    with pytest.raises(FileNotFoundError) as missing:
        load_checkpoint(tmp_path / "nope.safetensors")
    io = CheckpointIOError.of(errno.ENOSPC)(errno.ENOSPC, "No space", "/x", "checkpoint /x: ...")
    denied = CheckpointIOError.of(errno.EACCES)(errno.EACCES, "Denied", "/y", "checkpoint /y")
    for exc in (missing.value, io, denied):
        back = pickle.loads(pickle.dumps(exc))
        assert type(back) is type(exc) and str(back) == str(exc)
        assert (back.errno, back.strerror, back.filename) == (exc.errno, exc.strerror, exc.filename)
    assert isinstance(denied, PermissionError) and isinstance(denied, CheckpointError)
    assert type(denied).__name__ == "CheckpointIOError"


def test_errors_of_the_writer_that_are_no_file_fault_pass_through(tmp_path):
    """A download's lost connection is raised as it is, not as a fault of the file."""
    target = tmp_path / "data.gz"
    with pytest.raises(ConnectionResetError) as info, atomic_write(target, label="download"):
        raise ConnectionResetError(errno.ECONNRESET, "Connection reset by peer")
    assert not isinstance(info.value, FileFaultError)
    with pytest.raises(OSError, match=r"^disk full$"), atomic_write(target):  # no errno: as is
        raise OSError("disk full")
    _only(tmp_path)


def test_a_csv_log_appending_onto_a_read_only_file_system_names_the_log(tmpfs):
    """CSVLogger's append (not an atomic rewrite) reports the fault for the log's path too."""
    import nnlayers
    from nnlayers.layers import Affine
    from nnlayers.optim import SGD
    from nnlayers.train import CSVLogger

    fs = tmpfs()
    log = fs / "log.csv"
    x = np.ones((4, 2), np.float32)
    y = np.array([0, 1, 0, 1])
    model = nnlayers.Classifier(Affine(2, seed=0), (2,))
    feed = nnlayers.Feed(x, y, batch_size=2)
    nnlayers.fit(model, feed, 1, callbacks=[CSVLogger(log)], optimizer=SGD(0.1), progress=False)
    before = log.read_text()
    _readonly(fs)
    with pytest.raises(FileFaultError) as info:
        nnlayers.fit(model, feed, 2, callbacks=[CSVLogger(log, append=True)], progress=False)
    _check_fault(info, log, errno.EROFS, action="append epoch 2")
    assert log.read_text() == before
