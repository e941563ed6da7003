"""Downloads against local HTTP mirrors: deadlines, stalls, progress, and killed downloads."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import nnlayers.datasets.mnist as mnist
from nnlayers.datasets import DatasetError, RemoteFiles, load_mnist, write_idx
from nnlayers.datasets._files import download, download_deadline


def _publish(mirror, name, size, seed=0):
    blob = np.random.default_rng(seed).integers(0, 256, size=size, dtype=np.uint8).tobytes()
    (mirror / name).write_bytes(blob)
    return blob, hashlib.sha256(blob).hexdigest()


def test_stalled_and_slow_mirrors_are_left_for_the_next(server, mirror, tmp_path, capsys):
    blob, sha256 = _publish(mirror, "data.bin", 300_000)
    mirrors = [server.url(kind) for kind in ("hang", "stall", "trickle", "files")]
    start = time.monotonic()
    path = download(
        "data.bin", mirrors, sha256, len(blob), tmp_path / "d", deadline=1.0, stall=0.5,
        progress=True,
    )  # fmt: skip
    elapsed = time.monotonic() - start
    assert path.read_bytes() == blob
    assert elapsed < 10, f"three bad mirrors took {elapsed:.1f} s"
    err = capsys.readouterr().err
    hang, stall, trickle = (f"{server.url(k)}data.bin: " for k in ("hang", "stall", "trickle"))
    assert f"{hang}stalled: no data for 0.5 s; trying the next mirror" in err
    assert f"{stall}stalled: no data for 0.5 s; trying the next mirror" in err
    assert f"{trickle}too slow: " in err and "when its deadline of 1 s passed" in err
    assert "data.bin from 127.0.0.1" in err and "293k/293k" in err  # the progress bar
    assert [p.name for p in (tmp_path / "d").iterdir()] == ["data.bin"]


def test_when_every_mirror_stalls_the_error_says_what_each_did(server, mirror, tmp_path):
    blob, sha256 = _publish(mirror, "data.bin", 1000)
    mirrors = [server.url("stall"), server.url("missing")]
    folder = tmp_path / "d"
    with pytest.raises(DatasetError) as info:
        download("data.bin", mirrors, sha256, len(blob), folder, stall=0.3, progress=False)
    message = str(info.value)
    assert f"{server.url('stall')}data.bin: stalled: no data for 0.3 s" in message
    assert f"{server.url('missing')}data.bin: HTTP Error 404" in message
    assert f"Put the file into {folder} by hand" in message
    assert list(folder.iterdir()) == []


def test_loaders_move_on_from_a_slow_mirror_within_the_deadline(
    tmp_path, server, mirror, data_cache, monkeypatch
):
    labels = np.arange(200, dtype=np.uint8) % 10
    images = np.zeros((200, 28, 28), dtype=np.uint8)
    files = {}
    for name, array in (
        ("t10k-images-idx3-ubyte.gz", images),
        ("t10k-labels-idx1-ubyte.gz", labels),
    ):
        write_idx(mirror / name, array)
        data = (mirror / name).read_bytes()
        files[name] = (hashlib.sha256(data).hexdigest(), len(data))
    remote = RemoteFiles("mnist", (server.url("trickle"), server.url("files")), files)
    monkeypatch.setattr(mnist, "MNIST", remote)
    monkeypatch.setenv("NNLAYERS_DOWNLOAD_DEADLINE", "0.8")
    start = time.monotonic()
    _, y = load_mnist(split="test")
    assert time.monotonic() - start < 10
    assert y.tolist() == labels.tolist()


def test_the_deadline_grows_with_the_size_and_can_be_set(monkeypatch):
    assert download_deadline(None) == download_deadline(1000) == 120.0
    assert download_deadline(170_052_171) == pytest.approx(850.26, abs=0.01)
    monkeypatch.setenv("NNLAYERS_DOWNLOAD_DEADLINE", "30")
    assert download_deadline(170_052_171) == 30.0
    monkeypatch.setenv("NNLAYERS_DOWNLOAD_DEADLINE", "soon")
    with pytest.raises(ValueError, match="NNLAYERS_DOWNLOAD_DEADLINE='soon': expected a number"):
        download_deadline(10)


CHILD = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from nnlayers.datasets._files import download
    url, sha256, size, folder = sys.argv[1:]
    download("data.bin", [url], sha256, int(size), Path(folder))
    """
)


def _partial_download(folder):
    """Whether a temporary in ``folder`` already holds downloaded bytes."""
    for entry in folder.iterdir() if folder.is_dir() else []:
        try:
            inner = list(entry.iterdir()) if entry.is_dir() else [entry]
            if entry.name != "data.bin" and any(p.stat().st_size > 0 for p in inner):
                return True
        except FileNotFoundError:
            continue
    return False


@pytest.mark.skipif(os.name != "posix", reason="SIGKILL and the stale-temporary cleanup are POSIX")
def test_a_killed_download_leaves_a_temporary_that_the_next_one_removes(server, mirror, tmp_path):
    blob, sha256 = _publish(mirror, "data.bin", 2_000_000)
    folder = tmp_path / "cache"
    args = [server.url("slow") + "data.bin", sha256, str(len(blob)), str(folder)]
    child = subprocess.Popen([sys.executable, "-c", CHILD, *args], stderr=subprocess.DEVNULL)
    try:
        end = time.monotonic() + 30
        while not _partial_download(folder) and time.monotonic() < end:
            assert child.poll() is None, "the download ended before it could be killed"
            time.sleep(0.005)
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.kill()
        child.wait(10)
    assert child.returncode == -signal.SIGKILL
    left = [p.name for p in folder.iterdir()]
    assert len(left) == 1, left
    download("data.bin", [server.url("files")], sha256, len(blob), folder)
    assert [p.name for p in folder.iterdir()] == ["data.bin"], left
    assert (folder / "data.bin").read_bytes() == blob
    assert left[0].startswith(f".data.bin.{child.pid}@")  # whose it was: the killed process
