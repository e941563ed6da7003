"""``Backend.capture`` on CUDA: work captured once as a CUDA graph (CuPy's) and replayed.

The pattern (``../shared/research/cuda-graphs.md``, section 1; PyTorch's ``torch.cuda.graph``):

- one non-blocking stream per device captures and replays (never the legacy null stream, whose
  implicit synchronisation a capture refuses); it waits for the work queued on the current
  stream before each capture and each replay, and the current stream waits for it after, so a
  replay is ordered with the eager work around it without a host synchronisation;
- every allocation during the capture comes from a graph-private ``cupy.cuda.MemoryPool``
  kept alive with the graph: memory the graph reads or writes is never handed to eager code,
  and a block freed inside the capture is reused only inside it, in capture order;
- matrix products go through :mod:`arraycore_cuda._cublas` while the capture lasts (CuPy's
  cuBLAS wrappers refuse a capturing stream); cuDNN's plans run on the current stream, which is
  the capture stream inside it;
- whatever the captured function does that a capture cannot hold (a host copy, a
  synchronisation, a library CuPy refuses under capture, a kernel compiled for the first time
  on a driver that refuses it) raises inside the capture: the capture is ended and discarded,
  and :class:`arraycore.backend.CaptureUnsupported` says what, in one line.

``ARRAYCORE_CUDA_GRAPHS=0`` turns capture off (``capture_support`` then says so).
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from typing import Any

from arraycore.backend import Captured, CaptureUnsupported, env_switch

from . import _cublas

#: Environment variable: ``0`` turns CUDA graph capture off.
ENV_GRAPHS = "ARRAYCORE_CUDA_GRAPHS"


def graphs_enabled() -> bool:
    """Whether ``$ARRAYCORE_CUDA_GRAPHS`` leaves capture on (the default)."""
    return env_switch(ENV_GRAPHS)


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:300]


class _Hold:
    """What a captured graph needs alive: the graph, its private pool, stream and cuBLAS."""

    def __init__(self, graph: Any, pool: Any, stream: Any, gemm: Any) -> None:
        self.graph, self.pool, self.stream, self.gemm = graph, pool, stream, gemm


class Graphs:
    """Capture and replay on one CUDA device (one per backend instance, made lazily)."""

    def __init__(self, cp: Any, index: int) -> None:
        self._cp = cp
        self._index = index
        #: True while a capture is under way on this device (the matmul override reads it)
        self.capturing = False
        self._stream: Any = None
        self._gemm: _cublas.Gemm | None = None
        self._gemm_error: str | None = None
        self._lock = threading.Lock()
        self.captures = 0
        self._holds: list[weakref.ref[_Hold]] = []

    def pool_bytes(self) -> int:
        """Bytes the private pools of the live captured graphs hold (what replays use)."""
        live = [h for h in (ref() for ref in self._holds) if h is not None]
        self._holds = [weakref.ref(h) for h in live]
        return sum(int(h.pool.total_bytes()) for h in live)

    def support(self) -> str | None:
        """``None`` where capture can be tried here, else why not."""
        if not graphs_enabled():
            return f"CUDA graph capture is off (${ENV_GRAPHS}=0)"
        cuda = self._cp.cuda
        if not hasattr(cuda, "Graph") or not hasattr(cuda.Stream, "begin_capture"):
            return f"CuPy {self._cp.__version__} has no CUDA graph capture (CuPy 13 or later has)"
        if self._gemm_error is not None:
            return self._gemm_error
        return None

    def gemm(self) -> _cublas.Gemm:
        """The capturable matrix product of this device (made once, before a capture)."""
        if self._gemm is None:
            cp = self._cp
            try:
                # CuPy loads libcublas at its first product: make sure it has
                cp.matmul(cp.ones((2, 2), cp.float32), cp.ones((2, 2), cp.float32))
                self._gemm = _cublas.Gemm(cp, _cublas.Library(_cublas.find_library()))
            except Exception as exc:
                self._gemm_error = f"no capturable cuBLAS product: {_one_line(exc)}"
                raise CaptureUnsupported(self._gemm_error) from exc
        return self._gemm

    def matmul(self, x1: Any, x2: Any) -> Any:
        """The product inside a capture (cuBLAS through ctypes, on the capture stream)."""
        gemm = self._gemm
        assert gemm is not None  # made by capture() before it begins
        return gemm.matmul(x1, x2)

    def capture(self, fn: Any) -> Captured:
        reason = self.support()
        if reason is not None:
            raise CaptureUnsupported(reason)
        cp = self._cp
        with self._lock, cp.cuda.Device(self._index):
            gemm = self.gemm()
            if self._stream is None:
                self._stream = cp.cuda.Stream(non_blocking=True)
            stream = self._stream
            pool = cp.cuda.MemoryPool()
            outer = cp.cuda.get_current_stream()
            stream.wait_event(outer.record())
            try:
                with stream, cp.cuda.using_allocator(pool.malloc):
                    gemm.bind(int(stream.ptr))
                    self.capturing = True
                    stream.begin_capture()
                    try:
                        result = fn()
                    except BaseException:
                        self.capturing = False
                        # end and discard it; the error that matters is fn's
                        with contextlib.suppress(Exception):
                            stream.end_capture()
                        raise
                    self.capturing = False
                    graph = stream.end_capture()
            except CaptureUnsupported:
                raise
            except Exception as exc:
                raise CaptureUnsupported(
                    f"the work could not be captured as a CUDA graph: {_one_line(exc)}"
                ) from exc
            graph.upload(stream)
            self.captures += 1

        def replay() -> None:
            with cp.cuda.Device(self._index):
                current = cp.cuda.get_current_stream()
                stream.wait_event(current.record())
                graph.launch(stream)
                current.wait_event(stream.record())

        hold = _Hold(graph, pool, stream, gemm)
        self._holds.append(weakref.ref(hold))
        return Captured(
            result,
            replay,
            description=f"CUDA graph on device {self._index} (CuPy {cp.__version__})",
            keep=hold,
        )
