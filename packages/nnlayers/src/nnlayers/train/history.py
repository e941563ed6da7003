"""``History``: the per-epoch metrics of a training run."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from typing import Any


class History:
    """One record per epoch (``{"epoch": 3, "loss": ..., "val_accuracy": ...}``).

    ``history["loss"]`` is the list of a metric over the epochs (NaN where an epoch lacks it),
    ``history.last`` the latest record, ``history.best("val_loss")`` the best epoch.

    >>> h = History([{"epoch": 1, "loss": 0.9}, {"epoch": 2, "loss": 0.5, "val_loss": 0.6}])
    >>> h["loss"], h.keys(), h.best("loss")
    ([0.9, 0.5], ['loss', 'val_loss'], (2, 0.5))
    """

    def __init__(self, records: list[Mapping[str, Any]] | None = None) -> None:
        self.records: list[dict[str, Any]] = [dict(r) for r in records or []]

    def append(self, record: Mapping[str, Any]) -> None:
        """Add one epoch's record."""
        self.records.append(dict(record))

    def keys(self) -> list[str]:
        """Metric names, in the order they first appear (``epoch`` left out)."""
        names: dict[str, None] = {}
        for r in self.records:
            names.update(dict.fromkeys(k for k in r if k != "epoch"))
        return list(names)

    def __getitem__(self, name: str) -> list[float]:
        if not any(name in r for r in self.records) and self.records:
            raise KeyError(f"history has no metric {name!r}; it has {', '.join(self.keys())}")
        return [float(r.get(name, math.nan)) for r in self.records]

    def __contains__(self, name: object) -> bool:
        return any(name in r for r in self.records)

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.records)

    @property
    def epochs(self) -> list[int]:
        """The epoch numbers (1-based, counting epochs completed before a resume)."""
        return [int(r.get("epoch", i + 1)) for i, r in enumerate(self.records)]

    @property
    def last(self) -> dict[str, Any]:
        """The latest record (empty before the first epoch)."""
        return self.records[-1] if self.records else {}

    def best(self, name: str, mode: str = "auto") -> tuple[int, float]:
        """``(epoch, value)`` where ``name`` was best: lowest, or highest for accuracies
        (``mode="auto"``), or as ``mode`` (``"min"``/``"max"``) says."""
        sign = 1.0 if resolve_mode(name, mode) == "min" else -1.0
        if name not in self:
            raise ValueError(f"history: no value of {name!r} yet")
        candidates = [(sign * v, e) for e, v in zip(self.epochs, self[name]) if not math.isnan(v)]
        if not candidates:
            raise ValueError(f"history: no value of {name!r} yet")
        value, epoch = min(candidates)
        return epoch, sign * value

    def as_dict(self) -> dict[str, list[float]]:
        """``{"epoch": [...], "loss": [...], ...}``."""
        return {"epoch": [float(e) for e in self.epochs], **{k: self[k] for k in self.keys()}}

    def to_json(self) -> str:
        """The records as JSON (stored in checkpoints)."""
        return json.dumps(self.records)

    @classmethod
    def from_json(cls, text: str) -> History:
        """The inverse of :meth:`to_json`."""
        return cls(json.loads(text))

    def __repr__(self) -> str:
        last = ", ".join(f"{k}={v:.4g}" for k, v in self.last.items() if k != "epoch")
        return f"<History {len(self)} epochs{': ' + last if last else ''}>"


def resolve_mode(name: str, mode: str) -> str:
    """``"min"`` or ``"max"``: ``auto`` maximises accuracies, minimises everything else."""
    if mode not in ("auto", "min", "max"):
        raise ValueError(f"mode must be 'auto', 'min' or 'max', got {mode!r}")
    if mode != "auto":
        return mode
    return "max" if "acc" in name else "min"
