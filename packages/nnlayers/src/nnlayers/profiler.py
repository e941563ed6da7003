"""Where a step's time goes: the time of every op of the compiled graphs, forward and backward.

>>> import nnlayers
>>> with nnlayers.profile() as prof:  # doctest: +SKIP
...     for batch in batches:
...         model.train_step(batch)
>>> print(prof.table())  # doctest: +SKIP

Inside the ``with`` block every graph runs plans compiled for the profile (kept apart from its
own, which are left as they were): each op's forward and backward is a timed call. On devices
whose kernels run after their calls return (CUDA, OpenCL) the profile waits for the device
before and after each op (``sync=True``, the default), so a row is the op's host and device time
together and nothing overlaps; ``sync=False`` times the host's part alone, which is what a step
bound by Python and launch overhead spends. On the NumPy backend both are the same.

The table groups rows by op (``by="op"``) or lists each node of the graph (``by="node"``); an
optimiser's ``step()`` is a row of its own (op ``optimizer``, phase ``update``). The time
outside them (feeding, the plan's own code, the first call's compilation) is the wall time of
the block less theirs. Timing each op adds a few
microseconds per call, so profile for the shares, and time steps without it.

Memory: on a backend that counts its arrays' bytes (``memory_stats()``: OpenCL, CUDA) the
profile starts the backend's peak anew when the block begins (``reset_memory_stats()``), and
:meth:`Profile.memory` (and the table's ``memory`` line) gives the peak reached in the block
beside the planned peak of the plans that ran (:mod:`nnlayers.graph.memory`: the step's
activations, residuals and gradients, worked out from each plan when asked, plus the
parameters and inputs it reads). The measured figure also holds what no plan makes: the
optimiser's state and scratch, kernels' workspaces (a convolution's im2col columns), feeds
copied to the device, and any other array alive meanwhile.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .graph.memory import MemoryPlan

__all__ = ["Profile", "ProfileMemory", "ProfileRow", "profile"]

_ACTIVE = threading.local()


@dataclass
class ProfileRow:
    """One op node's (or one op kind's) time in one phase."""

    op: str
    phase: str  # "forward" or "backward"
    node: str  # the node's label (op, the user's name, output shape), or "" for a kind's row
    calls: int = 0
    seconds: float = 0.0

    @property
    def mean_us(self) -> float:
        """Microseconds per call."""
        return 1e6 * self.seconds / self.calls if self.calls else 0.0


@dataclass(frozen=True)
class ProfileMemory:
    """The memory of a profiled block (:meth:`Profile.memory`): the backend's measured peak
    beside the planned step peak of each plan that ran."""

    measured_peak_bytes: int | None
    """The most bytes the backend's arrays held at once in the block (everything on the
    device); ``None`` on a backend that does not count them (NumPy)."""
    start_bytes: int | None
    """Bytes live when the block began (parameters, optimiser state, the last gradients,
    data already there)."""
    plans: tuple[tuple[str, MemoryPlan], ...]
    """Each plan that ran in the block (``"training step, feeds 32x8, 32"``) and its planned
    step (:class:`~nnlayers.graph.memory.MemoryPlan`)."""
    backend: str = ""
    """The backend whose memory was measured."""

    @property
    def planned_peak_bytes(self) -> int | None:
        """The largest planned step peak of :attr:`plans` (the step's own arrays: parameters
        and inputs excluded)."""
        return max((p.peak_bytes for _, p in self.plans), default=None)

    @property
    def planned_total_bytes(self) -> int | None:
        """The largest planned peak with the parameters and inputs the plan reads
        (:attr:`~nnlayers.graph.memory.MemoryPlan.total_peak_bytes`): what
        :attr:`measured_peak_bytes` compares with."""
        return max((p.total_peak_bytes for _, p in self.plans), default=None)

    @property
    def ratio(self) -> float | None:
        """``measured_peak_bytes / planned_total_bytes``, where both are known."""
        measured, planned = self.measured_peak_bytes, self.planned_total_bytes
        if measured is None or not planned:
            return None
        return measured / planned


class Profile:
    """The op times collected by :func:`profile` (see the module docstring)."""

    def __init__(self, sync: bool = True) -> None:
        self.sync = sync
        self.wall_seconds = 0.0
        self._rows: dict[tuple[int, int, str], ProfileRow] = {}
        self._plans: dict[int, Any] = {}  # id(graph) -> (graph, its plans for this profile)
        self._began: float | None = None
        self._info: Any = None  # the backend's __array_namespace_info__() where it counts bytes
        self._backend = ""
        self._start_bytes: int | None = None
        self._peak_bytes: int | None = None
        self._ran: list[tuple[str, Any, bool]] = []  # (label, plan, training step) once ended

    # -- what the graph calls ------------------------------------------------------------------
    def plans_for(self, graph: Any) -> dict[tuple[Any, ...], Any]:
        """The plan cache of ``graph`` while this profile is active (apart from its own)."""
        found = self._plans.get(id(graph))
        if found is None or found[0] is not graph:
            found = self._plans[id(graph)] = (graph, {})
        plans: dict[tuple[Any, ...], Any] = found[1]
        return plans

    def wrap(
        self,
        fn: Callable[..., Any],
        graph_id: int,
        index: int,
        op: str,
        label: str,
        phase: str,
        xp: Any,
    ) -> Callable[..., Any]:
        """``fn`` (a step of a plan) timed into the row of node ``index`` of ``graph_id``."""
        key = (graph_id, index, phase)
        row = self._rows.get(key)
        if row is None:
            row = self._rows[key] = ProfileRow(op, phase, label)
        clock = time.perf_counter
        if not self.sync:

            def timed(*args: Any) -> Any:
                began = clock()
                result = fn(*args)
                row.seconds += clock() - began
                row.calls += 1
                return result

            return timed
        wait = xp.__array_namespace_info__().synchronize

        def timed_synced(*args: Any) -> Any:
            wait()
            began = clock()
            result = fn(*args)
            wait()
            row.seconds += clock() - began
            row.calls += 1
            return result

        return timed_synced

    # -- memory ----------------------------------------------------------------------------------
    def _start_memory(self) -> None:
        """Start the backend's peak anew, where it counts its arrays' bytes."""
        import arraycore

        try:
            xp = arraycore.namespace()
            info = xp.__array_namespace_info__()
            stats = info.memory_stats()
        except arraycore.BackendError:
            return
        self._backend = xp.name
        if stats is None or "peak_bytes" not in stats:
            return
        info.reset_memory_stats()
        self._info = info
        self._start_bytes = int(stats["used_bytes"])

    def _measured_peak(self) -> int | None:
        if self._info is None:
            return None
        if self._began is None:  # ended: the figure read then
            return self._peak_bytes
        return int(self._info.memory_stats()["peak_bytes"])

    def _end_memory(self) -> None:
        """Read the peak, and note the plans that ran (their memory is planned when asked)."""
        if self._info is not None:
            self._peak_bytes = int(self._info.memory_stats()["peak_bytes"])
        self._ran = self._plans_ran()

    def _plans_ran(self) -> list[tuple[str, Any, bool]]:
        """``(label, plan, whether it ran a training step)`` for each plan of this profile
        that ran (a generated function runs compiled once called: no per-step bookkeeping)."""
        from .graph.plan import _FirstCall

        ran = []
        for _graph, plans in self._plans.values():
            for key, plan in plans.items():
                trained = not isinstance(plan._backward, _FirstCall)
                if not trained and isinstance(plan._forward_eval, _FirstCall):
                    if isinstance(plan._forward_train, _FirstCall):
                        continue  # made, never run
                    trained = True  # forward kept values for a backward pass
                step = "training step" if trained else "evaluation step"
                feeds = ", ".join("x".join(map(str, shape)) or "scalar" for shape in key)
                ran.append((f"{step}, feeds {feeds or 'none'}", plan, trained))
        return ran

    def memory(self) -> ProfileMemory:
        """The backend's measured peak in the block beside each plan's planned step peak (see
        the module docstring); the plans' figures are worked out now, from the plans."""
        ran = self._plans_ran() if self._began is not None else self._ran
        plans = tuple((label, plan.memory_plan(trained)) for label, plan, trained in ran)
        return ProfileMemory(self._measured_peak(), self._start_bytes, plans, self._backend)

    def _memory_line(self) -> str | None:
        """The table's memory line, or None where no plan ran."""
        from .graph.memory import format_bytes

        found = self.memory()
        if not found.plans:
            return None
        label, plan = max(found.plans, key=lambda item: item[1].total_peak_bytes)
        kinds = plan.peak_by_kind
        parts = f"activations {format_bytes(kinds['activation'] + kinds['temporary'])}, "
        parts += f"residuals {format_bytes(kinds['residual'])}"
        if plan.train:
            parts += f", gradients {format_bytes(kinds['gradient'])}"
        planned = (
            f"planned {format_bytes(plan.total_peak_bytes)} = step peak "
            f"{format_bytes(plan.peak_bytes)} ({label}: {parts}) + parameters "
            f"{format_bytes(plan.parameter_bytes)} + inputs {format_bytes(plan.input_bytes)}"
        )
        if plan.unknown_residuals:
            planned += f", {len(plan.unknown_residuals)} residual(s) of unknown size not counted"
        if found.measured_peak_bytes is None or found.start_bytes is None:
            backend = f"the {found.backend} backend" if found.backend else "the backend"
            return f"memory: {planned}; {backend} does not count its memory"
        ratio = found.ratio
        times = f"{ratio:.2f}x the " if ratio is not None else ""
        return (
            f"memory: measured peak {format_bytes(found.measured_peak_bytes)} ("
            f"{format_bytes(found.start_bytes)} live at the start), {times}{planned}"
        )

    # -- results ---------------------------------------------------------------------------------
    def rows(self, by: str = "op") -> list[ProfileRow]:
        """Rows by op kind and phase (``by="op"``) or one per node and phase (``by="node"``),
        the longest first."""
        if by not in ("op", "node"):
            raise ValueError(f"profile: by must be 'op' or 'node', got {by!r}")
        if by == "node":
            rows = [r for r in self._rows.values() if r.calls]
        else:
            kinds: dict[tuple[str, str], ProfileRow] = {}
            for r in self._rows.values():
                if not r.calls:
                    continue
                kind = kinds.setdefault((r.op, r.phase), ProfileRow(r.op, r.phase, ""))
                kind.calls += r.calls
                kind.seconds += r.seconds
            rows = list(kinds.values())
        return sorted(rows, key=lambda r: -r.seconds)

    @property
    def op_seconds(self) -> float:
        """Seconds inside the ops, forward and backward."""
        return sum(r.seconds for r in self._rows.values())

    def table(self, by: str = "op", top: int | None = 25) -> str:
        """A text table of :meth:`rows` (the ``top`` longest), with each row's share of the
        block's wall time and a last row for the time outside the ops."""
        wall = self.wall_seconds if self._began is None else time.perf_counter() - self._began
        rows = self.rows(by)
        shown = rows if top is None else rows[:top]
        name_width = max([len("op"), *(len(r.node if by == "node" else r.op) for r in shown)])
        head = f"{'op':<{name_width}}  {'phase':<8}  {'calls':>7}  {'total ms':>10}  "
        head += f"{'mean us':>9}  {'share':>6}"
        lines = [head, "-" * len(head)]
        for r in shown:
            name = r.node if by == "node" else r.op
            share = r.seconds / wall if wall > 0 else 0.0
            lines.append(
                f"{name:<{name_width}}  {r.phase:<8}  {r.calls:>7}  {1e3 * r.seconds:>10.3f}  "
                f"{r.mean_us:>9.1f}  {share:>6.1%}"
            )
        if len(rows) > len(shown):
            rest = sum(r.seconds for r in rows[len(shown) :])
            share = rest / wall if wall > 0 else 0.0
            lines.append(
                f"{f'({len(rows) - len(shown)} more)':<{name_width}}  {'':<8}  {'':>7}  "
                f"{1e3 * rest:>10.3f}  {'':>9}  {share:>6.1%}"
            )
        outside = max(wall - self.op_seconds, 0.0)
        share = outside / wall if wall > 0 else 0.0
        lines.append(
            f"{'outside the ops':<{name_width}}  {'':<8}  {'':>7}  {1e3 * outside:>10.3f}  "
            f"{'':>9}  {share:>6.1%}"
        )
        memory = self._memory_line()
        if memory is not None:
            lines.append(memory)
        mode = "device waited for around each op" if self.sync else "host time only"
        lines.append(f"wall {1e3 * wall:.3f} ms ({mode})")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (
            f"<Profile {len(self._rows)} rows, {1e3 * self.op_seconds:.3f} ms in ops of "
            f"{1e3 * self.wall_seconds:.3f} ms>"
        )


def active() -> Profile | None:
    """The profile collecting in this thread, if any."""
    found: Profile | None = getattr(_ACTIVE, "profile", None)
    return found


@contextmanager
def profile(*, sync: bool = True, memory: bool = True) -> Iterator[Profile]:
    """Time every op that compiled graphs run in this thread inside the block (see the module
    docstring). ``sync``: wait for the device around each op (its device time counted; the
    default), or time the host's calls alone. ``memory``: measure the block's peak memory where
    the backend counts it, starting its peak anew (``reset_memory_stats()``; on CUDA that hands
    the pool's cached blocks back to the driver, so the block's first step allocates afresh:
    ``memory=False`` times a warm pool, and reports the planned peak alone)."""
    if active() is not None:
        raise RuntimeError("profile: a profile is already collecting in this thread")
    prof = Profile(sync=sync)
    if memory:
        prof._start_memory()
    _ACTIVE.profile = prof
    prof._began = time.perf_counter()
    try:
        yield prof
    finally:
        prof.wall_seconds = time.perf_counter() - prof._began
        _ACTIVE.profile = None
        prof._end_memory()
        prof._began = None
        prof._plans.clear()
