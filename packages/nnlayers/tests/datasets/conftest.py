"""Fixtures for the data-set tests: an isolated cache folder and local HTTP mirrors."""

from __future__ import annotations

import contextlib
import http.server
import threading
import time
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def data_cache(tmp_path, monkeypatch):
    """Point ``NNLAYERS_DATA`` at a fresh folder, so no test touches the real cache."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("NNLAYERS_DATA", str(folder))
    monkeypatch.delenv("NNLAYERS_DOWNLOAD_DEADLINE", raising=False)
    return folder


@pytest.fixture
def mirror(tmp_path):
    """A folder whose files the ``server`` fixture publishes."""
    folder = tmp_path / "mirror"
    folder.mkdir()
    return folder


class Server:
    """An HTTP server on 127.0.0.1 that publishes the ``mirror`` folder in several manners.

    ``url(kind)`` is the base URL of one manner: ``files`` serves each file whole, ``missing``
    answers 404, ``hang`` accepts the connection and answers nothing, ``stall`` sends the
    headers and then nothing, ``trickle`` sends one byte every 50 ms and ``slow`` 64 KiB every
    20 ms. Nothing waits for more than 20 s, and everything stops when the test ends.
    """

    LIMIT = 20.0

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.stop = threading.Event()
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - the name http.server calls
                # the client may give up on a mirror, as it should
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    server.answer(self)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    def url(self, kind: str) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/{kind}/"

    def answer(self, request: http.server.BaseHTTPRequestHandler) -> None:
        _, kind, name = request.path.split("/", 2)
        path = self.folder / name
        if kind == "hang":
            self.stop.wait(self.LIMIT)
            return
        if kind == "missing" or not path.is_file():
            request.send_error(404)
            return
        data = path.read_bytes()
        request.send_response(200)
        request.send_header("Content-Length", str(len(data)))
        request.end_headers()
        request.wfile.flush()
        step, pause = {"trickle": (1, 0.05), "slow": (1 << 16, 0.02)}.get(kind, (len(data), 0))
        if kind == "stall":
            self.stop.wait(self.LIMIT)
            return
        end = time.monotonic() + self.LIMIT
        for start in range(0, len(data), step):
            request.wfile.write(data[start : start + step])
            request.wfile.flush()
            if pause and (self.stop.wait(pause) or time.monotonic() > end):
                return

    def close(self) -> None:
        self.stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)


@pytest.fixture
def server(mirror):
    """A :class:`Server` publishing ``mirror``; shut down when the test ends."""
    s = Server(mirror)
    yield s
    s.close()
