"""OpenCL devices, their contexts, queues, memory pools and compiled programs.

One :class:`DeviceRuntime` per OpenCL device, shared by every backend instance on that device:
one context, one in-order command queue (so kernels run asynchronously and in order), one memory
pool, and the programs compiled for it, cached by (family, dtype).
"""

from __future__ import annotations

import collections
import os
import re
import threading
import time
import weakref
from typing import Any

import numpy as np

from . import _codegen

#: Work-group size of every launch (one size, so PoCL compiles each kernel once).
LOCAL_SIZE = 128
#: Element-wise items per work-item on CPU devices, where each work-item costs far more than an
#: item (PoCL, 2-core AMD EPYC, 1M-item add: 64 -> 0.18 ms, 256 -> 0.16 ms, 1 -> 0.94 ms).
CPU_PIECE = 256

#: Environment variable that hides float64 on every device (to try a model as it would run on
#: a device without double precision).
ENV_NO_FP64 = "ARRAYCORE_OPENCL_NO_FP64"

#: Environment variable choosing the float GEMM: ``clblast``, ``arraycore`` (:mod:`._cpu_gemm`)
#: or unset/``auto``: arraycore's on CPU devices, CLBlast on the others.
ENV_GEMM = "ARRAYCORE_OPENCL_GEMM"

#: The dtypes arraycore's GEMM kernels compute (half precision goes to CLBlast).
GEMM_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))

#: dtype -> name, faster than ``dtype.name`` (a Python property in NumPy) on every launch.
DTYPE_NAME: dict[np.dtype, str] = {np.dtype(n): n for n in _codegen.CTYPES}


_SCALARS = {
    "long": np.int64,
    "int": np.int32,
    "uint": np.uint32,
    "ulong": np.uint64,
    "float": np.float32,
    "double": np.float64,
}
_KERNEL = re.compile(r"__kernel\s+void\s+(\w+)\s*\(([^)]*)\)")


def scalar_arg_dtypes(source: str) -> dict[str, list[Any]]:
    """Per kernel of ``source``: NumPy dtype of each scalar argument, None for pointers.

    Declaring them lets pyopencl pack arguments in its fast path (several times faster per
    launch than letting it inspect each argument).
    """
    found = {}
    for name, args in _KERNEL.findall(source):
        types: list[Any] = []
        for arg in args.split(","):
            if "*" in arg:
                types.append(None)
            else:
                words = arg.replace("const", " ").split()
                types.append(_SCALARS[words[0]])
        found[name] = types
    return found


def gemm_engine(cpu: bool) -> str:
    """The float GEMM :data:`ENV_GEMM` asks for on a CPU (``cpu``) or other device."""
    value = os.environ.get(ENV_GEMM, "").strip().lower()
    if value in ("", "auto"):
        return "arraycore" if cpu else "clblast"
    if value not in ("arraycore", "clblast"):
        raise ValueError(f"{ENV_GEMM}={value!r}: expected 'arraycore', 'clblast' or 'auto'")
    return value


def describe_gemm() -> str:
    """What ``arraycore info`` says about the float GEMM (:data:`ENV_GEMM`)."""
    value = os.environ.get(ENV_GEMM, "").strip().lower() or "unset"
    if value in ("unset", "auto"):
        return f"GEMM: arraycore's kernels on CPU devices, CLBlast on others ({ENV_GEMM} {value})"
    return f"GEMM: {value} on every device ({ENV_GEMM}={value})"


def _cl() -> Any:
    import pyopencl

    return pyopencl


def device_table() -> list[tuple[int, int, Any, Any]]:
    """(platform index, device index, platform, device) of every OpenCL device."""
    cl = _cl()
    table = []
    for p, platform in enumerate(cl.get_platforms()):
        try:
            devices = platform.get_devices()
        except cl.Error:
            continue
        for d, device in enumerate(devices):
            table.append((p, d, platform, device))
    return table


def has_fp64(device: Any) -> bool:
    """Whether ``device`` has double precision (``cl_khr_fp64`` or a double_fp_config)."""
    if os.environ.get(ENV_NO_FP64, "").strip() not in ("", "0"):
        return False
    if "cl_khr_fp64" in device.extensions.split():
        return True
    try:
        return bool(device.double_fp_config)
    except Exception:
        return False


def has_fp16(device: Any) -> bool:
    """Whether ``device`` has half-precision arithmetic (``cl_khr_fp16``)."""
    return "cl_khr_fp16" in device.extensions.split()


class DeviceRuntime:
    """Context, queue, memory pool and program cache of one OpenCL device."""

    def __init__(self, platform_index: int, device_index: int, device: Any) -> None:
        cl = _cl()
        import pyopencl.tools

        self.id = f"{platform_index}:{device_index}"
        self.cl_device = device
        self.context = cl.Context([device])
        self.queue = cl.CommandQueue(self.context, device)
        #: the device's memory pool (a capture's own pool stands in for it in that thread)
        self.shared_pool = pyopencl.tools.MemoryPool(pyopencl.tools.ImmediateAllocator(self.queue))
        #: per thread: the capture under way in that thread and its pool (see :attr:`recording`)
        self._capturing = threading.local()
        self.fp64 = has_fp64(device)
        self.fp16 = has_fp16(device)
        self.local_size = min(LOCAL_SIZE, int(device.max_work_group_size))
        #: The device's compute units (asked once: a device query on every product costs time)
        self.compute_units = int(device.max_compute_units)
        #: Whether element-wise work-items take pieces of rows (CPU devices), and how many items
        #: (``_codegen._strided_kernel``); on GPUs an item per work-item.
        self.pieces = bool(device.type & cl.device_type.CPU)
        self.piece = CPU_PIECE if self.pieces else 1
        #: Whether float ``tanh`` and ``log`` are arraycore's (``_codegen._CPU_MATH``; CPU devices).
        self.cpu_math = self.pieces
        self.dtypes = [
            n
            for n in _codegen.CTYPES
            if (n != "float64" or self.fp64) and (n != "float16" or self.fp16)
        ]
        self._programs: dict[tuple[str, str], Any] = {}
        self._arg_dtypes: dict[tuple[str, str], dict[str, list[Any]]] = {}
        self._kernels: dict[tuple[str, str, str], Any] = {}
        self._meta: dict[tuple[int, ...], Any] = {}
        self._lock = threading.Lock()
        # Kernel objects hold their arguments: setting them and enqueueing must not interleave
        # between threads (a feed's prefetch thread may run kernels beside the training loop).
        self._launch_lock = threading.Lock()
        #: Seconds spent building programs, and how many were built (for tests and tuning).
        self.build_seconds = 0.0
        self.builds = 0
        #: Most bytes live arrays have held at once since the last reset (memory_stats).
        self.peak_bytes = 0
        #: Bytes of live buffers made from host data (:meth:`upload`), which the pool never sees.
        self.upload_bytes = 0
        self._freed_uploads: collections.deque[int] = collections.deque()
        self._stats_lock = threading.Lock()
        self._gemm_tuner: Any = None
        #: Which float GEMM ``matmul`` runs: ``"arraycore"`` or ``"clblast"`` (:data:`ENV_GEMM`).
        self.gemm_engine = gemm_engine(self.pieces)
        #: dtype -> (W, MR) of arraycore's GEMM kernels on this device (:mod:`._cpu_gemm`).
        self.gemm_sizes: dict[str, tuple[int, int]] = {}
        #: the live captures' recordings (weak references): their pools' bytes count as used
        self.capture_pools: list[Any] = []

    @property
    def recording(self) -> Any:
        """The capture under way in this thread (:class:`arraycore_opencl._capture.Recording`),
        or None: while it is set, this thread's launches and queued copies are recorded instead
        of enqueued. Other threads' work runs as it comes meanwhile (a model stepping in another
        thread is not caught in this one's capture)."""
        return getattr(self._capturing, "recording", None)

    @property
    def pool(self) -> Any:
        """Where this thread's arrays come from: the capture's pool while it records, else the
        device's."""
        pool = getattr(self._capturing, "pool", None)
        return self.shared_pool if pool is None else pool

    def record(self, recording: Any, pool: Any) -> None:
        """Start (``recording`` and its ``pool``) or end (``None, None``) this thread's capture."""
        self._capturing.recording, self._capturing.pool = recording, pool

    def gemm_tuner(self) -> Any:
        """The device's :class:`~arraycore_opencl._gemm_tuning.GemmTuner` (made on first use)."""
        if self._gemm_tuner is None:
            from ._gemm_tuning import GemmTuner

            self._gemm_tuner = GemmTuner(self.cl_device)
        return self._gemm_tuner

    # -- programs --------------------------------------------------------------------------------
    def program(self, family: str, dtype: str) -> Any:
        """The compiled program of ``family`` for ``dtype`` (built once, then cached)."""
        return self._program(
            (family, dtype),
            lambda: (
                _codegen.preamble(self.fp64, self.fp16, self.pieces, self.cpu_math)
                + _codegen.FAMILIES[family](dtype, self.dtypes)
            ),
        )

    def build_source(self, source: str) -> Any:
        """A program built from ``source`` (cached by its text; fused update chains)."""
        return self._program(("source", source), lambda: source)

    def _program(self, key: tuple[str, str], source: Any) -> Any:
        """The program cached under ``key``, built from ``source()`` on first use (counted in
        :attr:`builds` and :attr:`build_seconds`, scalar argument types noted per kernel)."""
        found = self._programs.get(key)
        if found is not None:
            return found
        with self._lock:
            if key not in self._programs:
                text = source()
                start = time.perf_counter()
                program = _cl().Program(self.context, text).build()
                self.build_seconds += time.perf_counter() - start
                self.builds += 1
                self._arg_dtypes[key] = scalar_arg_dtypes(text)
                self._programs[key] = program
            return self._programs[key]

    def kernel(self, family: str, dtype: str, name: str) -> Any:
        """Kernel ``name`` of the (family, dtype) program (kernel objects are cached too)."""
        key = (family, dtype, name)
        found = self._kernels.get(key)
        if found is None:
            found = self.make_kernel(self.program(family, dtype), (family, dtype), name)
            self._kernels[key] = found
        return found

    def make_kernel(self, program: Any, key: tuple[str, str], name: str) -> Any:
        """Kernel ``name`` of ``program`` (built under ``key``), its scalar argument types
        declared to pyopencl (its fast path for setting arguments)."""
        found = _cl().Kernel(program, name)
        found.set_scalar_arg_dtypes(self._arg_dtypes[key][name])
        return found

    def gemm_kernel(self, dtype: str, name: str) -> tuple[Any, tuple[int, int]]:
        """Kernel ``name`` of arraycore's GEMM program for ``dtype`` (:mod:`._cpu_gemm`), with
        the program's ``(W, MR)`` sizes for this device."""
        key = ("gemm", dtype, name)
        found = self._kernels.get(key)
        if found is None:
            from . import _cpu_gemm

            sizes = self.gemm_sizes[dtype] = _cpu_gemm.shape_for(self.cl_device, dtype)
            program = self._program(("gemm", dtype), lambda: _cpu_gemm.source(dtype, *sizes))
            found = self._kernels[key] = self.make_kernel(program, ("gemm", dtype), name)
        return found, self.gemm_sizes[dtype]

    def own_gemm(self, dtype: Any) -> bool:
        """Whether arraycore's GEMM kernels (:mod:`._cpu_gemm`) run float products of ``dtype``
        here (:data:`ENV_GEMM`; float32 and float64), rather than CLBlast."""
        return self.gemm_engine == "arraycore" and np.dtype(dtype) in GEMM_DTYPES

    def launch_tiles(self, kernel: Any, tiles: tuple[int, int], *args: Any) -> None:
        """Run ``kernel`` over a ``tiles`` grid of work-groups of one work-item each."""
        if self.recording is not None:
            self.recording.launch(kernel, tiles, (1, 1), args)
            return
        with self._launch_lock:
            kernel(self.queue, tiles, (1, 1), *args)

    def launch_rows(self, kernel: Any, cols: int, rows: int, *args: Any) -> None:
        """Run ``kernel`` over a 2-D range of ``cols`` (rounded up to whole work-groups of up to
        :attr:`local_size` items of one row) by ``rows`` work-items."""
        if cols <= 0 or rows <= 0:
            return
        ls = min(self.local_size, 1 << (cols - 1).bit_length())
        if self.recording is not None:
            self.recording.launch(kernel, (-(-cols // ls) * ls, rows), (ls, 1), args)
            return
        with self._launch_lock:
            kernel(self.queue, (-(-cols // ls) * ls, rows), (ls, 1), *args)

    def launch(self, kernel: Any, n: int, *args: Any) -> None:
        """Run ``kernel`` over ``n`` work-items (rounded up to whole work-groups)."""
        if n <= 0:
            return
        ls = self.local_size
        if self.recording is not None:
            self.recording.launch(kernel, (-(-n // ls) * ls,), (ls,), args)
            return
        with self._launch_lock:
            kernel(self.queue, (-(-n // ls) * ls,), (ls,), *args)

    def queued(self, work: Any, *buffers: Any) -> None:
        """Run ``work()``, a command that only queues device work on :attr:`queue` (a copy
        between buffers, a fill, a CLBlast product) on ``buffers``; recorded while a capture
        is under way (``buffers`` are what it reads and writes, kept alive with it)."""
        if self.recording is not None:
            self.recording.call(work, buffers)
            return
        work()

    def refuse_while_recording(self, what: str) -> None:
        """Raise ``CaptureUnsupported`` if a capture is under way: ``what`` (a host copy, a
        wait) cannot be replayed."""
        if self.recording is not None:
            from arraycore.backend import CaptureUnsupported

            raise CaptureUnsupported(f"{what} inside the captured work (it cannot be replayed)")

    # -- memory ------------------------------------------------------------------------------------
    def alloc(self, nbytes: int) -> Any:
        """A pooled buffer of at least ``nbytes`` (never zero bytes); tracks the peak."""
        buf = self.pool.allocate(max(int(nbytes), 8))
        if self.recording is not None:
            self.recording.private.add(buf.int_ptr)
        self._note_peak()
        return buf

    def upload(self, host: np.ndarray) -> Any:
        """A new buffer holding the bytes of the C-contiguous, non-empty ``host`` (refused
        inside a capture: a replay would not copy the host's new values).

        It is created with the data (``COPY_HOST_PTR``) rather than written through the queue,
        so the copy neither waits for queued kernels nor adds a command to the queue; its bytes
        count in :meth:`used_bytes` until the buffer is freed.
        """
        self.refuse_while_recording(f"a copy of a host array {host.shape} to the device")
        cl = _cl()
        flags = cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR
        buf = _upload_buffer_class()(self.context, flags, hostbuf=host.reshape(-1).view(np.uint8))
        buf.accounting = (self._freed_uploads, host.nbytes)
        with self._stats_lock:
            self.upload_bytes += host.nbytes
        self._note_peak()
        return buf

    def used_bytes(self) -> int:
        """Bytes held by live arrays: the pool's handed-out bytes plus live uploads."""
        if self._freed_uploads:
            # Freed uploads are queued by their finaliser (no lock there: it may run inside a
            # garbage collection that interrupts this very method) and subtracted here.
            with self._stats_lock:
                while self._freed_uploads:
                    self.upload_bytes -= self._freed_uploads.popleft()
        captured = 0
        if self.capture_pools:
            live = [p for p in (ref() for ref in self.capture_pools) if p is not None]
            self.capture_pools = [weakref.ref(p) for p in live]
            captured = sum(int(r.pool.active_bytes) for r in live)
        return int(self.shared_pool.active_bytes) + self.upload_bytes + captured

    def _note_peak(self) -> None:
        used = self.used_bytes()
        if used > self.peak_bytes:
            self.peak_bytes = used

    def meta(self, values: tuple[int, ...]) -> Any:
        """A read-only device buffer of int64 ``values`` (shapes and strides), cached."""
        found = self._meta.get(values)
        if found is None:
            cl = _cl()
            host = np.array(values if values else (0,), dtype=np.int64)
            found = cl.Buffer(
                self.context, cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR, hostbuf=host
            )
            if len(self._meta) > 8192:
                self._meta.clear()
            self._meta[values] = found
        return found


_upload_class: Any = None


def _upload_buffer_class() -> Any:
    """``pyopencl.Buffer`` that reports its bytes freed (pyopencl's buffers take no weakrefs)."""
    global _upload_class
    if _upload_class is None:

        class UploadBuffer(_cl().Buffer):  # type: ignore[misc]
            """A buffer made from host data; ``accounting`` is (freed-bytes queue, size)."""

            accounting: tuple[collections.deque[int], int] | None = None

            def __del__(self) -> None:
                if self.accounting is not None:
                    freed, nbytes = self.accounting
                    freed.append(nbytes)

        _upload_class = UploadBuffer
    return _upload_class


_runtimes: dict[str, DeviceRuntime] = {}
_runtimes_lock = threading.Lock()


def runtime(platform_index: int, device_index: int, device: Any) -> DeviceRuntime:
    """The shared runtime of one device."""
    key = f"{platform_index}:{device_index}"
    with _runtimes_lock:
        found = _runtimes.get(key)
        if found is None:
            found = DeviceRuntime(platform_index, device_index, device)
            _runtimes[key] = found
        return found
