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
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

__all__ = ["Profile", "ProfileRow", "profile"]

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


class Profile:
    """The op times collected by :func:`profile` (see the module docstring)."""

    def __init__(self, sync: bool = True) -> None:
        self.sync = sync
        self.wall_seconds = 0.0
        self._rows: dict[tuple[int, int, str], ProfileRow] = {}
        self._plans: dict[int, Any] = {}  # id(graph) -> (graph, its plans for this profile)
        self._began: float | None = None

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
def profile(*, sync: bool = True) -> Iterator[Profile]:
    """Time every op that compiled graphs run in this thread inside the block (see the module
    docstring). ``sync``: wait for the device around each op (its device time counted; the
    default), or time the host's calls alone."""
    if active() is not None:
        raise RuntimeError("profile: a profile is already collecting in this thread")
    prof = Profile(sync=sync)
    _ACTIVE.profile = prof
    prof._began = time.perf_counter()
    try:
        yield prof
    finally:
        prof.wall_seconds = time.perf_counter() - prof._began
        prof._began = None
        _ACTIVE.profile = None
        prof._plans.clear()
