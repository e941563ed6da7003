"""CLBlast's GEMM parameters measured on the device: the fastest of a few candidates per shape.

CLBlast takes its kernels' tile sizes from a database tuned per device. A device that is not in
it (PoCL's CPU devices, a GPU newer than the library) gets generic values, and on PoCL those run
a convolution's products at 8-10 GFLOP/s where tuned tiles reach 40-75 (measured 2026-11-26 on
a 2-core AMD EPYC). CLBlast's own tuners are separate programs that rebuild its database; instead
this module uses its documented run-time hook, ``OverrideParameters``, the way
``torch.backends.cudnn.benchmark`` picks convolution algorithms:

* ``ARRAYCORE_OPENCL_TUNE=1``: the first time a product shape ``(m, n, k, transposes, dtype)``
  runs, each candidate below is timed on it (the call's own operands; a few runs each) and the
  fastest is kept, for this process and in a JSON file per device (``ARRAYCORE_CACHE_DIR``, else
  ``~/.cache/arraycore``), so later processes reuse the choice without timing. The first step of
  a network therefore takes seconds to minutes longer (PoCL also compiles each candidate once).
* unset: the choices already on file for the device are used; shapes without one use the most
  chosen candidate on file, or CLBlast's database when there is no file.
* ``ARRAYCORE_OPENCL_TUNE=0``: CLBlast's database only.
* ``ARRAYCORE_OPENCL_TUNE_CANDIDATES=direct,cpu64,...``: time only these candidates (names of
  :data:`CANDIDATES` and :data:`GPU_DATABASE`; unset: all the device is offered). Tuning on a
  slow-compiling device (PoCL builds every candidate's kernels once) is that much shorter; the
  choices already on file are used whatever their candidate.

The database's own choice cannot be among the candidates (CLBlast has no call to read it, nor to
undo an override), so on a device CLBlast was tuned for (most GPUs) leave the variable unset.
Results differ between candidates in rounding only (the order of the k-sums); a run that tunes
may pick differently from the last one, as with cuDNN's benchmark mode.

The candidates: CLBlast's direct kernel (no padding or transposing copies, best for small
products), and indirect ``Xgemm`` tiles for CPUs (no local memory, 8-wide vectors, 16-64
work-items) and for GPUs (local-memory tiles, 64-256 work-items), and on GPU devices the sets
CLBlast's own database holds for recent NVIDIA and AMD parts (:data:`GPU_DATABASE`). A candidate
the device refuses (work-group too large, a CLBlast error) is dropped for the rest of the process.
A device without a file of its own here starts from the choices shipped for its model
(:data:`SHIPPED`), measured on the GPUs the project checks on.
"""

from __future__ import annotations

import json
import math
import os
import re
import threading
import time
from pathlib import Path
from typing import Any

ENV_TUNE = "ARRAYCORE_OPENCL_TUNE"
ENV_CACHE = "ARRAYCORE_CACHE_DIR"
ENV_CANDIDATES = "ARRAYCORE_OPENCL_TUNE_CANDIDATES"

#: CLBlast routes ``m * n * k < size**3`` to its direct kernel: 4096 sends every product there,
#: 1 none.
_DIRECT, _INDIRECT = 4096, 1


def _xgemm(mwg: int, nwg: int, mdimc: int, ndimc: int, vw: int, kwg: int, local: int) -> dict:
    """One ``Xgemm`` parameter set (square thread tiles for loading: MDIMA = MDIMC, NDIMB =
    NDIMC; ``local`` caches both operands' tiles in local memory)."""
    return {
        "GEMMK": 0, "KREG": 1, "KWG": kwg, "KWI": 2, "MDIMA": mdimc, "MDIMC": mdimc, "MWG": mwg,
        "NDIMB": ndimc, "NDIMC": ndimc, "NWG": nwg, "SA": local, "SB": local, "STRM": 0,
        "STRN": 0, "VWM": vw, "VWN": vw,
    }  # fmt: skip


#: name -> (XGEMM_MIN_INDIRECT_SIZE, Xgemm parameters or None to keep the database's).
CANDIDATES: dict[str, tuple[int, dict[str, int] | None]] = {
    "direct": (_DIRECT, None),
    "cpu128": (_INDIRECT, _xgemm(128, 128, 8, 8, 8, 16, 0)),
    "cpu64": (_INDIRECT, _xgemm(64, 64, 4, 4, 8, 16, 0)),
    "cpu32": (_INDIRECT, _xgemm(32, 32, 4, 4, 8, 16, 0)),  # small outputs, long k
    "cpu16x128": (_INDIRECT, _xgemm(16, 128, 2, 8, 8, 16, 0)),  # 16 rows (16 channels)
    "cpu16x32": (_INDIRECT, _xgemm(16, 32, 2, 4, 8, 16, 0)),
    "cpu32x128": (_INDIRECT, _xgemm(32, 128, 4, 8, 8, 16, 0)),
    "cpu128x32": (_INDIRECT, _xgemm(128, 32, 8, 4, 8, 16, 0)),
    "gpu64": (_INDIRECT, _xgemm(64, 64, 8, 8, 4, 16, 1)),
    "gpu128": (_INDIRECT, _xgemm(128, 128, 16, 16, 4, 16, 1)),
}

_FIELDS = ("GEMMK", "KREG", "KWG", "KWI", "MDIMA", "MDIMC", "MWG", "NDIMB", "NDIMC", "NWG", "SA",
           "SB", "STRM", "STRN", "VWM", "VWN")  # fmt: skip

#: CLBlast's own tuned ``Xgemm`` sets for GPUs of its database (``src/database/kernels/xgemm/
#: xgemm_32.hpp``, in its field order), offered on GPU devices only: the newest NVIDIA and AMD
#: entries the database has (NVIDIA's data-centre Pascal, its generation defaults, AMD's default
#: and Hawaii). It has none for Ampere, Hopper or RDNA: on those, measuring is the point.
GPU_DATABASE: dict[str, tuple[int, dict[str, int]]] = {
    name: (_INDIRECT, dict(zip(_FIELDS, values, strict=True)))
    for name, values in {
        "clblast-nvidia-p100": (0, 1, 32, 2, 8, 8, 32, 8, 8, 32, 1, 1, 0, 0, 4, 4),
        "clblast-nvidia-sm61": (0, 1, 32, 2, 16, 16, 64, 8, 8, 64, 1, 1, 0, 0, 4, 4),
        "clblast-nvidia-1080ti": (0, 1, 16, 2, 32, 16, 64, 16, 8, 128, 1, 1, 0, 1, 2, 8),
        "clblast-nvidia-default": (0, 1, 32, 2, 8, 8, 32, 32, 32, 64, 1, 1, 0, 0, 4, 2),
        "clblast-amd-hawaii": (0, 1, 16, 2, 16, 32, 128, 32, 8, 64, 1, 1, 1, 1, 4, 2),
    }.items()
}

#: Choices measured on devices of the project's checks, shipped with the package: a device
#: whose platform and name match one (any driver version) starts tuned. ``verify.py``'s
#: ``opencl-bench`` stage tunes on the GPU node into its report folder; the files from there go
#: here.
SHIPPED = Path(__file__).resolve().parent / "gemm_choices"

_PRECISION = {"float16": 16, "float32": 32, "float64": 64}


def _work_group(params: dict[str, int] | None) -> int:
    return 0 if params is None else params["MDIMC"] * params["NDIMC"]


class GemmTuner:
    """The candidate in force on one device and the choice per product shape."""

    def __init__(self, device: Any, mode: str | None = None) -> None:
        self.device = device
        mode = _mode() if mode is None else mode.strip()
        self.tune, self.off = mode == "1", mode == "0"
        self.name = f"{device.platform.name} {device.name} {device.driver_version}"
        #: the device's model, whatever its driver: what shipped choices are matched by
        self.model = f"{device.platform.name} {device.name}"
        limit = int(device.max_work_group_size)
        offered = dict(CANDIDATES)
        if int(device.type) & _gpu_type():
            offered.update(GPU_DATABASE)
        self.candidates = {n: c for n, c in offered.items() if _work_group(c[1]) <= limit}
        #: the candidates timed for a new shape (``ARRAYCORE_OPENCL_TUNE_CANDIDATES``)
        self.timed = _timed_names(offered) if self.tune else None
        self.path = cache_path(self.name)
        #: where the choices came from: this machine's file, the package's, or none
        self.source = "none"
        self.choices: dict[str, str] = {} if self.off else self._load()
        self.current: dict[int, str] = {}  # precision -> candidate in force
        self.routine: dict[int, int] = {}  # precision -> XGEMM_MIN_INDIRECT_SIZE in force
        self.timings: dict[str, dict[str, float]] = {}
        self._fallback: tuple[int, str | None] | None = None  # (choices counted, candidate)
        self._lock = threading.Lock()

    def _load(self) -> dict[str, str]:
        """This machine's choices for the device, else the package's for its model."""
        for path, source in ((self.path, "cache"), *((p, "shipped") for p in _shipped())):
            try:
                data = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            if not isinstance(data, dict):
                continue
            if source == "shipped" and data.get("model") != self.model:
                continue
            found = data.get("choices", {})
            self.source = f"{source} ({path.name})"
            return {k: v for k, v in found.items() if v in self.candidates}
        return {}

    def _save(self) -> None:
        """Write the choices atomically (a concurrent reader sees the old file or the new)."""
        data = {
            "device": self.name,
            "model": self.model,
            "choices": dict(sorted(self.choices.items())),
        }
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(data, indent=1) + "\n")
            os.replace(tmp, self.path)
        except OSError:
            pass  # a read-only cache costs the next process its timing, nothing else

    def _apply(self, name: str, precision: int) -> bool:
        """Put candidate ``name`` in force (False, and the candidate dropped, if refused)."""
        if self.current.get(precision) == name:
            return True
        import pyclblast

        size, params = self.candidates[name]
        # each override costs about 0.35 ms on PoCL (CLBlast drops its compiled programs), so
        # the routine's size is set only when it changes (every indirect candidate shares one)
        try:
            if params is not None:
                pyclblast.override_parameters(self.device, "Xgemm", precision, params)
            if self.routine.get(precision) != size:
                self.routine.pop(precision, None)
                routine = {"XGEMM_MIN_INDIRECT_SIZE": size}
                pyclblast.override_parameters(self.device, "GemmRoutine", precision, routine)
                self.routine[precision] = size
        except RuntimeError:  # CLBlast refuses the set: never offer it again
            del self.candidates[name]
            self.current.pop(precision, None)
            return False
        self.current[precision] = name
        return True

    def fallback(self) -> str | None:
        """The candidate for a shape without a choice: the one chosen most, if any (the
        earliest such in :data:`CANDIDATES` on a tie)."""
        names = list(self.choices.values())
        counted = [n for n in self.candidates if n in names]
        return max(counted, key=names.count) if counted else None

    def run(self, key: str, dtype: str, call: Any, sync: Any) -> None:
        """``call()`` (one GEMM) under the candidate chosen for ``key``, timing them first when
        tuning and ``key`` is new."""
        precision = _PRECISION.get(dtype)
        if self.off or precision is None:
            call()
            return
        with self._lock:
            name = self.choices.get(key)
            if name is None and self.tune:
                name = self._measure(key, precision, call, sync)
                if name is not None:
                    return  # the output holds the last timed run's product
            if name is None:
                if self._fallback is None or self._fallback[0] != len(self.choices):
                    self._fallback = (len(self.choices), self.fallback())
                name = self._fallback[1]
            if name is not None and not self._apply(name, precision):
                self.choices.pop(key, None)
            call()

    def _measure(self, key: str, precision: int, call: Any, sync: Any) -> str | None:
        times: dict[str, float] = {}
        for name in list(self.candidates) if self.timed is None else self.timed:
            if name not in self.candidates or not self._apply(name, precision):
                continue
            try:
                call()  # builds the kernels (PoCL: seconds, once per candidate per device)
                sync()
                best = math.inf
                for _ in range(2):
                    start = time.perf_counter()
                    call()
                    sync()
                    best = min(best, time.perf_counter() - start)
            except (RuntimeError, _cl_error()):  # e.g. out of local memory at launch
                del self.candidates[name]
                self.current.pop(precision, None)
                continue
            times[name] = best
        if not times:
            return None
        name = min(times, key=times.__getitem__)
        self.timings[key] = times
        self.choices[key] = name
        self._save()
        self._apply(name, precision)
        call()
        return name


def describe() -> str:
    """What ``arraycore info`` says about GEMM tuning in this environment."""
    mode, folder = _mode(), cache_dir()
    if mode == "0":
        return f"GEMM parameters: CLBlast's database ({ENV_TUNE}=0)"
    files = sorted(folder.glob("*.json")) if folder.is_dir() else []
    what = "new shapes timed" if mode == "1" else f"set {ENV_TUNE}=1 to time new shapes"
    return (
        f"GEMM parameters: {len(files)} device file(s) of choices in {folder}, "
        f"{len(_shipped())} shipped for the devices of the project's checks ({what})"
    )


def _shipped() -> list[Path]:
    return sorted(SHIPPED.glob("*.json")) if SHIPPED.is_dir() else []


def _timed_names(offered: dict[str, Any]) -> list[str] | None:
    """The names ``ARRAYCORE_OPENCL_TUNE_CANDIDATES`` lists, checked (None: unset, time all)."""
    names = [n.strip() for n in os.environ.get(ENV_CANDIDATES, "").split(",") if n.strip()]
    if not names:
        return None
    unknown = [n for n in names if n not in CANDIDATES and n not in GPU_DATABASE]
    if unknown:
        raise ValueError(
            f"{ENV_CANDIDATES}: no GEMM candidate named {', '.join(map(repr, unknown))}; "
            f"the candidates are {', '.join(CANDIDATES)} (and on GPUs {', '.join(GPU_DATABASE)})"
        )
    # a GPU set named on a CPU device is simply not offered there
    return [n for n in names if n in offered]


def _gpu_type() -> int:
    import pyopencl

    return int(pyopencl.device_type.GPU)


def _cl_error() -> type[Exception]:
    import pyopencl

    error: type[Exception] = pyopencl.Error
    return error


def shape_key(dtype: str, m: int, n: int, k: int, at: bool, bt: bool, batch: int = 1) -> str:
    """The choice's key: one product shape (``batch`` > 1 for a strided batch)."""
    t = ("t" if at else "n") + ("t" if bt else "n")
    return f"{dtype} {batch}x{m}x{n}x{k} {t}"


def _mode() -> str:
    """``ARRAYCORE_OPENCL_TUNE`` as set: ``"1"`` (time new shapes), ``"0"`` (off) or other."""
    return os.environ.get(ENV_TUNE, "").strip()


def cache_dir() -> Path:
    """Where the choices' files are: ``$ARRAYCORE_CACHE_DIR`` or ``~/.cache/arraycore``, then
    ``opencl-gemm``."""
    root = os.environ.get(ENV_CACHE) or os.path.join(os.path.expanduser("~"), ".cache", "arraycore")
    return Path(root) / "opencl-gemm"


def cache_path(device_name: str) -> Path:
    """The choices' file for a device (its name made a file name)."""
    slug = re.sub(r"[^A-Za-z0-9.]+", "-", device_name).strip("-")[:120]
    return cache_dir() / f"{slug}.json"
