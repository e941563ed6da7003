"""Atomic writes under ``kill -9``: old or new checkpoint, and no temporary left for good."""

from __future__ import annotations

import fcntl
import os
import random
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from nnlayers._atomic import HOST_TAG, remove_stale_temporaries
from nnlayers.checkpoint import CheckpointError, load_checkpoint, save_checkpoint

pytestmark = pytest.mark.skipif(
    os.name != "posix", reason="SIGKILL and the stale-temporary cleanup are POSIX"
)

N = 8_000_000  # 32 MB per save: a save takes long enough to be killed in the middle
SAVER = textwrap.dedent(
    """
    import sys
    import numpy as np
    from nnlayers.checkpoint import save_checkpoint
    path, n = sys.argv[1], int(sys.argv[2])
    v = 1
    while True:
        save_checkpoint(path, {"w": np.full(n, v, np.float32)}, {"v": v})
        v += 1
    """
)


def _writing(folder, name):
    """Whether a temporary in ``folder`` (anything but ``name``) already holds data."""
    for entry in folder.iterdir():
        if entry.name == name:
            continue
        try:
            inner = list(entry.iterdir()) if entry.is_dir() else [entry]
            if any(p.stat().st_size > 0 for p in inner):
                return True
        except FileNotFoundError:
            continue
    return False


def _kill_a_saver(path, when):
    """Start a process that saves ``path`` in a loop and SIGKILL it: at the first sign of a
    write in progress (``when="writing"``) or after ``when`` seconds."""
    child = subprocess.Popen([sys.executable, "-c", SAVER, str(path), str(N)])
    try:
        if when == "writing":
            end = time.monotonic() + 30
            while not _writing(path.parent, path.name) and time.monotonic() < end:
                assert child.poll() is None, "the saver died on its own"
                time.sleep(0.001)
        else:
            time.sleep(when)
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.kill()
        child.wait(10)  # reaped: its PID no longer exists
    assert child.returncode == -signal.SIGKILL
    return child.pid


def _check_old_or_new(path):
    tensors, meta = load_checkpoint(path)  # complete: the SHA-256 of everything matches
    w = tensors["w"]
    assert w.shape in ((N,), (1,)) and np.all(w == meta["v"]), "a mix of two saves"
    return meta["v"]


def test_kill_9_mid_save_leaves_old_or_new_and_the_next_save_cleans_up(tmp_path):
    path = tmp_path / "ckpt.safetensors"
    save_checkpoint(path, {"w": np.zeros(1, np.float32)}, {"v": 0})
    delays = ["writing", "writing", *(random.Random(0).uniform(0.2, 1.2) for _ in range(2))]
    left_behind = 0
    for when in delays:
        pid = _kill_a_saver(path, when)
        _check_old_or_new(path)
        leftovers = sorted(p.name for p in tmp_path.iterdir() if p != path)
        if when == "writing":
            assert leftovers, "killed while writing, yet no temporary left behind"
        left_behind += len(leftovers)
        save_checkpoint(path, {"w": np.full(1, -1.0, np.float32)}, {"v": -1})
        assert [p.name for p in tmp_path.iterdir()] == ["ckpt.safetensors"], leftovers
        assert _check_old_or_new(path) == -1
        assert all(name.startswith(f".ckpt.safetensors.{pid}@{HOST_TAG}.") for name in leftovers)
    assert left_behind >= 2


def _dead_pid():
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], check=True,
                          capture_output=True, text=True)  # fmt: skip
    return int(done.stdout)


def _temporary(folder, name, pid, host=HOST_TAG, random_part="abcd_123"):
    path = folder / f".{name}.{pid}@{host}.{random_part}.tmp"
    path.mkdir()
    (path / name).write_bytes(b"partial")
    return path


def test_only_our_temporaries_of_dead_processes_on_this_host_are_removed(tmp_path):
    dead = _dead_pid()
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        stale = _temporary(tmp_path, "ckpt.safetensors", dead)
        stale_other_target = _temporary(tmp_path, "best.safetensors", dead, random_part="zz9_zz9z")
        live = _temporary(tmp_path, "ckpt.safetensors", sleeper.pid)
        other_host = "00000000" if HOST_TAG != "00000000" else "11111111"
        remote = _temporary(tmp_path, "ckpt.safetensors", dead, host=other_host)
        locked = _temporary(tmp_path, "ckpt.safetensors", dead, random_part="locked_1")
        not_ours = [
            tmp_path / ".ckpt.safetensors.abcd_123.tmp",  # an older nnlayers: no owner recorded
            tmp_path / f".ckpt.safetensors.{dead}@{HOST_TAG}.ABCD_123.tmp",
            tmp_path / f".ckpt.safetensors.{dead}@{HOST_TAG}.abcd_123.tmp.part",
            tmp_path / "notes.tmp",
        ]
        for p in not_ours:
            p.write_bytes(b"x")
        as_file = tmp_path / f".x.{dead}@{HOST_TAG}.abcd_123.tmp"
        as_file.write_bytes(b"a file, not one of our folders")
        holder = os.open(locked, os.O_RDONLY)  # as a writer in another PID namespace would
        try:
            fcntl.flock(holder, fcntl.LOCK_EX)
            save_checkpoint(tmp_path / "ckpt.safetensors", {"a": np.ones(2)})
        finally:
            os.close(holder)
        assert not stale.exists() and not stale_other_target.exists()
        for kept in (live, remote, locked, *not_ours, as_file):
            assert kept.exists(), kept.name
        assert (live / "ckpt.safetensors").read_bytes() == b"partial"
        # once the lock is gone (its holder ended), the next write removes that one too
        assert remove_stale_temporaries(tmp_path) == [locked]
    finally:
        sleeper.kill()
        sleeper.wait(10)


def test_a_failed_save_removes_its_own_temporary(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.safetensors"
    save_checkpoint(path, {"a": np.zeros(3)}, {"v": 1})

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("safetensors.numpy.save_file", full_disk)
    with pytest.raises(OSError, match="No space left") as info:
        save_checkpoint(path, {"a": np.ones(3)}, {"v": 2})
    # the user's path, not the temporary's; a CheckpointError too (see test_file_faults.py)
    assert isinstance(info.value, CheckpointError)
    assert (info.value.errno, info.value.filename) == (28, str(path))
    assert str(info.value).startswith(f"checkpoint {path}: cannot save: No space left")
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt.safetensors"]
    assert load_checkpoint(path)[1] == {"v": 1}
