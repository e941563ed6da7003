"""Callbacks that log the metrics: :class:`CSVLogger` (one row per epoch) and
:class:`TensorBoard` (event files, through ``tensorboardX``).
"""

from __future__ import annotations

import csv
import importlib
import io
import math
import numbers
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .._atomic import atomic_write, check_target, fault, reason
from ..distributed.context import is_main_rank
from .callbacks import BatchLogs, Callback


class CSVLogger(Callback):
    """Write one row per epoch to the CSV file ``path``: ``epoch`` and every metric of the
    epoch's record (the history's), in the order they first appear.

    - Values are written exactly (``repr`` of the float, so a row reads back equal to the
      history: ``nan`` and ``inf`` included); a metric an epoch lacks is left empty.
    - Each row is one write, flushed and synced to disk when the epoch ends, so a crash loses
      at most the epoch it interrupts. When a new metric appears (``lr`` from a callback added
      later, a device's ``peak_device_mb``) the file is rewritten with the wider header,
      atomically: the old file or the new one, never half of one.
    - ``append=False`` starts the file afresh at the first epoch of each ``fit``.
      ``append=True`` keeps the rows of an earlier run before this run's first epoch (a resumed
      run: rows of epochs it trains again, written after its checkpoint, are replaced, and a
      row cut short by a crash is dropped), and appends to a file whose header matches.

    >>> CSVLogger("training.csv", append=True)
    CSVLogger('training.csv', append=True)
    """

    def __init__(self, path: str | Path, append: bool = False, *, separator: str = ",") -> None:
        if not os.fspath(path).strip():
            raise ValueError(
                f"CSVLogger: path {os.fspath(path)!r} is empty: name a file, such as 'training.csv'"
            )
        if len(separator) != 1:
            raise ValueError(f"CSVLogger: separator must be one character, got {separator!r}")
        self.path = Path(path)
        self.append = append
        self.separator = separator
        #: The header of the file: ``epoch``, then the metrics in the order they appeared.
        self.columns: list[str] = []
        self._rows: list[dict[str, str]] = []
        self._first = True

    def on_train_begin(self) -> None:
        if is_main_rank():  # in a data-parallel run, rank 0 alone writes the log
            check_target(self.path, "CSV log")
        self._first = True

    def on_epoch_end(self, epoch: int, logs: Mapping[str, float]) -> None:
        if not is_main_rank():
            return
        record = {"epoch": epoch, **logs}
        rewrite = False
        if self._first:
            self._first = False
            self.columns, self._rows, intact = [], [], False
            if self.append and self.path.is_file():
                self.columns, self._rows, intact = self._read(epoch)
            rewrite = not intact
        new = [k for k in record if k not in self.columns]
        if new:
            self.columns += new
            rewrite = True
        row = {k: _format(v) for k, v in record.items()}
        self._rows.append(row)
        if rewrite:
            with atomic_write(self.path, label="CSV log") as out:
                out.write(self._text([self.columns, *map(self._cells, self._rows)]).encode())
            return
        try:
            with self.path.open("a", encoding="utf-8", newline="") as f:
                f.write(self._text([self._cells(row)]))
                f.flush()
                os.fsync(f.fileno())
        except OSError as exc:  # the user's path and the OS's reason, as atomic writes say
            raise fault(
                exc,
                self.path,
                f"CSV log {self.path}: cannot append epoch {epoch}: "
                f"{reason(exc, self.path.parent)}",
            ) from exc

    def _cells(self, row: Mapping[str, str]) -> list[str]:
        return [row.get(c, "") for c in self.columns]

    def _text(self, rows: list[list[str]]) -> str:
        buffer = io.StringIO()
        csv.writer(buffer, delimiter=self.separator, lineterminator="\n").writerows(rows)
        return buffer.getvalue()

    def _read(self, before: int) -> tuple[list[str], list[dict[str, str]], bool]:
        """The header and the rows of epochs before ``before`` in the existing file, and
        whether the file is exactly those (so that rows can be appended to it)."""
        text = self.path.read_text(encoding="utf-8")
        lines = list(csv.reader(io.StringIO(text, newline=""), delimiter=self.separator))
        if not lines:
            return [], [], False
        header, *body = lines
        if "epoch" not in header:
            raise ValueError(
                f"CSVLogger: {self.path} has no 'epoch' column (header {header[:5]}): not a log "
                "of CSVLogger, so append=True cannot continue it; name another file, or pass "
                "append=False to replace it"
            )
        rows = []
        for cells in body:
            row = dict(zip(header, cells))
            if len(cells) == len(header) and _epoch(row["epoch"]) < before:
                rows.append(row)
        intact = len(rows) == len(body) and text.endswith("\n")
        return header, rows, intact

    def __repr__(self) -> str:
        return f"CSVLogger({str(self.path)!r}, append={self.append})"


def _format(value: Any) -> str:
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return str(int(value))
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return repr(float(value))  # the shortest text that reads back as the same float
    return str(value)


def _epoch(text: str) -> float:
    try:
        return int(text)
    except ValueError:
        return math.inf  # not an epoch number: a damaged row, dropped


def _tensorboardx() -> Any:
    try:
        return importlib.import_module("tensorboardX")
    except ImportError as exc:
        raise ImportError(
            'TensorBoard needs the tensorboardX package: pip install "nnlayers[tensorboard]" '
            '(or pip install "tensorboardx>=2.6")'
        ) from exc


class TensorBoard(Callback):
    """Write the metrics as TensorBoard event files under ``log_dir`` (``tensorboard --logdir
    logs``), through ``tensorboardX`` (``pip install "nnlayers[tensorboard]"``).

    Keras's layout and names: ``log_dir/train`` gets ``epoch_loss``, ``epoch_accuracy``, ...
    (and ``epoch_lr``, ``epoch_time``, ``epoch_examples_per_second``) at each epoch's number,
    ``log_dir/validation`` the ``val_`` metrics under the same names, so TensorBoard draws
    the two curves on one chart. The files are flushed at the end of every epoch.

    ``update_freq``: ``"epoch"`` (the default) writes nothing per step and adds no per-step
    work; an int ``N`` (or ``"batch"``, 1) also writes ``batch_loss``, ... every ``N`` training
    steps, at the global step: each of those reads one step's metrics from the device (one
    synchronisation every ``N`` steps).

    >>> TensorBoard("logs", update_freq=100)  # doctest: +SKIP
    TensorBoard('logs', update_freq=100)
    """

    def __init__(self, log_dir: str | Path = "logs", *, update_freq: str | int = "epoch") -> None:
        self._module = _tensorboardx()
        if update_freq == "batch":
            update_freq = 1
        if update_freq != "epoch" and (
            isinstance(update_freq, bool) or not isinstance(update_freq, int) or update_freq < 1
        ):
            raise ValueError(
                f"TensorBoard: update_freq must be 'epoch', 'batch' or an int >= 1 (steps), got "
                f"{update_freq!r}"
            )
        self.log_dir = Path(log_dir)
        self.update_freq = update_freq
        self._writers: dict[str, Any] = {}
        if isinstance(update_freq, int):
            # fit calls per-batch hooks only where a callback has them: only this one does
            self.on_train_batch_end = self._write_batch  # type: ignore[method-assign]

    def _writer(self, which: str) -> Any:
        writer = self._writers.get(which)
        if writer is None:
            writer = self._module.SummaryWriter(logdir=os.fspath(self.log_dir / which))
            self._writers[which] = writer
        return writer

    def on_epoch_end(self, epoch: int, logs: Mapping[str, float]) -> None:
        if not is_main_rank():  # in a data-parallel run, rank 0 alone writes the events
            return
        for name, value in logs.items():
            if name.startswith("val_"):
                self._writer("validation").add_scalar(f"epoch_{name[4:]}", value, epoch)
            else:
                self._writer("train").add_scalar(f"epoch_{name}", value, epoch)
        for writer in self._writers.values():
            writer.flush()

    def _write_batch(self, step: int, logs: BatchLogs) -> None:
        assert isinstance(self.update_freq, int)
        if logs.global_step % self.update_freq == 0 and is_main_rank():
            writer = self._writer("train")
            for name, value in logs.items():
                writer.add_scalar(f"batch_{name}", value, logs.global_step)

    def on_train_end(self) -> None:
        writers, self._writers = self._writers, {}
        for writer in writers.values():
            writer.close()

    def __repr__(self) -> str:
        return f"TensorBoard({str(self.log_dir)!r}, update_freq={self.update_freq!r})"


__all__ = ["CSVLogger", "TensorBoard"]
