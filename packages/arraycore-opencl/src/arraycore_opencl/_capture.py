"""``Backend.capture`` on OpenCL: a step's launches recorded once, replayed as a list.

OpenCL has no graphs a queue could replay (``cl_khr_command_buffer`` is an extension few drivers
have, PoCL's among them but not NVIDIA's). What costs in an OpenCL step on the host is not the
enqueue but everything Python does before it: arraycore's dispatch and checks, shapes and
strides, buffer allocation. So a capture runs the step's Python once with the device runtime
recording instead of enqueueing (:attr:`DeviceRuntime.recording`): each kernel launch is kept
with its global and local sizes and its arguments, each queued copy, fill or CLBlast product as
a closure; a replay enqueues exactly those again, in order, on the same queue, with no Python
between them but the loop.

Memory: allocations made while recording come from a pool of the capture's own, kept with it,
and the recorded launches hold their buffers by handle, so a buffer freed inside the step is
reused inside it as the eager step would (in recording order, on one in-order queue), and never
handed to work outside the capture. Buffers allocated before the capture (parameters, optimiser
state, the static inputs) are held by the recording and outlive it.

What cannot be recorded raises :class:`arraycore.backend.CaptureUnsupported`: a copy between
host and device (``to_numpy``, ``from_numpy``/``asarray`` of host data) or a wait inside the
step. ``ARRAYCORE_OPENCL_CAPTURE=0`` turns capture off.

Measured on PoCL (2-core Xeon, one thread, 2026-12-01): see ``docs/capture.md``.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from arraycore.backend import Captured, CaptureUnsupported, env_switch

from . import _runtime

#: Environment variable: ``0`` turns capture off on OpenCL.
ENV_CAPTURE = "ARRAYCORE_OPENCL_CAPTURE"


def support() -> str | None:
    """``None`` where capture is on (the default), else why not."""
    if env_switch(ENV_CAPTURE):
        return None
    return f"capture is off on OpenCL (${ENV_CAPTURE}=0)"


class Recording:
    """What one capture recorded: ``(kernel, global, local, args)`` launches and closures."""

    def __init__(self, pool: Any) -> None:
        self.pool = pool
        #: the memory handles of buffers allocated while recording (from :attr:`pool`)
        self.private: set[int] = set()
        self.items: list[Any] = []
        self.held: list[Any] = []  # buffers of closures, kept alive with the recording
        self.launches = 0
        self.calls = 0

    def launch(self, kernel: Any, size: Any, local: Any, args: tuple[Any, ...]) -> None:
        self.items.append((kernel, size, local, tuple(self._handle(a) for a in args)))
        self.launches += 1

    def _handle(self, arg: Any) -> Any:
        """A kernel argument as the recording keeps it: a buffer allocated while recording by a
        retained handle of its memory (so that the capture's pool may reuse it for a later
        array of the step, as the eager step would), anything else as it is (held)."""
        cl = _runtime._cl()
        if isinstance(arg, cl._cl.PooledBuffer) and arg.int_ptr in self.private:
            return cl.Buffer.from_int_ptr(arg.int_ptr, retain=True)
        return arg

    def call(self, work: Callable[[], None], buffers: tuple[Any, ...]) -> None:
        self.items.append(work)
        self.held.extend(buffers)
        self.calls += 1


def capture(rt: Any, fn: Callable[[], Any]) -> Captured:
    """Record ``fn()``'s device work on ``rt`` (:class:`DeviceRuntime`) for replay."""
    reason = support()
    if reason is not None:
        raise CaptureUnsupported(reason)
    if rt.recording is not None:
        raise CaptureUnsupported("a capture is already under way in this thread")
    import pyopencl.tools

    pool = pyopencl.tools.MemoryPool(pyopencl.tools.ImmediateAllocator(rt.queue))
    recording = Recording(pool)
    rt.capture_pools.append(weakref.ref(recording))
    rt.record(recording, pool)
    try:
        result = fn()
    except CaptureUnsupported:
        raise
    except Exception as exc:
        text = " ".join(str(exc).split())[:300]
        raise CaptureUnsupported(
            f"the work could not be recorded: {type(exc).__name__}: {text}"
        ) from exc
    finally:
        rt.record(None, None)
    items = recording.items
    queue, lock = rt.queue, rt._launch_lock

    def replay() -> None:
        with lock:
            for item in items:
                if type(item) is tuple:
                    kernel, size, local, args = item
                    kernel(queue, size, local, *args)
                else:
                    item()

    description = (
        f"OpenCL launch list ({recording.launches} launches, {recording.calls} queued copies "
        f"and products)"
    )
    return Captured(result, replay, description=description, keep=recording)
