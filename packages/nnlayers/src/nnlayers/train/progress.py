"""The progress bar ``fit`` shows: examples done, throughput, and the running metrics.

The bar itself is tqdm's. The metrics it shows live on the device until the bar is due to
redraw (every ``refresh`` seconds): only then do they come to the host, in one transfer.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from typing import Any, TextIO


def format_metrics(metrics: Mapping[str, float]) -> str:
    """``loss=0.1234 accuracy=0.9612`` (times and throughputs left out)."""
    skip = ("epoch", "time", "examples_per_second")
    return " ".join(f"{k}={v:.4g}" for k, v in metrics.items() if k not in skip)


_BAR = "{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}{postfix}]"
_COUNTER = "{desc}: {n_fmt} ex [{elapsed}{postfix}]"


def format_rate(rate: float) -> str:
    """``850``, ``12.3k``, ``1.05M``: three significant digits."""
    for scale, suffix in ((1e6, "M"), (1e3, "k")):
        if rate >= scale:
            return f"{rate / scale:.3g}{suffix}"
    return f"{rate:.3g}"


class Progress:
    """One epoch's bar: ``update(n)`` after each batch, ``due()`` says when to ``show`` metrics.

    ``refresh`` is the time between metric updates: by default 0.5 s on a terminal and 30 s
    when the output goes to a file or a CI log.

    Without tqdm installed, or with ``enabled=False``, it prints one line per epoch at most.
    """

    def __init__(
        self,
        epoch: int,
        epochs: int,
        total: int | None,
        *,
        enabled: bool = True,
        refresh: float | None = None,
        file: TextIO | None = None,
    ) -> None:
        self.enabled = enabled
        self.file = file if file is not None else sys.stderr
        if refresh is None:
            # A terminal redraws in place; a log file (CI) gets a line per redraw, so fewer.
            isatty = getattr(self.file, "isatty", None)
            refresh = 0.5 if isatty is not None and isatty() else 30.0
        self.refresh = refresh
        self.label = f"epoch {epoch}/{epochs}"
        self._start = time.monotonic()
        self._next = self._start + refresh
        self._done = 0
        self._bar: Any = None
        if enabled:
            try:
                from tqdm.auto import tqdm
            except ImportError:  # pragma: no cover - tqdm is a dependency; this is a courtesy
                tqdm = None
            if tqdm is not None:
                self._bar = tqdm(
                    total=total,
                    desc=self.label,
                    unit="ex",
                    bar_format=_BAR if total else _COUNTER,
                    leave=True,
                    dynamic_ncols=True,
                    file=self.file,
                    mininterval=min(refresh, 0.1) if refresh < 1 else refresh,
                )

    def update(self, n: int) -> None:
        """``n`` more examples done."""
        self._done += n
        if self._bar is not None:
            self._bar.update(n)

    def due(self) -> bool:
        """Whether the shown metrics are stale (checked after every batch; cheap)."""
        if self._bar is None:
            return False
        now = time.monotonic()
        if now < self._next:
            return False
        self._next = now + self.refresh
        return True

    def show(self, metrics: Mapping[str, float]) -> None:
        """Put ``metrics`` beside the bar."""
        if self._bar is not None:
            self._bar.set_postfix_str(self._postfix(metrics), refresh=False)

    def _postfix(self, metrics: Mapping[str, float]) -> str:
        seconds = time.monotonic() - self._start
        rate = metrics.get("examples_per_second") or (self._done / seconds if seconds else 0.0)
        return f"{format_rate(rate)} ex/s, {format_metrics(metrics)}"

    def close(self, metrics: Mapping[str, float]) -> None:
        """End the epoch's bar with its final metrics (validation included)."""
        if self._bar is not None:
            self._bar.set_postfix_str(self._postfix(metrics), refresh=False)
            self._bar.close()
        elif self.enabled:
            rate = metrics.get("examples_per_second", float("nan"))
            print(f"{self.label}: {format_metrics(metrics)} ({rate:,.0f} ex/s)", file=self.file)
