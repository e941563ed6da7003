"""``Sequential``: layers (or any functions of an expression) applied one after another."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

from ..expr.node import Expr
from ..expr.spec import Spec
from .base import ACTIVATIONS, Layer, get_activation

Step = Layer | Callable[[Expr], Expr]


class Sequential(Layer):
    """A chain: ``Sequential([a, b, c])(x) == c(b(a(x)))``.

    Items are layers, functions of an expression (``ex.relu``, ``lambda h: h * 2``) or
    activation names (``"relu"``). A ``Sequential`` is itself a layer: nest it, reuse it
    (shared weights) or give it to a model. With ``seed=`` every item made without its own seed
    gets one derived from it, so the whole stack starts from the same weights every time.
    Items keep their own names (``affine``, made unique by a model), except in a ``Sequential``
    that is itself a part named under a block (``self.body = Sequential([...])``): there items
    without a name of their own are named by position, ``block/body/0``, as in PyTorch.

    >>> import nnlayers.expr as ex
    >>> from nnlayers.layers import Affine, Conv2D, Flatten, Pool2D, Sequential
    >>> net = Sequential(
    ...     [Conv2D(8, 3, padding="same"), "relu", Pool2D(2), Flatten(), Affine(10)], seed=0
    ... )
    >>> net(ex.placeholder((None, 1, 8, 8))).shape
    (None, 10)
    >>> [p.name for p in net.params]
    ['conv2d/weight', 'conv2d/bias', 'affine/weight', 'affine/bias']
    """

    _untracked = ("layers",)  # the items: named, seeded and listed by Sequential itself

    def __init__(
        self, layers: Iterable[Step | str] = (), *, name: str | None = None, seed: int | None = None
    ) -> None:
        super().__init__(name=name, seed=seed)
        self.layers: list[Step] = []
        for item in layers:
            self.add(item)

    def add(self, item: Step | str) -> Sequential:
        """Append a layer, function or activation name; returns ``self``."""
        if isinstance(item, str):
            if item not in ACTIVATIONS:
                get_activation(item)  # raises the error that lists the names
            item = ACTIVATIONS[item]
        if not callable(item):
            raise TypeError(f"Sequential: items must be layers or functions, got {item!r}")
        self.layers.append(item)
        return self

    def build(self, spec: Spec) -> None:
        if self._named_by is not None:
            for i, item in enumerate(self.layers):
                named = isinstance(item, Layer) and (item.built or item._name_given)
                if isinstance(item, Layer) and not named and item._named_by is None:
                    item.__dict__["name"] = f"{self.name}/{i}"
                    item.__dict__["_named_by"] = (self, str(i))
        if self.seed is None:
            return
        for i, item in enumerate(self.layers):
            if isinstance(item, Layer) and item.seed is None and not item.built:
                state = np.random.SeedSequence([self.seed, i]).generate_state(2, np.uint32)
                item.seed = (int(state[0]) << 31) ^ int(state[1])

    def forward(self, x: Expr) -> Expr:
        for item in self.layers:
            x = item(x)
        return x

    def sublayers(self) -> list[Layer]:
        items = [item for item in self.layers if isinstance(item, Layer)]
        seen = {id(item) for item in items}
        return items + [layer for layer in super().sublayers() if id(layer) not in seen]

    def __getitem__(self, index: int) -> Step:
        return self.layers[index]

    def __len__(self) -> int:
        return len(self.layers)

    def __iter__(self) -> Iterator[Step]:
        return iter(self.layers)

    def __repr__(self) -> str:
        inner = ",\n".join(f"    {_describe(item)}" for item in self.layers)
        return f"Sequential([\n{inner}\n])" if self.layers else "Sequential([])"

    def config(self) -> dict[str, Any]:
        return {"layers": len(self.layers), "name": self.name}


def _describe(item: Any) -> str:
    if isinstance(item, Layer):
        return repr(item).replace("\n", "\n    ")
    return getattr(item, "__name__", repr(item))
