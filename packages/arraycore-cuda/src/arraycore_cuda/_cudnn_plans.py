"""Building, autotuning, caching and running cudnn-frontend plans (the :class:`PlanCache` that
:class:`arraycore_cuda._cudnn.Cudnn` inherits): one plan per key, built once, timed once."""

from __future__ import annotations

import inspect
import logging
import threading
from dataclasses import dataclass, field
from typing import Any

_LOG = logging.getLogger("arraycore_cuda._cudnn")
_TIMING_WARMUP = 1
_TIMING_RUNS = 3
#: Run plans through ``graph.execute(buffers, ..., tensor_uids=)`` with the winner pinned by
#: ``select_plan`` where the frontend has both (1.32's Python graph): its cached ordered binding
#: skips what ``execute_plan_at_index`` redoes on every call (the plan list walked for the
#: deselected numeric notes, the variant pack rebuilt from a uid map). False: always by index.
ORDERED_EXECUTE = True


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


@dataclass
class _Plan:
    """One built graph: its tensor handles by role, the plan index run, its workspace bytes."""

    graph: Any
    tensors: dict[str, Any]
    index: int
    workspace: int
    name: str
    candidates: int
    timings_ms: dict[int, float] = field(default_factory=dict)
    #: uid of each role's tensor where the ordered execute is usable (set on first run), else
    #: None (not decided yet) or False (the frontend has no ordered execute, or it failed)
    uids: dict[str, int] | bool | None = None


class PlanCache:
    """Plans by key for one device; the subclass builds graphs (``_new_graph``, ``make``)."""

    _cudnn: Any
    _cp: Any
    _device: int
    _handle: Any
    disabled_reason: str | None
    _cache: dict[tuple[Any, ...], _Plan | str]
    _lock: threading.Lock
    _autotune: bool
    _tf32: bool

    def _new_graph(self, io: Any) -> Any:
        raise NotImplementedError

    def _cudnn_dtype(self, name: str) -> Any:
        raise NotImplementedError

    def _ensure_handle(self) -> bool:
        if self._handle is not None:
            return True
        if self.disabled_reason is not None:
            return False
        try:
            with self._cp.cuda.Device(self._device):
                self._handle = self._cudnn.create_handle()
        except Exception as exc:  # libcudnn missing at first use, driver trouble, ...
            self.disabled_reason = (
                f"creating a cuDNN handle on device {self._device} failed: {_one_line(exc)}"
            )
            _LOG.warning("cuDNN disabled on device %d: %s", self._device, self.disabled_reason)
            return False
        return True

    def _plan(self, key: tuple[Any, ...], make: Any) -> _Plan | None:
        entry = self._cache.get(key)
        if isinstance(entry, _Plan):
            return entry
        if entry is not None:
            return None  # rejected before
        with self._lock:
            entry = self._cache.get(key)
            if entry is None:
                if not self._ensure_handle():
                    return None
                entry = self._build(key, make)
                self._cache[key] = entry
        return entry if isinstance(entry, _Plan) else None

    def _build(self, key: tuple[Any, ...], make: Any) -> _Plan | str:
        cd, cp = self._cudnn, self._cp
        try:
            with cp.cuda.Device(self._device):
                g = self._new_graph(self._cudnn_dtype(str(key[1])))
                tensors = make(g)
                if str(key[1]) == "float32" and str(key[0]).startswith("conv") and not self._tf32:
                    # float32 must stay float32 (CuPy's cuBLAS fallback does not use TF32):
                    # no TF32 tensor-core engines, no engines that down-convert inputs.
                    note = cd.numerical_note
                    g.deselect_numeric_notes([note.TENSOR_CORE, note.DOWN_CONVERT_INPUTS])
                g.validate()
                g.build_operation_graph()
                g.create_execution_plans([cd.heur_mode.A, cd.heur_mode.FALLBACK])
                g.check_support()
                count = int(g.get_execution_plan_count())
                built: list[int] = []
                for index in range(count):
                    try:
                        g.build_plan_at_index(index)
                    except (cd.cudnnGraphNotSupportedError, NotImplementedError, ImportError):
                        continue
                    except Exception as exc:  # one engine's failure does not sink the others
                        _LOG.debug("cuDNN plan %d of %s failed to build: %s", index, key, exc)
                        continue
                    built.append(index)
                    if not self._autotune:
                        break
                if not built:
                    return f"no plan among {count} builds"
                plan = _Plan(g, tensors, built[0], 0, "", count)
                if self._autotune and len(built) > 1:
                    self._tune(plan, built, key)
                g.build_plan_at_index(plan.index)  # select the winner (already built)
                plan.workspace = int(g.get_workspace_size_plan_at_index(plan.index))
                try:
                    plan.name = str(g.get_plan_name_at_index(plan.index))
                except Exception:
                    plan.name = "?"
                return plan
        except Exception as exc:  # cudnnGraphNotSupportedError and any other decline
            reason = _one_line(exc)
            _LOG.info("cuDNN declined %s: %s", key, reason)
            return reason

    def _scratch(self, plan: _Plan) -> dict[str, Any]:
        """Arrays of the right shapes and dtypes for every tensor of ``plan`` (from the pool)."""
        cp = self._cp
        names = {"FLOAT": cp.float32, "HALF": cp.float16, "DOUBLE": cp.float64}
        out: dict[str, Any] = {}
        for role, t in plan.tensors.items():
            shape = tuple(int(s) for s in t.dim)
            dtype_name = getattr(t.data_type, "name", "FLOAT")
            if dtype_name == "BFLOAT16":
                out[role] = cp.zeros(shape, dtype=cp.uint16)  # same bytes, no bfloat16 needed
            else:
                out[role] = cp.zeros(shape, dtype=names.get(dtype_name, cp.float32))
            if role in ("inv_var", "scale"):
                out[role].fill(1)  # finite statistics for the batch-norm backward timing
        return out

    def _tune(self, plan: _Plan, built: list[int], key: tuple[Any, ...]) -> None:
        """Time every built plan on scratch arrays (setup: synchronising is fine here)."""
        cp = self._cp
        arrays = self._scratch(plan)
        pack = {plan.tensors[role]: int(a.data.ptr) for role, a in arrays.items()}
        stream = cp.cuda.get_current_stream()
        self._cudnn.set_stream(handle=self._handle, stream=int(stream.ptr))
        best: tuple[float, int] | None = None
        for index in built:
            try:
                size = int(plan.graph.get_workspace_size_plan_at_index(index))
                ws = cp.empty(max(size, 1), dtype=cp.uint8)
                run = lambda index=index, ws=ws: plan.graph.execute_plan_at_index(
                    pack, int(ws.data.ptr), index=index, handle=self._handle
                )
                for _ in range(_TIMING_WARMUP):
                    run()
                start, stop = cp.cuda.Event(), cp.cuda.Event()
                start.record(stream)
                for _ in range(_TIMING_RUNS):
                    run()
                stop.record(stream)
                stop.synchronize()
                ms = float(cp.cuda.get_elapsed_time(start, stop)) / _TIMING_RUNS
            except Exception as exc:
                _LOG.debug("cuDNN plan %d of %s failed to run: %s", index, key, exc)
                continue
            plan.timings_ms[index] = ms
            if best is None or ms < best[0]:
                best = (ms, index)
        if best is not None:
            plan.index = best[1]

    def _ordered_uids(self, plan: _Plan) -> dict[str, int] | bool:
        """Pin ``plan.index`` on its graph and read each role's tensor uid, once; False where
        the frontend lacks ``select_plan`` or ``execute(..., tensor_uids=)``."""
        if plan.uids is None:
            plan.uids = False
            g = plan.graph
            try:
                takes_uids = "tensor_uids" in inspect.signature(g.execute).parameters
            except (TypeError, ValueError):  # a pybind method without a Python signature
                takes_uids = False
            uids = {role: getattr(t, "uid", None) for role, t in plan.tensors.items()}
            if (
                takes_uids
                and hasattr(g, "select_plan")
                and all(isinstance(u, int) for u in uids.values())
            ):
                try:
                    g.select_plan(plan.index)
                    g.build_plans()  # the pinned plan (built already): execute() builds nothing
                except Exception as exc:
                    _LOG.info("cuDNN select_plan(%d) refused: %s", plan.index, _one_line(exc))
                else:
                    plan.uids = uids  # type: ignore[assignment]
        return plan.uids if plan.uids is not None else False

    def _run(self, plan: _Plan, arrays: dict[str, Any]) -> bool:
        """Execute ``plan`` on CuPy's current stream; no host synchronisation."""
        cp = self._cp
        try:
            ws = cp.empty(max(plan.workspace, 1), dtype=cp.uint8)
            self._cudnn.set_stream(
                handle=self._handle, stream=int(cp.cuda.get_current_stream().ptr)
            )
            uids = self._ordered_uids(plan) if ORDERED_EXECUTE else False
            if uids:
                try:
                    plan.graph.execute(
                        tuple(int(a.data.ptr) for a in arrays.values()),
                        int(ws.data.ptr),
                        handle=self._handle,
                        tensor_uids=tuple(uids[role] for role in arrays),  # type: ignore[index]
                    )
                    return True
                except Exception as exc:  # by index from now on
                    _LOG.warning(
                        "cuDNN ordered execute failed (%s); running plans by index",
                        _one_line(exc),
                    )
                    plan.uids = False
            pack = {plan.tensors[role]: int(a.data.ptr) for role, a in arrays.items()}
            plan.graph.execute_plan_at_index(
                pack, int(ws.data.ptr), index=plan.index, handle=self._handle
            )
        except Exception as exc:
            _LOG.warning("cuDNN execute failed (%s); falling back", _one_line(exc))
            return False
        return True
